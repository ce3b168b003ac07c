import { describe, expect, it } from 'vitest';
import { Coalescer } from '../../src/core/coalescer.js';

/** Far more turns than the coalescer needs between a submit and its call (two or three). */
const MAX_TURNS = 100;

/** A send that records each call and answers when told to. */
function gatedSend() {
  const calls: number[][] = [];
  const gates: Array<() => void> = [];
  const send = async (items: number[]): Promise<string[]> => {
    calls.push(items);
    await new Promise<void>((resolve) => gates.push(resolve));
    if (items.includes(-1)) throw new Error('boom');
    return items.map((n) => `r${n}`);
  };
  /**
   * Answers the oldest call, waiting a bounded number of turns for it to be
   * made: a call that never comes (say, the coalescer put two items that
   * should wait for each other into one call, so one call fewer is made)
   * fails here at once, naming the calls made, instead of spinning on
   * microtasks forever and starving the test's timeout.
   */
  const open = async (): Promise<void> => {
    for (let turn = 0; gates.length === 0; turn++) {
      if (turn === MAX_TURNS) throw new Error(`no call to answer after ${MAX_TURNS} turns; calls made: ${JSON.stringify(calls)}`);
      await Promise.resolve();
    }
    gates.shift()!();
  };
  return { calls, send, open };
}

describe('Coalescer', () => {
  it('sends what one turn submits as one call, and what arrives while a call runs as the next', async () => {
    const { calls, send, open } = gatedSend();
    const c = new Coalescer(send);
    const first = [c.submit(1), c.submit(2)];
    await open();
    expect(calls).toEqual([[1, 2]]);
    const later = [c.submit(3), c.submit(4), c.submit(5)];
    // The second call waits for the first answer.
    expect(await Promise.all(first)).toEqual(['r1', 'r2']);
    await open();
    expect(await Promise.all(later)).toEqual(['r3', 'r4', 'r5']);
    expect(calls).toEqual([[1, 2], [3, 4, 5]]);
  });

  it('never puts two items with one key in a call, and keeps to maxBatch', async () => {
    const { calls, send, open } = gatedSend();
    const c = new Coalescer(send, { key: (n: number) => n % 10, maxBatch: 3 });
    const all = [1, 11, 2, 3, 4, 21].map((n) => c.submit(n));
    for (let i = 0; i < 3; i++) await open();
    expect(await Promise.all(all)).toEqual(['r1', 'r11', 'r2', 'r3', 'r4', 'r21']);
    expect(calls).toEqual([[1, 2, 3], [11, 4], [21]]);
  });

  it('rejects every item of a call that throws, and goes on with the next', async () => {
    const { calls, send, open } = gatedSend();
    const c = new Coalescer(send);
    const failed = [c.submit(7), c.submit(-1)];
    await open();
    await expect(Promise.all(failed)).rejects.toThrow('boom');
    await expect(failed[0]).rejects.toThrow('boom');
    const next = c.submit(8);
    await open();
    expect(await next).toBe('r8');
    expect(calls).toEqual([[7, -1], [8]]);
  });

  it('fails at once, instead of hanging, when a call the test waits for is never made', async () => {
    const { calls, send, open } = gatedSend();
    const c = new Coalescer(send);
    void c.submit(1);
    await open();
    await expect(open()).rejects.toThrow('no call to answer after 100 turns; calls made: [[1]]');
    expect(calls).toEqual([[1]]);
  });

  it('rejects the items a call answered no result for', async () => {
    const c = new Coalescer(async (items: number[]) => items.slice(1).map(String));
    const [a, b] = [c.submit(1), c.submit(2)];
    expect(await a).toBe('2');
    await expect(b).rejects.toThrow('answered 1 results for 2 items');
  });
});
