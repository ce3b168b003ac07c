import { describe, expect, it } from 'vitest';
import { WorkQueue } from '../../src/runtime/work-queue.js';

const item = (n: number): { n: number } => ({ n });

describe('WorkQueue', () => {
  it('shifts in push order and reports undefined when empty', () => {
    const queue = new WorkQueue<{ n: number }>();
    expect(queue.shift()).toBeUndefined();
    for (let n = 1; n <= 3; n++) queue.push(item(n));
    expect(queue.length).toBe(3);
    expect([queue.shift()?.n, queue.shift()?.n]).toEqual([1, 2]);
    queue.push(item(4));
    expect([queue.shift()?.n, queue.shift()?.n, queue.shift()]).toEqual([3, 4, undefined]);
    expect(queue.length).toBe(0);
  });

  it('withdraws the oldest match only, and shift skips the hole it leaves', () => {
    const queue = new WorkQueue<{ n: number }>();
    for (const n of [1, 2, 2, 3]) queue.push(item(n));
    expect(queue.withdraw((i) => i.n === 2)).toBe(true);
    expect(queue.withdraw((i) => i.n === 9)).toBe(false);
    expect(queue.length).toBe(3);
    expect(queue.withdraw((i) => i.n === 1)).toBe(true);
    expect([queue.shift()?.n, queue.shift()?.n, queue.shift()]).toEqual([2, 3, undefined]);
  });

  it('a shift that finds only holes leaves the length at zero', () => {
    const queue = new WorkQueue<{ n: number }>();
    queue.push(item(1));
    queue.push(item(2));
    expect(queue.withdraw((i) => i.n === 2)).toBe(true);
    expect(queue.shift()?.n).toBe(1);
    expect(queue.shift()).toBeUndefined(); // skips the hole 2 left
    expect(queue.length).toBe(0);
    queue.push(item(3));
    expect(queue.length).toBe(1);
    expect(queue.shift()?.n).toBe(3);
  });

  it('drain returns what waits, oldest first, without the holes, and empties the queue', () => {
    const queue = new WorkQueue<{ n: number }>();
    for (let n = 1; n <= 5; n++) queue.push(item(n));
    queue.shift();
    queue.withdraw((i) => i.n === 3);
    expect(queue.drain().map((i) => i.n)).toEqual([2, 4, 5]);
    expect(queue.length).toBe(0);
    expect(queue.shift()).toBeUndefined();
  });

  it('keeps order across the compaction of a queue that never runs empty', () => {
    const queue = new WorkQueue<{ n: number }>();
    const shifted: number[] = [];
    let next = 0;
    for (let round = 0; round < 5000; round++) {
      queue.push(item(next++));
      queue.push(item(next++));
      shifted.push(queue.shift()!.n);
    }
    expect(queue.length).toBe(5000);
    while (queue.length > 0) shifted.push(queue.shift()!.n);
    expect(shifted).toEqual(Array.from({ length: next }, (_, n) => n));
  });
});

describe('WorkQueue memory', () => {
  /** The most slots held while `waiting` items stay queued through `rounds` push-and-shift turns. */
  const steadyPeak = (waiting: number, rounds: number): { peak: number; queue: WorkQueue<{ n: number }> } => {
    const queue = new WorkQueue<{ n: number }>();
    for (let n = 0; n < waiting; n++) queue.push(item(n));
    let peak = queue.slots;
    for (let round = 0; round < rounds; round++) {
      queue.push(item(round));
      peak = Math.max(peak, queue.slots);
      queue.shift();
    }
    return { peak, queue };
  };

  it('holds no slots once it has run empty', () => {
    const queue = new WorkQueue<{ n: number }>();
    for (let n = 0; n < 3; n++) queue.push(item(n));
    expect(queue.slots).toBe(3);
    queue.shift();
    queue.shift();
    expect(queue.slots).toBe(3); // consumed slots stay until the head passes 1024 or the queue empties
    queue.shift();
    expect(queue.slots).toBe(0);
    queue.push(item(4));
    queue.withdraw((i) => i.n === 4);
    queue.shift(); // finds only the hole
    expect(queue.slots).toBe(0);
  });

  it('a short queue that never runs empty drops its consumed slots once 1024 pile up', () => {
    // Ten wait; each turn pushes one and shifts one. The peak is 1,034 slots
    // (1,023 consumed, 11 waiting after a push); the shift whose head reaches 1024 compacts.
    const { peak, queue } = steadyPeak(10, 20_000);
    expect(peak).toBe(1024 + 10);
    expect(queue.length).toBe(10);
    expect(queue.slots).toBeLessThanOrEqual(1024 + 10);
  });

  it('a long queue that never runs empty holds at most about twice what waits', () => {
    // 3,000 wait: consumed slots are dropped once they are at least half the array.
    const { peak, queue } = steadyPeak(3000, 20_000);
    expect(peak).toBe(2 * 3000); // the shift whose head reaches 3,000 compacts
    expect(queue.length).toBe(3000);
  });
});
