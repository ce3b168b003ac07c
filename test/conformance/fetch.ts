import { describe, expect, it } from 'vitest';
import { receiptOf } from '../../src/core/backend.js';
import { appendN, expectCode, fetchAll, pos, readAll, sequences, useFixture, type BackendFactory } from './fixture.js';

export function registerFetchTests(makeBackend: BackendFactory): void {
  describe('fetch', () => {
    const fx = useFixture(makeBackend);

    it('returns a lease with attempt 1, the lease window, consumer, receipt and the stored event', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const [event] = await appendN(rheo, 's', 1);
      const [lease] = await rheo.fetch('s', 'g', { consumerId: 'worker-1', leaseMs: 5000 });
      expect(lease).toMatchObject({ stream: 's', group: 'g', consumerId: 'worker-1', attempt: 1 });
      expect(lease!.receipt).toBe(receiptOf('s', 'g', 0, 1));
      expect(lease!.leasedAt.getTime()).toBe(clock.now());
      expect(lease!.expiresAt.getTime()).toBe(clock.now() + 5000);
      expect(lease!.event).toEqual(event);
      expect(typeof lease!.leaseId).toBe('string');
      expect(lease!.leaseId.length).toBeGreaterThanOrEqual(16);
    });

    it('uses the default leaseMs of 30 seconds when none is given', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      const [lease] = await rheo.fetch('s', 'g');
      expect(lease!.expiresAt.getTime() - clock.now()).toBe(30_000);
    });

    it('returns [] when nothing is claimable', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      expect(await rheo.fetch('s', 'g')).toEqual([]);
      await appendN(rheo, 's', 2);
      expect(await rheo.fetch('s', 'g')).toHaveLength(2);
      expect(await rheo.fetch('s', 'g')).toEqual([]);
    });

    it('claims at most limit deliveries, lowest sequence first', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 10);
      expect(sequences(await rheo.fetch('s', 'g', { limit: 3 }))).toEqual([1, 2, 3]);
      expect(sequences(await rheo.fetch('s', 'g', { limit: 3 }))).toEqual([4, 5, 6]);
      expect(sequences(await rheo.fetch('s', 'g', { limit: 1 }))).toEqual([7]);
      expect(sequences(await rheo.fetch('s', 'g', { limit: 100 }))).toEqual([8, 9, 10]);
    });

    it('gives every lease a distinct leaseId', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 20);
      const leases = await rheo.fetch('s', 'g', { limit: 20 });
      expect(new Set(leases.map((l) => l.leaseId)).size).toBe(20);
    });

    it('is fair across partitions: a backlog in partition 0 does not starve the others', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 4 });
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 100, { partition: 0 });
      for (const p of [1, 2, 3]) await appendN(rheo, 's', 1, { partition: p });
      const leases = await rheo.fetch('s', 'g', { limit: 4 });
      expect(leases.map(pos).sort()).toEqual(['0:1', '1:1', '2:1', '3:1']);
    });

    it('round-robins one per partition per round, lowest sequence first within each', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await rheo.createGroup('s', 'g');
      for (const p of [0, 1, 2]) await appendN(rheo, 's', 5, { partition: p });
      const leases = await rheo.fetch('s', 'g', { limit: 7 });
      const perPartition = [0, 1, 2].map((p) => leases.filter((l) => l.event.partition === p).map((l) => l.event.sequence));
      expect(perPartition.map((s) => s.length).sort()).toEqual([2, 2, 3]);
      for (const seqs of perPartition) expect(seqs).toEqual([1, 2, 3].slice(0, seqs.length));
    });

    it('rotates the starting partition so limit-1 fetches visit every partition', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await rheo.createGroup('s', 'g');
      for (const p of [0, 1, 2]) await appendN(rheo, 's', 10, { partition: p });
      const seen = new Set<number>();
      for (let i = 0; i < 3; i++) {
        const [lease] = await rheo.fetch('s', 'g', { limit: 1 });
        seen.add(lease!.event.partition);
      }
      expect([...seen].sort()).toEqual([0, 1, 2]);
    });

    it('claims only from the partitions asked for', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await rheo.createGroup('s', 'g');
      for (const p of [0, 1, 2]) await appendN(rheo, 's', 3, { partition: p });
      const leases = await fetchAll(rheo, 's', 'g', { partitions: [2, 0] });
      expect(leases.map(pos).sort()).toEqual(['0:1', '0:2', '0:3', '2:1', '2:2', '2:3']);
      expect((await rheo.fetch('s', 'g', { limit: 10 })).map(pos)).toEqual(['1:1', '1:2', '1:3']);
    });

    it('fetch from a partition the stream does not have is invalid_partition', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      await expectCode(rheo.fetch('s', 'g', { partitions: [0, 2] }), 'invalid_partition');
      expect((await rheo.groupInfo('s', 'g')).inflight).toBe(0);
    });

    it('competing concurrent fetches never lease the same delivery twice', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 4 });
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', Array.from({ length: 60 }, (_, i) => ({ payload: i, key: `k-${i}` })));
      const batches = await Promise.all(
        Array.from({ length: 25 }, (_, i) => rheo.fetch('s', 'g', { limit: 4, consumerId: `c${i}` })),
      );
      const leases = batches.flat();
      for (const batch of batches) expect(batch.length).toBeLessThanOrEqual(4);
      expect(leases.length).toBeGreaterThan(0);
      // A fetch may take fewer than it asked for while others hold the partitions
      // it would claim from (SKIP LOCKED on PostgreSQL): what the concurrent
      // fetches left is claimed after them, and no delivery twice.
      for (let more = await rheo.fetch('s', 'g', { limit: 60 }); more.length > 0; more = await rheo.fetch('s', 'g', { limit: 60 })) {
        leases.push(...more);
      }
      expect(leases).toHaveLength(60);
      expect(new Set(leases.map((l) => l.receipt)).size).toBe(60);
      expect(await rheo.fetch('s', 'g')).toEqual([]);
    });

    it('competing fetches after a mass expiry reclaim each delivery exactly once', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', Array.from({ length: 30 }, (_, i) => ({ payload: i, key: `k-${i}` })));
      await fetchAll(rheo, 's', 'g', { leaseMs: 1000 });
      clock.advance(1000);
      const batches = await Promise.all(Array.from({ length: 15 }, () => rheo.fetch('s', 'g', { limit: 3 })));
      const leases = batches.flat();
      expect(leases).toHaveLength(30);
      expect(new Set(leases.map((l) => l.receipt)).size).toBe(30);
      expect(leases.every((l) => l.attempt === 2)).toBe(true);
    });

    it('groups are independent: each sees every event, and settling in one leaves the other alone', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'billing');
      await rheo.createGroup('s', 'shipping');
      await rheo.appendBatch('s', Array.from({ length: 6 }, (_, i) => ({ payload: i, key: `k${i}` })));
      const a = await fetchAll(rheo, 's', 'billing');
      await rheo.ackMany(a);
      const b = await fetchAll(rheo, 's', 'shipping');
      expect(b.map(pos).sort()).toEqual(a.map(pos).sort());
      expect(b.every((l) => l.attempt === 1 && l.group === 'shipping')).toBe(true);
      expect((await rheo.lag('s', 'billing')).lag).toBe(0);
      expect((await rheo.lag('s', 'shipping')).lag).toBe(6);
      await rheo.reject(b[0]!, 'no');
      expect((await rheo.groupInfo('s', 'billing')).deadLetters).toBe(0);
      expect(await readAll(rheo, 's')).toHaveLength(6);
    });

    it('a group sees events appended after it was created and before', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await appendN(rheo, 's', 2);
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 2);
      expect(sequences(await fetchAll(rheo, 's', 'g'))).toEqual([1, 2, 3, 4]);
    });

    it('a group created with startAfter claims from the next sequence', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await appendN(rheo, 's', 5, { partition: 0 });
      await appendN(rheo, 's', 5, { partition: 1 });
      await rheo.createGroup('s', 'g', { startAfter: 3 });
      expect((await fetchAll(rheo, 's', 'g')).map(pos).sort()).toEqual(['0:4', '0:5', '1:4', '1:5']);
    });

    it('a group created with a per-partition startAfter map starts each partition where told', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 3 });
      for (const p of [0, 1, 2]) await appendN(rheo, 's', 4, { partition: p });
      await rheo.createGroup('s', 'g', { startAfter: { 0: 4, 2: 1 } });
      expect((await fetchAll(rheo, 's', 'g')).map(pos).sort()).toEqual(['1:1', '1:2', '1:3', '1:4', '2:2', '2:3', '2:4']);
    });

    it('a startAfter beyond the end waits for the log to grow past it', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await appendN(rheo, 's', 2);
      await rheo.createGroup('s', 'g', { startAfter: 5 });
      expect(await rheo.fetch('s', 'g')).toEqual([]);
      await appendN(rheo, 's', 4);
      expect(sequences(await rheo.fetch('s', 'g'))).toEqual([6]);
    });

    it('a group created with startAt starts at the first event at or after that time, per partition', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await appendN(rheo, 's', 2, { partition: 0 });
      await appendN(rheo, 's', 2, { partition: 1 });
      clock.advance(1000);
      const at = new Date(clock.now());
      await appendN(rheo, 's', 1, { partition: 0 });
      await appendN(rheo, 's', 1, { partition: 2 });
      await rheo.createGroup('s', 'g', { startAt: at });
      await appendN(rheo, 's', 1, { partition: 1 });
      expect((await fetchAll(rheo, 's', 'g')).map(pos).sort()).toEqual(['0:3', '1:3', '2:1']);
    });
  });

  // Backends may read fewer candidates per partition when every partition
  // has its share (PostgreSQL's claim, Redis's peek); these are the cases
  // where some partition has fewer, so the others must fill the claim.
  describe('fetch across partitions with fewer claimable events than their share', () => {
    const fx = useFixture(makeBackend);
    const appendTo = async (rheo: ReturnType<typeof fx>['rheo'], partition: number, count: number): Promise<void> => {
      await rheo.appendBatch('s', Array.from({ length: count }, (_, i) => ({ partition, payload: i })));
    };
    const byPartition = (leases: Array<{ event: { partition: number; sequence: number } }>): number[][] => {
      const out: number[][] = [];
      for (const lease of leases) (out[lease.event.partition] ??= []).push(lease.event.sequence);
      return out.map((seqs) => [...seqs].sort((a, b) => a - b));
    };

    it('an even backlog: each partition gives its share', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 4 });
      for (let p = 0; p < 4; p++) await appendTo(rheo, p, 10);
      await rheo.createGroup('s', 'g');
      expect(byPartition(await rheo.fetch('s', 'g', { limit: 8 }))).toEqual([[1, 2], [1, 2], [1, 2], [1, 2]]);
      expect(await rheo.fetch('s', 'g', { limit: 40 })).toHaveLength(32);
    });

    it('a partition with one event', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await appendTo(rheo, 0, 1);
      await appendTo(rheo, 1, 9);
      await rheo.createGroup('s', 'g');
      expect(byPartition(await rheo.fetch('s', 'g', { limit: 10 }))).toEqual([[1], [1, 2, 3, 4, 5, 6, 7, 8, 9]]);
    });

    it('a partition whose next events are held by a replay', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await appendTo(rheo, 0, 6);
      await appendTo(rheo, 1, 10);
      await rheo.createGroup('s', 'g');
      // Partition 0's 1..6 leased, 1 acked, then a replay to the start: 2..6
      // are still leased, so only 1 is claimable there.
      const first = await rheo.fetch('s', 'g', { limit: 6, partitions: [0] });
      expect(sequences(first)).toEqual([1, 2, 3, 4, 5, 6]);
      await rheo.ack(first[0]!);
      await rheo.replay('s', 'g', { fromSequence: 1 });
      expect(byPartition(await rheo.fetch('s', 'g', { limit: 10 }))).toEqual([[1], [1, 2, 3, 4, 5, 6, 7, 8, 9]]);
    });

    it('a partition whose lowest events were trimmed, before the group and before a replay', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'early');
      await appendTo(rheo, 0, 5);
      await appendTo(rheo, 1, 2);
      await rheo.trim('s', { keep: 2, force: true });
      await appendTo(rheo, 1, 8);
      await rheo.createGroup('s', 'g');
      expect(byPartition(await rheo.fetch('s', 'g', { limit: 10 }))).toEqual([[4, 5], [1, 2, 3, 4, 5, 6, 7, 8]]);
      await rheo.replay('s', 'early', { fromSequence: 1 });
      expect(byPartition(await rheo.fetch('s', 'early', { limit: 10 }))).toEqual([[4, 5], [1, 2, 3, 4, 5, 6, 7, 8]]);
    });
  });
}
