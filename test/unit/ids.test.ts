import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { newLeaseId, uuidv7 } from '../../src/core/ids.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

function timestampOf(id: string): number {
  return Number.parseInt(id.replaceAll('-', '').slice(0, 12), 16);
}

describe('uuidv7', () => {
  it('has the RFC 9562 version and variant bits', () => {
    for (let i = 0; i < 100; i++) expect(uuidv7()).toMatch(UUID_V7);
  });

  it('carries the clock time in its first 48 bits', () => {
    const clock = new ManualClock(Date.UTC(2030, 5, 15, 8, 30));
    expect(timestampOf(uuidv7(clock))).toBe(clock.now());
  });

  it('sorts in generation order within one millisecond', () => {
    const clock = new ManualClock(Date.UTC(2031, 0, 1));
    const ids = Array.from({ length: 1000 }, () => uuidv7(clock));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(1000);
  });

  it('sorts in generation order across advancing milliseconds', () => {
    const clock = new ManualClock(Date.UTC(2032, 0, 1));
    const ids: string[] = [];
    for (let i = 0; i < 200; i++) {
      ids.push(uuidv7(clock));
      if (i % 7 === 0) clock.advance(1);
    }
    expect([...ids].sort()).toEqual(ids);
  });

  it('stays in order when the clock goes backwards', () => {
    const clock = new ManualClock(Date.UTC(2033, 0, 1));
    const first = uuidv7(clock);
    clock.set(Date.UTC(2032, 11, 31));
    const second = uuidv7(clock);
    expect(second > first).toBe(true);
  });

  it('stays in order past 4096 ids in one millisecond', () => {
    const clock = new ManualClock(Date.UTC(2034, 0, 1));
    const ids = Array.from({ length: 5000 }, () => uuidv7(clock));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(5000);
  });
});

describe('newLeaseId', () => {
  it('is 22 base64url characters of fresh randomness (132 bits), unique', () => {
    const ids = Array.from({ length: 1000 }, () => newLeaseId());
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(new Set(ids).size).toBe(1000);
  });

  it('keeps producing valid ids across many refills of its random pool', () => {
    const ids = Array.from({ length: 5000 }, () => newLeaseId());
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(new Set(ids).size).toBe(5000);
    // Every character position takes many values: no position is fixed by the encoding.
    for (let i = 0; i < 22; i++) expect(new Set(ids.map((id) => id[i])).size).toBeGreaterThan(60);
  });
});
