import { describe, expect, it } from 'vitest';
import { KeyQueue } from '../../src/runtime/key-queue.js';

/*
 * The per-key ordering queue the consumer's `orderBy` runs on: one item per
 * key in flight, later items of that key parked oldest first and handed the
 * key one by one; other keys never wait. test/consumer/concurrency.test.ts
 * runs `orderBy` end to end on every backend.
 */

describe('KeyQueue', () => {
  it('lets the first item of a key start, parks the later ones in order, and never holds up other keys', () => {
    const q = new KeyQueue<number>();
    expect([q.enter('a', 1), q.enter('a', 2), q.enter('b', 3), q.enter('a', 4)]).toEqual([true, false, true, false]);
    expect(q.parkedCount).toBe(2);
    expect(q.leave('a')).toBe(2);
    expect(q.parkedCount).toBe(1);
    expect(q.leave('b')).toBeUndefined();
    expect(q.enter('b', 5)).toBe(true); // b is free again
    expect(q.leave('a')).toBe(4);
    expect(q.leave('a')).toBeUndefined(); // a is free now
    expect(q.enter('a', 6)).toBe(true);
    expect(q.parkedCount).toBe(0);
    expect(q.leave('never-entered')).toBeUndefined();
  });

  it('unpark takes out a parked item only (not the one holding the key, not an unknown one)', () => {
    const q = new KeyQueue<string>();
    q.enter('k', 'x');
    q.enter('k', 'y');
    q.enter('k', 'z');
    expect(q.unpark('k', 'x')).toBe(false); // holds the key: not parked
    expect(q.unpark('k', 'y')).toBe(true);
    expect(q.unpark('k', 'y')).toBe(false);
    expect(q.unpark('other', 'z')).toBe(false);
    expect(q.parkedCount).toBe(1);
    expect(q.leave('k')).toBe('z');
  });

  it('clear hands back every parked item and frees every key', () => {
    const q = new KeyQueue<number>();
    for (const [key, n] of [['a', 1], ['a', 2], ['b', 3], ['b', 4], ['a', 5]] as const) q.enter(key, n);
    expect(q.clear().sort()).toEqual([2, 4, 5]);
    expect(q.parkedCount).toBe(0);
    expect([q.enter('a', 6), q.enter('b', 7)]).toEqual([true, true]);
  });
});
