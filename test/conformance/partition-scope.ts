import { describe, expect, it } from 'vitest';
import type { Rheo } from '../../src/rheo.js';
import { appendN, consumeAll, expectCode, fetchAll, pos, useFixture, type BackendFactory } from './fixture.js';

/** Everything a failed call must have left alone. */
async function snapshot(rheo: Rheo, stream: string, group: string): Promise<unknown> {
  return {
    groups: await rheo.listGroups(stream),
    info: await rheo.groupInfo(stream, group),
    dead: (await rheo.deadLetters(stream, group)).map((d) => [pos(d.event), d.reason]),
  };
}

/** Appends `perPartition` events to each partition of a fresh stream `s` with `partitions` partitions. */
async function streamWith(rheo: Rheo, partitions: number, perPartition: number): Promise<void> {
  await rheo.createStream('s', { partitions });
  for (let p = 0; p < partitions; p++) await appendN(rheo, 's', perPartition, { partition: p });
}

export function registerPartitionScopeTests(makeBackend: BackendFactory): void {
  describe('partition-scoped groups', () => {
    const fx = useFixture(makeBackend);

    it('a group created with partitions fetches, reports lag and holds state only there', async () => {
      const { rheo, backend } = fx();
      await streamWith(rheo, 4, 3);
      await rheo.createGroup('s', 'g', { partitions: [3, 1] });
      const leases = await fetchAll(rheo, 's', 'g');
      expect(leases.map(pos).sort()).toEqual(['1:1', '1:2', '1:3', '3:1', '3:2', '3:3']);
      const lag = await rheo.lag('s', 'g');
      expect(Object.keys(lag.partitions).map(Number)).toEqual([1, 3]);
      expect(lag.lag).toBe(6);
      expect((await backend.storageStats('s', 'g')).deliveries).toBe(6);
      await rheo.ackMany(leases);
      const after = await rheo.lag('s', 'g');
      expect(after.lag).toBe(0);
      expect(after.partitions[1]).toMatchObject({ frontier: 3, highWatermark: 3, lag: 0 });
      expect((await backend.storageStats('s', 'g')).deliveries).toBe(0);
      // More events in uncovered partitions change nothing for the group.
      await appendN(rheo, 's', 5, { partition: 0 });
      expect(await fetchAll(rheo, 's', 'g')).toEqual([]);
      expect((await rheo.lag('s', 'g')).lag).toBe(0);
      expect((await rheo.groupInfo('s', 'g')).lag.lag).toBe(0);
    });

    it('fetching from a partition outside the group is invalid_partition and claims nothing', async () => {
      const { rheo } = fx();
      await streamWith(rheo, 3, 2);
      await rheo.createGroup('s', 'g', { partitions: [0, 2] });
      const before = await snapshot(rheo, 's', 'g');
      const error = await expectCode(rheo.fetch('s', 'g', { partitions: [1] }), 'invalid_partition');
      expect(error.message).toContain('not covered by group "g"');
      await expectCode(rheo.fetch('s', 'g', { partitions: [2, 1] }), 'invalid_partition');
      await expectCode(rheo.fetch('s', 'g', { partitions: [7] }), 'invalid_partition');
      expect(await snapshot(rheo, 's', 'g')).toEqual(before);
      expect((await rheo.fetch('s', 'g', { partitions: [2], limit: 10 })).map(pos)).toEqual(['2:1', '2:2']);
    });

    it('createGroup refuses partitions outside the stream and a start map outside the group, writing nothing', async () => {
      const { rheo } = fx();
      await streamWith(rheo, 2, 1);
      await expectCode(rheo.createGroup('s', 'g', { partitions: [0, 2] }), 'invalid_partition');
      await expectCode(rheo.createGroup('s', 'g', { partitions: [1], startAfter: { 0: 1 } }), 'invalid_partition');
      await expectCode(rheo.createGroup('s', 'g', { partitions: [] }), 'invalid_argument');
      await expectCode(rheo.createGroup('s', 'g', { partitions: [-1] }), 'invalid_argument');
      expect(await rheo.listGroups('s')).toEqual([]);
      await rheo.createGroup('s', 'g', { partitions: [1], startAfter: { 1: 1 } });
      expect(Object.keys((await rheo.lag('s', 'g')).partitions)).toEqual(['1']);
      expect((await rheo.lag('s', 'g')).partitions[1]!.frontier).toBe(1);
    });

    it('a scoped group started at a time starts there in its own partitions', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await appendN(rheo, 's', 2, { partition: 1 });
      clock.advance(1000);
      const at = new Date(clock.now());
      await appendN(rheo, 's', 2, { partition: 1 });
      await rheo.createGroup('s', 'g', { partitions: [1], startAt: at });
      expect((await fetchAll(rheo, 's', 'g')).map(pos)).toEqual(['1:3', '1:4']);
    });
  });

  describe('lag by partition', () => {
    const fx = useFixture(makeBackend);

    it('reports only the requested partitions and sums only those', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await appendN(rheo, 's', 1, { partition: 0 });
      await appendN(rheo, 's', 2, { partition: 1 });
      await appendN(rheo, 's', 4, { partition: 2 });
      await rheo.createGroup('s', 'g');
      const some = await rheo.lag('s', 'g', { partitions: [2, 0] });
      expect(Object.keys(some.partitions).map(Number)).toEqual([0, 2]);
      expect(some.lag).toBe(5);
      expect((await rheo.lag('s', 'g')).lag).toBe(7);
    });

    it('refuses partitions outside the stream or the group', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await rheo.createGroup('s', 'g', { partitions: [0, 1] });
      await expectCode(rheo.lag('s', 'g', { partitions: [2] }), 'invalid_partition');
      await expectCode(rheo.lag('s', 'g', { partitions: [3] }), 'invalid_partition');
      await expectCode(rheo.lag('s', 'g', { partitions: [] }), 'invalid_argument');
      await expectCode(rheo.lag('s', 'g', { partitions: 'all' } as never), 'invalid_argument');
      expect(Object.keys((await rheo.lag('s', 'g', { partitions: [1] })).partitions)).toEqual(['1']);
    });
  });

  describe('reset by partition', () => {
    const fx = useFixture(makeBackend);

    it('resets only the given partitions: their state and dead letters go, the others keep theirs', async () => {
      const { rheo } = fx();
      await streamWith(rheo, 2, 3);
      await rheo.createGroup('s', 'g');
      const leases = await fetchAll(rheo, 's', 'g');
      const dead = leases.filter((l) => l.event.sequence === 2);
      await rheo.rejectMany(dead, 'bad');
      await rheo.ackMany(leases.filter((l) => l.event.sequence !== 2));
      await rheo.resetGroup('s', 'g', { confirm: true, partitions: [1], startAfter: 1 });
      const lag = await rheo.lag('s', 'g');
      expect(lag.partitions[0]!.frontier).toBe(3);
      expect(lag.partitions[1]!.frontier).toBe(1);
      expect((await rheo.deadLetters('s', 'g')).map((d) => pos(d.event))).toEqual(['0:2']);
      expect((await fetchAll(rheo, 's', 'g')).map((l) => [pos(l), l.attempt])).toEqual([
        ['1:2', 1],
        ['1:3', 1],
      ]);
    });

    it('drops the leases of reset partitions: their holders become stale', async () => {
      const { rheo } = fx();
      await streamWith(rheo, 2, 1);
      await rheo.createGroup('s', 'g');
      const leases = await fetchAll(rheo, 's', 'g');
      await rheo.resetGroup('s', 'g', { confirm: true, partitions: [0] });
      const results = await rheo.ackMany(leases);
      const byPartition = Object.fromEntries(leases.map((l, i) => [l.event.partition, results[i]!.ok]));
      expect(byPartition).toEqual({ 0: false, 1: true });
    });

    it('refuses partitions outside the group, and a start map outside the reset partitions, changing nothing', async () => {
      const { rheo } = fx();
      await streamWith(rheo, 3, 2);
      await rheo.createGroup('s', 'g', { partitions: [0, 1] });
      await consumeAll(rheo, 's', 'g');
      const before = await snapshot(rheo, 's', 'g');
      await expectCode(rheo.resetGroup('s', 'g', { confirm: true, partitions: [2] }), 'invalid_partition');
      await expectCode(rheo.resetGroup('s', 'g', { confirm: true, partitions: [0], startAfter: { 1: 0 } }), 'invalid_partition');
      await expectCode(rheo.resetGroup('s', 'g', { confirm: true, partitions: [] }), 'invalid_argument');
      expect(await snapshot(rheo, 's', 'g')).toEqual(before);
    });

    it('a scoped group reset without partitions resets all of its own and stays scoped', async () => {
      const { rheo } = fx();
      await streamWith(rheo, 3, 2);
      await rheo.createGroup('s', 'g', { partitions: [2] });
      await consumeAll(rheo, 's', 'g');
      await rheo.resetGroup('s', 'g', { confirm: true });
      expect(Object.keys((await rheo.lag('s', 'g')).partitions)).toEqual(['2']);
      expect((await fetchAll(rheo, 's', 'g')).map(pos)).toEqual(['2:1', '2:2']);
    });
  });

  describe('replay by query', () => {
    const fx = useFixture(makeBackend);

    /** Stream `s` (2 partitions) with typed, keyed events; group `g` has acked all of them. */
    async function settled(rheo: Rheo): Promise<void> {
      await rheo.createStream('s', { partitions: 2 });
      const inputs = [];
      for (let i = 0; i < 8; i++) {
        inputs.push({
          partition: i % 2,
          type: i % 4 < 2 ? 'order.paid' : 'order.shipped',
          key: `k${i % 3}`,
          payload: { n: i, vip: i === 5 },
          metadata: { region: i < 4 ? 'eu' : 'us' },
        });
      }
      await rheo.appendBatch('s', inputs);
      await rheo.createGroup('s', 'g');
      await consumeAll(rheo, 's', 'g');
    }

    /** Fetches and acks everything claimable; the payload numbers, ascending. */
    async function payloads(rheo: Rheo): Promise<number[]> {
      const leases = await fetchAll(rheo, 's', 'g');
      expect((await rheo.ackMany(leases)).every((r) => r.ok)).toBe(true);
      return leases.map((l) => (l.event.payload as { n: number }).n).sort((a, b) => a - b);
    }

    it('reopens exactly the events that match, with attempts starting over', async () => {
      const { rheo } = fx();
      await settled(rheo);
      await rheo.replay('s', 'g', { query: { type: 'order.paid' } });
      const leases = await fetchAll(rheo, 's', 'g');
      expect(leases.map((l) => (l.event.payload as { n: number }).n).sort((a, b) => a - b)).toEqual([0, 1, 4, 5]);
      expect(leases.every((l) => l.attempt === 1)).toBe(true);
      await rheo.ackMany(leases);
      expect((await rheo.lag('s', 'g')).lag).toBe(0);
    });

    it('matches as query does: key, where on payload and metadata, correlation and the time window', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 2 });
      const t0 = clock.now();
      for (let i = 0; i < 6; i++) {
        await rheo.append('s', {
          partition: i % 2,
          key: i % 2 === 0 ? 'a' : 'b',
          payload: { n: i, tier: i < 3 ? 'gold' : 'basic' },
          metadata: { correlationId: i % 3 === 0 ? 'flow-1' : 'flow-2' },
        });
        clock.advance(10);
      }
      await rheo.createGroup('s', 'g');
      const cases: Array<[Parameters<Rheo['replay']>[2], number[]]> = [
        [{ query: { key: 'a' } }, [0, 2, 4]],
        [{ query: { where: { payload: { tier: 'gold' } } } }, [0, 1, 2]],
        [{ query: { correlationId: 'flow-1' } }, [0, 3]],
        [{ query: { where: { metadata: { correlationId: 'flow-2' } }, key: 'b' } }, [1, 5]],
        [{ query: { from: new Date(t0 + 20), to: new Date(t0 + 40) } }, [2, 3]],
      ];
      for (const [spec, expected] of cases) {
        await consumeAll(rheo, 's', 'g');
        await rheo.replay('s', 'g', spec);
        // The same filter through query: the replay took exactly what query finds.
        const { events } = await rheo.query('s', { ...(spec as { query: object }).query, limit: 100 });
        expect(events.map((e) => (e.payload as { n: number }).n).sort((a, b) => a - b)).toEqual(expected);
        expect(await payloads(rheo), JSON.stringify(spec)).toEqual(expected);
      }
    });

    it('stays within the given partitions, and within the group\'s', async () => {
      const { rheo } = fx();
      await settled(rheo);
      await rheo.replay('s', 'g', { query: { type: 'order.paid' } }, { partitions: [1] });
      expect(await payloads(rheo)).toEqual([1, 5]);

      await rheo.createGroup('s', 'scoped', { partitions: [0] });
      await consumeAll(rheo, 's', 'scoped');
      await rheo.replay('s', 'scoped', { query: { where: { metadata: { region: 'us' } } } });
      expect((await fetchAll(rheo, 's', 'scoped')).map(pos).sort()).toEqual(['0:3', '0:4']);
    });

    it('takes matching dead letters off the list and leaves open deliveries alone', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.appendBatch('s', [
        { type: 'x', payload: 1 },
        { type: 'x', payload: 2 },
        { type: 'y', payload: 3 },
      ]);
      await rheo.createGroup('s', 'g');
      const [first, second, third] = await fetchAll(rheo, 's', 'g');
      await rheo.reject(first!, 'bad');
      await rheo.reject(third!, 'bad');
      await rheo.replay('s', 'g', { query: { type: 'x' } });
      expect((await rheo.deadLetters('s', 'g')).map((d) => d.event.sequence)).toEqual([3]);
      // The open lease on sequence 2 is not offered again while it is held.
      expect((await fetchAll(rheo, 's', 'g')).map((l) => [l.event.sequence, l.attempt])).toEqual([[1, 1]]);
      await rheo.ack(second!);
    });

    it('a query that matches nothing changes nothing', async () => {
      const { rheo } = fx();
      await settled(rheo);
      const before = await snapshot(rheo, 's', 'g');
      await rheo.replay('s', 'g', { query: { type: 'no.such.type' } });
      expect(await snapshot(rheo, 's', 'g')).toEqual(before);
    });

    it('refuses paging and partition fields, bad filters and partitions outside the group, changing nothing', async () => {
      const { rheo } = fx();
      await settled(rheo);
      await rheo.createGroup('s', 'scoped', { partitions: [1] });
      const before = await snapshot(rheo, 's', 'g');
      for (const query of [{ limit: 5 }, { partition: 0 }, { cursor: 'x' }, { order: 'desc' }, { type: 7 }, { where: { nope: 1 } }]) {
        await expectCode(rheo.replay('s', 'g', { query } as never), 'invalid_argument');
      }
      await expectCode(rheo.replay('s', 'g', { query: { type: 'x' }, fromSequence: 1 } as never), 'invalid_argument');
      await expectCode(rheo.replay('s', 'g', { query: 'order.paid' } as never), 'invalid_argument');
      await expectCode(rheo.replay('s', 'scoped', { query: {} }, { partitions: [0] }), 'invalid_partition');
      await expectCode(rheo.replay('s', 'scoped', { fromSequence: 1 }, { partitions: [0] }), 'invalid_partition');
      expect(await snapshot(rheo, 's', 'g')).toEqual(before);
    });
  });
}
