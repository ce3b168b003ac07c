import { describe, expect, it } from 'vitest';
import { GroupPartition, type OpenDelivery } from '../../src/backends/memory/group-partition.js';
import { MinHeap } from '../../src/backends/memory/min-heap.js';

describe('MinHeap.retain', () => {
  it('drops rejected items and keeps heap order', () => {
    const heap = new MinHeap<number>((a, b) => a < b);
    const values = Array.from({ length: 1000 }, (_, i) => (i * 7919) % 1000);
    for (const v of values) heap.push(v);
    heap.retain((v) => v % 3 === 0);
    const popped: number[] = [];
    for (let v = heap.pop(); v !== undefined; v = heap.pop()) popped.push(v);
    expect(popped).toEqual(values.filter((v) => v % 3 === 0).sort((a, b) => a - b));
  });
});

describe('memory GroupPartition', () => {
  /** Claims the next claimable sequence at `now` with a lease until `expiresAt`. */
  function claim(part: GroupPartition, now: number, expiresAt: number, highWatermark: number): OpenDelivery {
    const next = part.nextClaimable(now, highWatermark);
    if (next === null) throw new Error('nothing claimable');
    const d = part.take(next.sequence, next.delivery);
    part.lease(d, `lease-${next.sequence}-${d.attempt}`, 'c', now, expiresAt);
    return d;
  }

  it('keeps its heaps bounded by the open window while leases are acked long before they expire', () => {
    const part = new GroupPartition(0);
    const highWatermark = 50_010;
    // Ten leases stay open throughout; fifty thousand more are claimed and acked.
    const held = Array.from({ length: 10 }, () => claim(part, 0, 30_000, highWatermark));
    let peak = 0;
    for (let i = 0; i < 50_000; i++) {
      part.close(claim(part, 0, 30_000, highWatermark));
      peak = Math.max(peak, part.heapEntries);
    }
    expect(peak).toBeLessThanOrEqual(3 * (2 * held.length + 1024));
    // The sweeps kept the live entries: the held leases expire and come back, lowest first.
    expect(part.nextClaimable(29_999, highWatermark)).toBeNull();
    const reclaimed = held.map(() => claim(part, 30_000, 60_000, highWatermark).sequence);
    expect(reclaimed).toEqual(held.map((d) => d.sequence));
    expect(part.frontier()).toBe(0);
  });

  it('reports the cursor as the frontier when a replay moved the cursor below an open delivery', () => {
    const part = new GroupPartition(0);
    const leased = Array.from({ length: 8 }, () => claim(part, 0, 30_000, 8));
    for (const d of leased.slice(0, 7)) part.close(d);
    expect(part.frontier()).toBe(7);
    // What replay fromSequence 3 does: the cursor goes back, the held lease on 8 stays open.
    part.cursor = 2;
    expect(part.frontier()).toBe(2);
    expect(claim(part, 0, 30_000, 8).sequence).toBe(3);
    expect(part.frontier()).toBe(2);
  });

  it('counts leased deliveries through reclaim, nack, reopen and close', () => {
    const part = new GroupPartition(0);
    const a = claim(part, 0, 1000, 3);
    const b = claim(part, 0, 1000, 3);
    expect(part.leasedCount).toBe(2);
    // Both expire; the lowest is reclaimed, and still counts once.
    const again = claim(part, 1000, 2000, 3);
    expect([again.sequence, again.attempt, part.leasedCount]).toEqual([1, 2, 2]);
    expect(again).toBe(a);
    part.makePending(b, 1000);
    expect(part.leasedCount).toBe(1);
    part.makePending(b, 1000); // already pending
    expect(part.leasedCount).toBe(1);
    part.close(b);
    expect(part.leasedCount).toBe(1);
    part.close(a);
    expect([part.leasedCount, part.open.size, part.frontier()]).toEqual([0, 0, 2]);
    part.reopen(1, 2000);
    expect([part.leasedCount, part.open.get(1)?.state, part.open.get(1)?.attempt, part.frontier()]).toEqual([0, 'pending', 0, 0]);
  });

  it('reopen leaves an open delivery as it is', () => {
    const part = new GroupPartition(0);
    const d = claim(part, 0, 1000, 1);
    part.reopen(1, 0);
    expect([d.state, d.attempt, d.leaseId, part.leasedCount]).toEqual(['leased', 1, 'lease-1-0', 1]);
    expect(part.nextClaimable(999, 1)).toBeNull();
  });

  it('a shorter nack delay on a later nack makes that delivery claimable first', () => {
    const part = new GroupPartition(0);
    // Long leases, so their own (now stale) expiry entries sort last.
    const one = claim(part, 0, 100_000, 2);
    const two = claim(part, 0, 100_000, 2);
    part.makePending(one, 5000);
    part.makePending(two, 1000);
    expect(part.nextClaimable(999, 2)).toBeNull();
    expect(part.nextClaimable(1000, 2)?.sequence).toBe(2);
  });

  it('skips a due entry whose delivery changed after it became due (renewed after expiry, or acked)', () => {
    const part = new GroupPartition(0);
    claim(part, 0, 1000, 3);
    const two = claim(part, 0, 1000, 3);
    const three = claim(part, 0, 1000, 3);
    // All three expire; the first is reclaimed, the others wait in the ready heap.
    expect(claim(part, 1000, 10_000, 3).sequence).toBe(1);
    part.renew(two, 3000);
    part.close(three);
    expect(part.nextClaimable(1000, 3)).toBeNull();
    expect(part.nextClaimable(3000, 3)?.sequence).toBe(2);
  });

  it('offers a lower never-offered sequence before a higher due one after the cursor went back', () => {
    const part = new GroupPartition(0);
    const leased = [1, 2, 3].map(() => claim(part, 0, 1000, 3));
    part.close(leased[0]!);
    part.close(leased[1]!);
    part.cursor = 0; // replay fromSequence 1; the lease on 3 stays open and expires
    expect(part.nextClaimable(1000, 3)?.sequence).toBe(1);
  });

  it('counts every heap entry, stale ones included', () => {
    const part = new GroupPartition(0);
    const d = claim(part, 0, 1000, 2);
    expect(part.heapEntries).toBe(2); // its open sequence and its expiry timer
    claim(part, 0, 1000, 2);
    part.nextClaimable(1000, 2); // both expired: both move to the ready heap
    expect(part.heapEntries).toBe(4);
    part.renew(d, 2000);
    expect(part.heapEntries).toBe(5);
  });
});
