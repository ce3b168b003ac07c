import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { RheoError } from '../../src/core/errors.js';
import { LazyAbort } from '../../src/runtime/lazy-abort.js';
import {
  LostLeases,
  isThenable,
  parseOutcome,
  settleLease,
  settlementOf,
  thrownSettlement,
  type SettleErrorInfo,
  type SinkLeaseLostInfo,
} from '../../src/runtime/lease-outcome.js';
import { FakeSettler, fakeLease } from '../support/fake-settler.js';

const EXPECTED = "expected nothing, 'ack', { retry: reason, delayMs? } or { reject: reason }";

describe('parseOutcome', () => {
  it('reads the outcomes', () => {
    expect(parseOutcome(undefined)).toEqual({ kind: 'ack' });
    expect(parseOutcome('ack')).toEqual({ kind: 'ack' });
    expect(parseOutcome({ retry: 'later' })).toEqual({ kind: 'nack', reason: 'later', delayMs: 0 });
    expect(parseOutcome({ retry: 'later', delayMs: undefined })).toEqual({ kind: 'nack', reason: 'later', delayMs: 0 });
    expect(parseOutcome({ retry: '', delayMs: 0 })).toEqual({ kind: 'nack', reason: '', delayMs: 0 });
    expect(parseOutcome({ retry: 'x', delayMs: 604_800_000 })).toEqual({ kind: 'nack', reason: 'x', delayMs: 604_800_000 });
    expect(parseOutcome({ reject: 'poison' })).toEqual({ kind: 'reject', reason: 'poison' });
    expect(parseOutcome({ reject: 'poison', extra: undefined })).toEqual({ kind: 'reject', reason: 'poison' });
  });

  it('refuses anything else, saying what came back', () => {
    const problem = (value: unknown): string => {
      const parsed = parseOutcome(value);
      if (parsed.kind !== 'invalid') throw new Error(`${JSON.stringify(value)} was read as ${parsed.kind}`);
      return parsed.problem;
    };
    expect(problem(null)).toBe(`handler returned null; ${EXPECTED}`);
    expect(problem('nack')).toBe(`handler returned "nack"; ${EXPECTED}`);
    expect(problem(['ack'])).toBe(`handler returned an array; ${EXPECTED}`);
    expect(problem(42)).toBe(`handler returned 42; ${EXPECTED}`);
    expect(problem({ retyr: 'x' })).toBe(`handler returned an object with keys ["retyr"]; ${EXPECTED}`);
    expect(problem({ retry: 'x', reject: 'y' })).toMatch(/^handler returned an object with keys \["retry","reject"\]/);
    expect(problem({ retry: 'x', extra: 1 })).toMatch(/keys \["retry","extra"\]/);
    expect(problem({ retry: 1 })).toMatch(/keys \["retry"\]/);
    expect(problem({ reject: 'y', delayMs: 5 })).toMatch(/keys \["reject","delayMs"\]/);
    expect(problem({ reject: 7 })).toMatch(/keys \["reject"\]/);
    expect(problem({})).toBe(`handler returned an object with keys []; ${EXPECTED}`);
    for (const delayMs of [-1, 1.5, 604_800_001, '5', Number.NaN]) {
      expect(problem({ retry: 'x', delayMs })).toMatch(/^retry delayMs must be an integer in 0\.\.604800000, got /);
    }
    expect(problem({ retry: 'x', delayMs: -1 })).toBe('retry delayMs must be an integer in 0..604800000, got -1');
    expect(problem({ retry: 'x', delayMs: '5' })).toBe('retry delayMs must be an integer in 0..604800000, got "5"');
  });

  it('settlementOf nacks an invalid outcome at once, naming the problem', () => {
    expect(settlementOf({ reject: 'bad' })).toEqual({ kind: 'reject', reason: 'bad' });
    expect(settlementOf(null)).toEqual({ kind: 'nack', reason: `invalid handler outcome: handler returned null; ${EXPECTED}`, delayMs: 0 });
  });
});

