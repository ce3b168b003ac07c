import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import { appendN, consumeAll, frontiers, useFixture, type BackendFactory } from './fixture.js';

export function registerFrontierTests(makeBackend: BackendFactory): void {
  describe('frontier', () => {
    const fx = useFixture(makeBackend);

    it('starts at 0 with nothing consumed', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      expect(await frontiers(rheo, 's', 'g')).toEqual([0, 0]);
    });

    it('does not pass a hole: ack 1 and 3 gives 1, then ack 2 gives 3', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 4);
      const [l1, l2, l3] = (await rheo.fetch('s', 'g', { limit: 3 })) as [Lease, Lease, Lease];
      await rheo.ack(l3);
      expect(await frontiers(rheo, 's', 'g')).toEqual([0]);
      await rheo.ack(l1);
      expect(await frontiers(rheo, 's', 'g')).toEqual([1]);
      await rheo.ack(l2);
      expect(await frontiers(rheo, 's', 'g')).toEqual([3]);
    });

    it('counts dead letters as settled', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      const [l1, l2] = (await rheo.fetch('s', 'g', { limit: 2 })) as [Lease, Lease];
      await rheo.reject(l1, 'bad');
      await rheo.ack(l2);
      expect(await frontiers(rheo, 's', 'g')).toEqual([2]);
    });

    it('is held back by a nacked delivery waiting out its delay', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      const [l1, l2, l3] = (await rheo.fetch('s', 'g')) as [Lease, Lease, Lease];
      await rheo.ack(l1);
      await rheo.nack(l2, 'later', { delayMs: 60_000 });
      await rheo.ack(l3);
      expect(await frontiers(rheo, 's', 'g')).toEqual([1]);
    });

    it('is held back by an expired lease until the delivery is settled', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 2);
      const [l1, l2] = (await rheo.fetch('s', 'g', { leaseMs: 100 })) as [Lease, Lease];
      await rheo.ack(l2);
      clock.advance(1000);
      expect(await frontiers(rheo, 's', 'g')).toEqual([0]);
      await rheo.ack(l1);
      expect(await frontiers(rheo, 's', 'g')).toEqual([2]);
    });

    it('moves per partition independently', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await rheo.createGroup('s', 'g');
      for (const p of [0, 1, 2]) await appendN(rheo, 's', 2, { partition: p });
      const leases = await rheo.fetch('s', 'g', { limit: 6 });
      const of = (p: number, s: number): Lease => leases.find((l) => l.event.partition === p && l.event.sequence === s)!;
      await rheo.ackMany([of(0, 1), of(0, 2), of(2, 2)]);
      expect(await frontiers(rheo, 's', 'g')).toEqual([2, 0, 0]);
    });

    it('starts at startAfter', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await appendN(rheo, 's', 10, { partition: 0 });
      await appendN(rheo, 's', 10, { partition: 1 });
      await rheo.createGroup('s', 'g', { startAfter: 7 });
      expect(await frontiers(rheo, 's', 'g')).toEqual([7, 7]);
      const lag = await rheo.lag('s', 'g');
      expect(lag.lag).toBe(6);
      expect(lag.partitions[1]).toMatchObject({ frontier: 7, highWatermark: 10, lag: 3 });
    });

    it('starts at a per-partition startAfter map, 0 for partitions it omits', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 3 });
      for (const p of [0, 1, 2]) await appendN(rheo, 's', 5, { partition: p });
      await rheo.createGroup('s', 'g', { startAfter: { 0: 2, 2: 5 } });
      expect(await frontiers(rheo, 's', 'g')).toEqual([2, 0, 5]);
      expect((await rheo.lag('s', 'g')).lag).toBe(3 + 5 + 0);
    });

    it('starts just before the first event at or after startAt, or at the end when there is none', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await appendN(rheo, 's', 3, { partition: 0 });
      await appendN(rheo, 's', 2, { partition: 1 });
      await appendN(rheo, 's', 1, { partition: 2 });
      clock.advance(500);
      const at = new Date(clock.now());
      await appendN(rheo, 's', 2, { partition: 0 });
      await rheo.createGroup('s', 'g', { startAt: at });
      expect(await frontiers(rheo, 's', 'g')).toEqual([3, 2, 1]);
    });

    it('a startAt equal to an event timestamp includes that event', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await appendN(rheo, 's', 1);
      clock.advance(10);
      const [second] = await appendN(rheo, 's', 1);
      clock.advance(10);
      await appendN(rheo, 's', 1);
      await rheo.createGroup('s', 'g', { startAt: second!.timestamp });
      expect(await frontiers(rheo, 's', 'g')).toEqual([1]);
    });

    it('never moves backwards as deliveries are nacked, released or expire', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 4);
      const [l1, l2, l3] = (await rheo.fetch('s', 'g', { limit: 3, leaseMs: 100 })) as [Lease, Lease, Lease];
      await rheo.ack(l1);
      expect(await frontiers(rheo, 's', 'g')).toEqual([1]);
      await rheo.nack(l2);
      await rheo.release(l3);
      clock.advance(1000);
      expect(await frontiers(rheo, 's', 'g')).toEqual([1]);
      await consumeAll(rheo, 's', 'g');
      expect(await frontiers(rheo, 's', 'g')).toEqual([4]);
    });
  });

  describe('lag', () => {
    const fx = useFixture(makeBackend);

    it('reports count and oldest unsettled timestamp per partition, and the total', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await rheo.createGroup('s', 'g');
      const p0 = await appendN(rheo, 's', 3, { partition: 0 });
      clock.advance(100);
      const p1 = await appendN(rheo, 's', 2, { partition: 1 });
      const lag = await rheo.lag('s', 'g');
      expect(lag).toEqual({
        stream: 's',
        group: 'g',
        lag: 5,
        partitions: {
          0: { lowWatermark: 1, frontier: 0, highWatermark: 3, lag: 3, oldestUnsettledAt: p0[0]!.timestamp },
          1: { lowWatermark: 1, frontier: 0, highWatermark: 2, lag: 2, oldestUnsettledAt: p1[0]!.timestamp },
          2: { lowWatermark: 1, frontier: 0, highWatermark: 0, lag: 0, oldestUnsettledAt: null },
        },
      });
    });

    it('oldestUnsettledAt is the timestamp of the event just above the frontier', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const events = [];
      for (let i = 0; i < 4; i++) {
        clock.advance(1000);
        events.push(...(await appendN(rheo, 's', 1)));
      }
      const [l1, l2] = (await rheo.fetch('s', 'g', { limit: 2 })) as [Lease, Lease];
      await rheo.ack(l1);
      let lag = await rheo.lag('s', 'g');
      expect(lag.partitions[0]).toEqual({ lowWatermark: 1, frontier: 1, highWatermark: 4, lag: 3, oldestUnsettledAt: events[1]!.timestamp });
      await rheo.ack(l2);
      lag = await rheo.lag('s', 'g');
      expect(lag.partitions[0]!.oldestUnsettledAt).toEqual(events[2]!.timestamp);
    });

    it('is zero with a null age once everything is settled', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', Array.from({ length: 10 }, (_, i) => ({ payload: i, key: `k${i}` })));
      expect(await consumeAll(rheo, 's', 'g')).toBe(10);
      const lag = await rheo.lag('s', 'g');
      expect(lag.lag).toBe(0);
      for (const p of [0, 1]) {
        expect(lag.partitions[p]!.lag).toBe(0);
        expect(lag.partitions[p]!.oldestUnsettledAt).toBeNull();
        expect(lag.partitions[p]!.frontier).toBe(lag.partitions[p]!.highWatermark);
      }
    });

    it('grows as events are appended and shrinks as they are acked', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      expect((await rheo.lag('s', 'g')).lag).toBe(3);
      const leases = await rheo.fetch('s', 'g', { limit: 2 });
      expect((await rheo.lag('s', 'g')).lag).toBe(3);
      await rheo.ackMany(leases);
      expect((await rheo.lag('s', 'g')).lag).toBe(1);
      await appendN(rheo, 's', 5);
      expect((await rheo.lag('s', 'g')).lag).toBe(6);
    });
  });

  describe('operations listings', () => {
    const fx = useFixture(makeBackend);

    it('listGroups returns the group names sorted ascending', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      for (const g of ['zeta', 'alpha', 'mid', 'beta.2', 'beta.10']) await rheo.createGroup('s', g);
      expect(await rheo.listGroups('s')).toEqual(['alpha', 'beta.10', 'beta.2', 'mid', 'zeta']);
    });

    it('listGroups of a stream without groups is []', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      expect(await rheo.listGroups('s')).toEqual([]);
    });

    it('groupInfo reports maxAttempts, lag, inflight leases and dead letters', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g', { maxAttempts: 3 });
      await appendN(rheo, 's', 6);
      const leases = await rheo.fetch('s', 'g', { limit: 4 });
      await rheo.ack(leases[0]!);
      await rheo.reject(leases[1]!, 'bad');
      await rheo.nack(leases[2]!);
      const info = await rheo.groupInfo('s', 'g');
      expect(info).toMatchObject({ stream: 's', group: 'g', maxAttempts: 3, inflight: 1, deadLetters: 1 });
      expect(info.lag).toEqual(await rheo.lag('s', 'g'));
      expect(info.lag.partitions[0]!.frontier).toBe(2);
    });

    it('groupInfo uses the default maxAttempts of 5', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      expect((await rheo.groupInfo('s', 'g')).maxAttempts).toBe(5);
    });
  });
}
