import { describe, expect, it } from 'vitest';
import { LeaseGate } from '../../src/consumer/lease-gate.js';
import type { Lease } from '../../src/core/types.js';
import { fakeLease } from '../support/fake-settler.js';

/*
 * The consumer's ordering gate: with an order key, one lease per key runs at
 * a time and the rest park until it finishes; `forget` drops a lease that will
 * never run (lost while waiting), and `close` hands back every lease not started.
 */

type L = Lease<{ n: number }>;

function keyed(sequence: number, key: string | null): L {
  const lease = fakeLease(sequence);
  return { ...lease, event: { ...lease.event, key } } as L;
}

function gate(orderKey: ((lease: L) => string) | null = (l) => l.event.key ?? `none-${l.event.sequence}`) {
  const arrived: number[] = [];
  const late: number[] = [];
  const g = new LeaseGate<{ n: number }>({
    orderKey,
    onArrive: (l) => arrived.push(l.event.sequence),
    onLateLease: (l) => late.push(l.event.sequence),
  });
  const out = (): number[] => {
    const seen: number[] = [];
    for (let l = g.read() as L | null; l !== null; l = g.read() as L | null) seen.push(l.event.sequence);
    return seen;
  };
  return { g, arrived, late, out };
}

const turn = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

describe('LeaseGate', () => {
  it('without an order key passes every lease through and counts it waiting until it starts', () => {
    const { g, arrived, out } = gate(null);
    g.write(keyed(1, 'a'));
    g.write(keyed(2, 'a'));
    expect(out()).toEqual([1, 2]);
    expect(arrived).toEqual([1, 2]);
    expect(g.waitingCount).toBe(2);
    expect(g.start('lease-1')).toBe(true);
    expect(g.start('lease-1')).toBe(false);
    expect(g.waitingCount).toBe(1);
  });

  it('runs one lease per key at a time, in order; other keys and a throwing key function are not held up', () => {
    const throwing = (l: L): string => {
      if (l.event.key === 'boom') throw new Error('no key');
      return l.event.key ?? `none-${l.event.sequence}`;
    };
    const { g, out } = gate(throwing);
    for (const [s, k] of [[1, 'a'], [2, 'a'], [3, 'b'], [4, 'a'], [5, 'boom'], [6, null], [7, null]] as const) g.write(keyed(s, k));
    expect(out()).toEqual([1, 3, 5, 6, 7]);
    g.finish('lease-1');
    expect(out()).toEqual([2]);
    g.finish('lease-2');
    expect(out()).toEqual([4]);
    g.finish('lease-4');
    g.write(keyed(8, 'a')); // key a is free again
    expect(out()).toEqual([8]);
    g.finish('lease-5'); // unordered: nothing to release
    expect(out()).toEqual([]);
  });

  it('forget drops a parked lease without running it, or finishes a running one; unknown ids are false', () => {
    const { g, out } = gate();
    for (const s of [1, 2, 3]) g.write(keyed(s, 'a'));
    expect(out()).toEqual([1]);
    expect(g.forget('lease-2')).toBe(true); // parked: dropped
    expect(g.waitingCount).toBe(2);
    expect(g.forget('lease-2')).toBe(false);
    expect(g.forget('lease-1')).toBe(true); // handed out, never started: finishing it releases the next
    expect(out()).toEqual([3]);
    expect(g.forget('missing')).toBe(false);
  });

  it('ends only once the parked leases have run, and close hands back what never started', async () => {
    const { g, out } = gate();
    let finished = false;
    g.on('finish', () => (finished = true));
    g.on('end', () => undefined);
    for (const s of [1, 2]) g.write(keyed(s, 'a'));
    expect(out()).toEqual([1]);
    g.end();
    await turn();
    expect(finished).toBe(false); // lease 2 is parked
    g.finish('lease-1');
    expect(out()).toEqual([2]);
    await turn();
    expect(finished).toBe(true);

    const other = gate();
    let done = false;
    other.g.on('finish', () => (done = true));
    for (const s of [1, 2, 3]) other.g.write(keyed(s, s === 3 ? 'b' : 'a'));
    expect(other.out()).toEqual([1, 3]);
    other.g.start('lease-1');
    other.g.end();
    await turn();
    expect(done).toBe(false);
    expect(other.g.close().map((l) => l.event.sequence)).toEqual([2, 3]);
    await turn();
    expect(done).toBe(true);
    expect(other.g.waitingCount).toBe(0);
  });

  it('a lease written after close is handed to onLateLease, not passed on', () => {
    const { g, late, arrived, out } = gate();
    g.close();
    g.write(keyed(9, 'a'));
    expect(late).toEqual([9]);
    expect(arrived).toEqual([]);
    expect(out()).toEqual([]);
  });
});