describe('thrownSettlement and isThenable', () => {
  it('nacks with the message, the error name when the message is empty, or the thrown value', () => {
    expect(thrownSettlement(new Error('boom'))).toEqual({ kind: 'nack', reason: 'boom', delayMs: 0 });
    expect(thrownSettlement(new RangeError(''))).toEqual({ kind: 'nack', reason: 'RangeError', delayMs: 0 });
    expect(thrownSettlement(42)).toEqual({ kind: 'nack', reason: '42', delayMs: 0 });
  });

  it('knows a thenable from a plain outcome', () => {
    expect(isThenable(Promise.resolve())).toBe(true);
    expect(isThenable({ then: () => {} })).toBe(true);
    const fn = Object.assign(() => {}, { then: () => {} });
    expect(isThenable(fn)).toBe(true);
    for (const value of [undefined, null, 'ack', { then: 'no' }, { retry: 'x' }, () => {}]) expect(isThenable(value)).toBe(false);
  });
});

describe('settleLease', () => {
  it('settles by kind through the producer and never rejects: a failure becomes an event', async () => {
    const producer = new FakeSettler();
    const events = new EventEmitter();
    const lease = fakeLease(1);
    await settleLease(producer.settler, lease, { kind: 'nack', reason: 'r', delayMs: 7 }, events);
    await settleLease(producer.settler, lease, { kind: 'reject', reason: 'p' }, events);
    await settleLease(producer.settler, lease, { kind: 'release' }, events);
    await settleLease(producer.settler, lease, { kind: 'ack' }, events);
    expect(producer.settles).toEqual([
      { kind: 'nack', sequence: 1, reason: 'r', delayMs: 7 },
      { kind: 'reject', sequence: 1, reason: 'p' },
      { kind: 'release', sequence: 1 },
      { kind: 'ack', sequence: 1 },
    ]);

    const errors: SettleErrorInfo<unknown>[] = [];
    const lost: SinkLeaseLostInfo<unknown>[] = [];
    events.on('settle-error', (info) => errors.push(info));
    events.on('lease-lost', (info) => lost.push(info));
    const stale = new RheoError('stale_lease', 'gone');
    const down = new RheoError('backend_unavailable', 'down');
    producer.answer = (s) => Promise.reject(s.kind === 'ack' ? stale : s.kind === 'nack' ? down : 'text');
    await expect(settleLease(producer.settler, lease, { kind: 'ack' }, events)).resolves.toBeUndefined();
    await settleLease(producer.settler, lease, { kind: 'nack', reason: 'r', delayMs: 0 }, events);
    await settleLease(producer.settler, lease, { kind: 'release' }, events);
    expect(lost.map((l) => l.error)).toEqual([stale]);
    expect(errors.map((e) => [e.op, e.error.code, e.error.message])).toEqual([
      ['nack', 'backend_unavailable', 'down'],
      ['release', 'internal', 'settle failed: text'],
    ]);
    expect(errors[1]!.error.cause).toBe('text');
  });

  it('a producer that throws instead of rejecting is reported the same way', async () => {
    const producer = new FakeSettler();
    const events = new EventEmitter();
    const errors: SettleErrorInfo<unknown>[] = [];
    events.on('settle-error', (info) => errors.push(info));
    producer.ack = () => {
      throw new TypeError('not a lease');
    };
    await settleLease(producer.settler, fakeLease(1), { kind: 'ack' }, events);
    expect(errors.map((e) => [e.op, e.error.code, e.error.message])).toEqual([['ack', 'internal', 'settle failed: not a lease']]);
  });
});

describe('LostLeases', () => {
  it('remembers ids until taken once, forgetting the oldest past its bound', () => {
    const lost = new LostLeases(2);
    lost.add('a');
    lost.add('b');
    expect(lost.take('a')).toBe(true);
    expect(lost.take('a')).toBe(false);
    lost.add('a');
    lost.add('c'); // three held: b, the oldest, goes
    expect([lost.take('b'), lost.take('a'), lost.take('c')]).toEqual([false, true, true]);
    const bounded = new LostLeases();
    for (let i = 0; i <= 10_000; i++) bounded.add(`id${i}`);
    expect([bounded.take('id0'), bounded.take('id1'), bounded.take('id10000')]).toEqual([false, true, true]);
  });
});

describe('LazyAbort', () => {
  it('replays an abort that happened before the signal was read, and the first reason wins', () => {
    const early = new LazyAbort();
    expect(early.aborted).toBe(false);
    early.abort('first');
    early.abort('second');
    expect(early.aborted).toBe(true);
    expect(early.signal.aborted).toBe(true);
    expect(early.signal.reason).toBe('first');

    const late = new LazyAbort();
    const signal = late.signal;
    expect(late.signal).toBe(signal);
    expect(signal.aborted).toBe(false);
    late.abort('now');
    late.abort('again');
    expect([signal.aborted, signal.reason]).toEqual([true, 'now']);
  });
});

