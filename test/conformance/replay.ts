import { describe, expect, it } from 'vitest';
import type { Lease, ResetOptions } from '../../src/core/types.js';
import type { Rheo } from '../../src/rheo.js';
import {
  appendN,
  consumeAll,
  expectCode,
  fetchAll,
  frontiers,
  pos,
  readAll,
  sequences,
  useFixture,
  type BackendFactory,
} from './fixture.js';

async function groupState(rheo: Rheo, stream: string, group: string): Promise<unknown> {
  return {
    info: await rheo.groupInfo(stream, group),
    dead: await rheo.deadLetters(stream, group),
  };
}

export function registerReplayTests(makeBackend: BackendFactory): void {
  describe('replay', () => {
    const fx = useFixture(makeBackend);

    it('fromSequence reopens acked deliveries from that sequence with attempts starting over', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const events = await appendN(rheo, 's', 5);
      await fetchAll(rheo, 's', 'g').then((ls) => rheo.nackMany(ls));
      await consumeAll(rheo, 's', 'g');
      await rheo.replay('s', 'g', { fromSequence: 3 });
      expect(await frontiers(rheo, 's', 'g')).toEqual([2]);
      expect((await rheo.lag('s', 'g')).lag).toBe(3);
      const again = await fetchAll(rheo, 's', 'g');
      expect(again.map((l) => [l.event.sequence, l.attempt])).toEqual([
        [3, 1],
        [4, 1],
        [5, 1],
      ]);
      expect(again.map((l) => l.event)).toEqual(events.slice(2));
    });

    it('fromSequence applies to every partition unless partitions are given', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await rheo.createGroup('s', 'all');
      await rheo.createGroup('s', 'some');
      for (const p of [0, 1, 2]) await appendN(rheo, 's', 3, { partition: p });
      await consumeAll(rheo, 's', 'all');
      await consumeAll(rheo, 's', 'some');
      await rheo.replay('s', 'all', { fromSequence: 2 });
      await rheo.replay('s', 'some', { fromSequence: 2 }, { partitions: [1] });
      expect((await fetchAll(rheo, 's', 'all')).map(pos).sort()).toEqual(['0:2', '0:3', '1:2', '1:3', '2:2', '2:3']);
      expect((await fetchAll(rheo, 's', 'some')).map(pos).sort()).toEqual(['1:2', '1:3']);
      expect(await frontiers(rheo, 's', 'some')).toEqual([3, 1, 3]);
    });

    it('from: Date is resolved per partition to the first event at or after it', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 2, { partition: 0 });
      await appendN(rheo, 's', 1, { partition: 1 });
      await appendN(rheo, 's', 2, { partition: 2 });
      clock.advance(100);
      const from = new Date(clock.now());
      await appendN(rheo, 's', 1, { partition: 0 });
      await appendN(rheo, 's', 2, { partition: 1 });
      await consumeAll(rheo, 's', 'g');
      await rheo.replay('s', 'g', { from });
      expect(await frontiers(rheo, 's', 'g')).toEqual([2, 1, 2]);
      expect((await fetchAll(rheo, 's', 'g')).map(pos).sort()).toEqual(['0:3', '1:2', '1:3']);
    });

    it('from: Date with partitions reopens only those partitions', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g');
      const from = new Date(clock.now());
      for (const p of [0, 1]) await appendN(rheo, 's', 2, { partition: p });
      await consumeAll(rheo, 's', 'g');
      await rheo.replay('s', 'g', { from }, { partitions: [0] });
      expect((await fetchAll(rheo, 's', 'g')).map(pos)).toEqual(['0:1', '0:2']);
    });

    it('eventIds replays exactly those events', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const events = await appendN(rheo, 's', 5);
      await consumeAll(rheo, 's', 'g');
      await rheo.replay('s', 'g', { eventIds: [events[3]!.id, events[1]!.id] });
      expect(await frontiers(rheo, 's', 'g')).toEqual([1]);
      const again = await fetchAll(rheo, 's', 'g');
      expect(again.map((l) => [l.event.sequence, l.attempt])).toEqual([
        [2, 1],
        [4, 1],
      ]);
      await rheo.ackMany(again);
      expect(await frontiers(rheo, 's', 'g')).toEqual([5]);
    });

    it('eventIds with partitions reopens only the listed events in those partitions', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g');
      const [a] = await appendN(rheo, 's', 1, { partition: 0 });
      const [b] = await appendN(rheo, 's', 1, { partition: 1 });
      await consumeAll(rheo, 's', 'g');
      await rheo.replay('s', 'g', { eventIds: [a!.id, b!.id] }, { partitions: [1] });
      expect((await fetchAll(rheo, 's', 'g')).map(pos)).toEqual(['1:1']);
    });

    it('eventIds with an unknown id is invalid_argument and reopens nothing', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const events = await appendN(rheo, 's', 3);
      await consumeAll(rheo, 's', 'g');
      const before = await groupState(rheo, 's', 'g');
      const error = await expectCode(rheo.replay('s', 'g', { eventIds: [events[0]!.id, 'no-such-id'] }), 'invalid_argument');
      expect(error.message).toContain('no-such-id');
      expect([error.stream, error.group]).toEqual(['s', 'g']);
      expect(await groupState(rheo, 's', 'g')).toEqual(before);
      expect(await rheo.fetch('s', 'g')).toEqual([]);
    });

    it('a replay over leased deliveries holds them: once settled they are not offered again, until a later replay reaches them', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await appendN(rheo, 's', 6);
      const sorted = (leases: Lease[]) => leases.map((l) => l.event.sequence).sort((x, y) => x - y);
      /** A group where 1 and 2 are new again after a replay from 1, 3 was acked since, and 4 is still leased. */
      const setUp = async (group: string): Promise<Lease> => {
        await rheo.createGroup('s', group);
        const leases = await rheo.fetch('s', group, { limit: 4 });
        await rheo.ackMany(leases.slice(0, 2));
        await rheo.replay('s', group, { fromSequence: 1 });
        await rheo.ack(leases[2]!);
        return leases[3]!;
      };
      // A second replay that reaches nothing settled changes nothing held.
      await setUp('a');
      await rheo.replay('s', 'a', { fromSequence: 5 });
      expect(sorted(await fetchAll(rheo, 's', 'a'))).toEqual([1, 2, 5, 6]);
      // One that reaches 3 offers it again; 4 stays held.
      const four = await setUp('b');
      await rheo.replay('s', 'b', { fromSequence: 3 });
      const again = await fetchAll(rheo, 's', 'b');
      expect(sorted(again)).toEqual([1, 2, 3, 5, 6]);
      await rheo.ackMany([...again, four]);
      expect(await fetchAll(rheo, 's', 'b')).toEqual([]);
      // A replay starting exactly at a leased delivery holds it too.
      await rheo.createGroup('s', 'c');
      const leased = await rheo.fetch('s', 'c', { limit: 4 });
      await rheo.replay('s', 'c', { fromSequence: 3 });
      await rheo.ackMany(leased);
      expect(sorted(await fetchAll(rheo, 's', 'c'))).toEqual([5, 6]);
    });

    it('fromSequence removes dead letters in range and makes them claimable', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      const [l1, l2, l3] = (await rheo.fetch('s', 'g')) as [Lease, Lease, Lease];
      await rheo.reject(l1, 'kept');
      await rheo.reject(l3, 'replayed');
      await rheo.ack(l2);
      await rheo.replay('s', 'g', { fromSequence: 2 });
      expect((await rheo.deadLetters('s', 'g')).map((d) => d.reason)).toEqual(['kept']);
      expect((await fetchAll(rheo, 's', 'g')).map((l) => [l.event.sequence, l.attempt])).toEqual([
        [2, 1],
        [3, 1],
      ]);
    });

    it('eventIds reopens a dead letter and removes it from the list', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const [event] = await appendN(rheo, 's', 1);
      const [lease] = await rheo.fetch('s', 'g');
      await rheo.reject(lease!, 'bad');
      await rheo.replay('s', 'g', { eventIds: [event!.id] });
      expect(await rheo.deadLetters('s', 'g')).toEqual([]);
      expect((await rheo.fetch('s', 'g')).map((l) => l.attempt)).toEqual([1]);
    });

    it('leaves open deliveries as they are: a live lease stays valid and is not handed out twice', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const events = await appendN(rheo, 's', 3);
      const [l1, l2, l3] = (await rheo.fetch('s', 'g')) as [Lease, Lease, Lease];
      await rheo.ack(l1);
      await rheo.replay('s', 'g', { fromSequence: 1 });
      await rheo.replay('s', 'g', { eventIds: [events[2]!.id] });
      expect(sequences(await rheo.fetch('s', 'g'))).toEqual([1]);
      await rheo.ack(l2);
      await rheo.ack(l3);
      expect((await rheo.groupInfo('s', 'g')).inflight).toBe(1);
    });

    it('after replaying below open deliveries, the frontier drops to the cursor: the reopened sequences are unsettled', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const events = await appendN(rheo, 's', 5);
      const leases = await rheo.fetch('s', 'g', { limit: 5 });
      await rheo.ackMany(leases.slice(0, 2));
      await rheo.replay('s', 'g', { fromSequence: 1 });
      const lag = await rheo.lag('s', 'g');
      expect(lag.partitions[0]).toEqual({ lowWatermark: 1, frontier: 0, highWatermark: 5, lag: 5, oldestUnsettledAt: events[0]!.timestamp });
      expect(lag.lag).toBe(5);
      expect((await rheo.groupInfo('s', 'g')).lag).toEqual(lag);
      expect(sequences(await rheo.fetch('s', 'g', { limit: 10 }))).toEqual([1, 2]);
    });

    it('after replaying below open deliveries, acking everything reaches lag 0 and offers nothing twice', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 5);
      const leases = await rheo.fetch('s', 'g', { limit: 5 });
      await rheo.ackMany(leases.slice(0, 2));
      await rheo.replay('s', 'g', { fromSequence: 1 });
      const again = await rheo.fetch('s', 'g', { limit: 10 });
      expect(sequences(again)).toEqual([1, 2]);
      expect((await rheo.ackMany([...leases.slice(2), ...again])).every((r) => r.ok)).toBe(true);
      expect(await frontiers(rheo, 's', 'g')).toEqual([5]);
      expect(await rheo.fetch('s', 'g', { limit: 10 })).toEqual([]);
    });

    it('a delivery open at the replay and acked before any fetch is not offered again', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      const [l1, l2, l3] = (await rheo.fetch('s', 'g', { limit: 3 })) as [Lease, Lease, Lease];
      await rheo.ack(l1);
      await rheo.replay('s', 'g', { fromSequence: 1 });
      await rheo.ack(l2);
      await rheo.ack(l3);
      expect(await frontiers(rheo, 's', 'g')).toEqual([0]);
      const again = await fetchAll(rheo, 's', 'g');
      expect(sequences(again)).toEqual([1]);
      await rheo.ack(again[0]!);
      expect((await rheo.lag('s', 'g')).partitions[0]).toMatchObject({ frontier: 3, lag: 0 });
    });

    it('a delivery open at the replay and dead-lettered after it stays dead and is not offered', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      const [l1, l2, l3] = (await rheo.fetch('s', 'g', { limit: 3 })) as [Lease, Lease, Lease];
      await rheo.ackMany([l1, l3]);
      await rheo.replay('s', 'g', { fromSequence: 2 });
      await rheo.reject(l2, 'bad');
      const again = await fetchAll(rheo, 's', 'g');
      expect(sequences(again)).toEqual([3]);
      expect((await rheo.deadLetters('s', 'g')).map((d) => d.event.sequence)).toEqual([2]);
      await rheo.ack(again[0]!);
      expect((await rheo.lag('s', 'g')).partitions[0]).toMatchObject({ frontier: 3, lag: 0 });
      expect(await fetchAll(rheo, 's', 'g')).toEqual([]);
    });

    it('eventIds reopens a delivery acked above a replayed-back cursor', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const events = await appendN(rheo, 's', 3);
      const [l1, l2] = (await rheo.fetch('s', 'g', { limit: 2 })) as [Lease, Lease];
      await rheo.ack(l1);
      await rheo.replay('s', 'g', { fromSequence: 1 });
      await rheo.ack(l2);
      await rheo.replay('s', 'g', { eventIds: [events[1]!.id] });
      const again = await fetchAll(rheo, 's', 'g');
      expect(again.map((l) => [l.event.sequence, l.attempt])).toEqual([
        [1, 1],
        [2, 1],
        [3, 1],
      ]);
    });

    it("a delivery claimed again after a replay keeps its new lease until that lease's own expiry", async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g', { maxAttempts: 3 });
      const events = await appendN(rheo, 's', 1);
      await rheo.ack((await rheo.fetch('s', 'g', { leaseMs: 100 }))[0]!);
      await rheo.replay('s', 'g', { fromSequence: 1 });
      const [again] = await rheo.fetch('s', 'g', { leaseMs: 1000 });
      expect(again?.attempt).toBe(1);
      // The first lease would have expired now; the second is live.
      clock.advance(100);
      expect(await rheo.fetch('s', 'g')).toEqual([]);
      await rheo.replay('s', 'g', { eventIds: [events[0]!.id] });
      expect(await rheo.fetch('s', 'g')).toEqual([]);
      await rheo.ack(again!);
      await rheo.replay('s', 'g', { eventIds: [events[0]!.id] });
      const [third] = await rheo.fetch('s', 'g', { leaseMs: 5000 });
      clock.advance(1000);
      expect(await rheo.fetch('s', 'g')).toEqual([]);
      await rheo.ack(third!);
      expect((await rheo.lag('s', 'g')).lag).toBe(0);
      expect(await rheo.deadLetters('s', 'g')).toEqual([]);
    });

    it('fromSequence below a held lease puts the frontier at the replay point, not below the held lease', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 8);
      const leases = await rheo.fetch('s', 'g', { limit: 8 });
      await rheo.ackMany(leases.slice(0, 7));
      expect(await frontiers(rheo, 's', 'g')).toEqual([7]);
      await rheo.replay('s', 'g', { fromSequence: 3 });
      // 3..7 are open again and 8 is still held: nothing above 2 is terminal.
      expect(await frontiers(rheo, 's', 'g')).toEqual([2]);
      expect((await rheo.lag('s', 'g')).lag).toBe(6);
      const again = await rheo.fetch('s', 'g', { limit: 10 });
      expect(sequences(again)).toEqual([3, 4, 5, 6, 7]);
      await rheo.ackMany(again.slice(0, 2));
      expect(await frontiers(rheo, 's', 'g')).toEqual([4]);
      await rheo.ackMany([...again.slice(2), leases[7]!]);
      expect(await frontiers(rheo, 's', 'g')).toEqual([8]);
    });

    it('a fromSequence beyond anything consumed changes nothing', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 5);
      await rheo.ackMany(await rheo.fetch('s', 'g', { limit: 2 }));
      await rheo.replay('s', 'g', { fromSequence: 4 });
      expect(await frontiers(rheo, 's', 'g')).toEqual([2]);
      expect(sequences(await fetchAll(rheo, 's', 'g'))).toEqual([3, 4, 5]);
    });

    it('rejects a spec with none or several forms, and fromSequence 0', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await expectCode(rheo.replay('s', 'g', {} as { fromSequence: number }), 'invalid_argument');
      await expectCode(
        rheo.replay('s', 'g', { fromSequence: 1, from: new Date() } as unknown as { fromSequence: number }),
        'invalid_argument',
      );
      await expectCode(rheo.replay('s', 'g', { fromSequence: 0 }), 'invalid_argument');
      await expectCode(rheo.replay('s', 'g', { eventIds: [] }), 'invalid_argument');
    });
  });

  describe('resetGroup', () => {
    const fx = useFixture(makeBackend);

    it('requires { confirm: true } and changes nothing without it', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      const [lease] = await rheo.fetch('s', 'g', { limit: 1 });
      await rheo.reject(lease!, 'bad');
      const before = await groupState(rheo, 's', 'g');
      for (const options of [undefined, {}, { confirm: false }, { confirm: 'yes' }]) {
        const error = await expectCode(rheo.resetGroup('s', 'g', options as unknown as ResetOptions), 'confirm_required');
        expect(error.message).toContain('"g"');
      }
      expect(await groupState(rheo, 's', 'g')).toEqual(before);
    });

    it('with confirm drops leases and dead letters and restarts from the beginning', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 4);
      const [l1, l2, l3] = (await rheo.fetch('s', 'g', { limit: 3 })) as [Lease, Lease, Lease];
      await rheo.ack(l1);
      await rheo.reject(l2, 'bad');
      await rheo.resetGroup('s', 'g', { confirm: true });
      const info = await rheo.groupInfo('s', 'g');
      expect([info.inflight, info.deadLetters, info.lag.lag]).toEqual([0, 0, 4]);
      expect(await rheo.deadLetters('s', 'g')).toEqual([]);
      await expectCode(rheo.ack(l3), 'stale_lease');
      const again = await fetchAll(rheo, 's', 'g');
      expect(again.map((l) => [l.event.sequence, l.attempt])).toEqual([
        [1, 1],
        [2, 1],
        [3, 1],
        [4, 1],
      ]);
    });

    it('with startAfter restarts the frontier there', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g');
      for (const p of [0, 1]) await appendN(rheo, 's', 5, { partition: p });
      await consumeAll(rheo, 's', 'g');
      await rheo.resetGroup('s', 'g', { confirm: true, startAfter: { 0: 3, 1: 4 } });
      expect(await frontiers(rheo, 's', 'g')).toEqual([3, 4]);
      expect((await fetchAll(rheo, 's', 'g')).map(pos).sort()).toEqual(['0:4', '0:5', '1:5']);
    });

    it('with startAt restarts at the first event at or after that time', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 2);
      clock.advance(10);
      const at = new Date(clock.now());
      await appendN(rheo, 's', 2);
      await consumeAll(rheo, 's', 'g');
      await rheo.resetGroup('s', 'g', { confirm: true, startAt: at });
      expect(await frontiers(rheo, 's', 'g')).toEqual([2]);
      expect(sequences(await fetchAll(rheo, 's', 'g'))).toEqual([3, 4]);
    });
  });

  describe('dead letters and redrive', () => {
    const fx = useFixture(makeBackend);

    /** `count` events, each rejected with reason `r<sequence>`, in the order given. */
    async function rejectAll(rheo: Rheo, count: number, order?: number[]): Promise<void> {
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g', { maxAttempts: 2 });
      await appendN(rheo, 's', count);
      const leases = await fetchAll(rheo, 's', 'g');
      for (const i of order ?? leases.map((_, i) => i)) {
        await rheo.reject(leases[i]!, `r${leases[i]!.event.sequence}`);
      }
    }

    it('lists dead letters in the order they died, with increasing digit-string ids', async () => {
      const { rheo } = fx();
      await rejectAll(rheo, 3, [2, 0, 1]);
      const dead = await rheo.deadLetters('s', 'g');
      expect(dead.map((d) => d.event.sequence)).toEqual([3, 1, 2]);
      for (const d of dead) expect(d.id).toMatch(/^\d+$/);
      const ids = dead.map((d) => BigInt(d.id));
      expect(ids[0]! < ids[1]! && ids[1]! < ids[2]!).toBe(true);
    });

    it('the deliveries one fetch finds past maxAttempts are listed by partition and sequence, whatever partition the fetch started at', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g', { maxAttempts: 1 });
      for (const p of [0, 1]) await appendN(rheo, 's', 2, { partition: p });
      expect(await rheo.fetch('s', 'g', { limit: 4, leaseMs: 100 })).toHaveLength(4);
      clock.advance(100);
      // The second fetch's round-robin starts at partition 1.
      expect(await rheo.fetch('s', 'g', { limit: 4 })).toEqual([]);
      expect((await rheo.deadLetters('s', 'g')).map((d) => pos(d.event))).toEqual(['0:1', '0:2', '1:1', '1:2']);
    });

    it('pages with limit and after, strictly after the given id', async () => {
      const { rheo } = fx();
      await rejectAll(rheo, 5);
      const first = await rheo.deadLetters('s', 'g', { limit: 2 });
      expect(first.map((d) => d.reason)).toEqual(['r1', 'r2']);
      const second = await rheo.deadLetters('s', 'g', { limit: 2, after: first[1]!.id });
      expect(second.map((d) => d.reason)).toEqual(['r3', 'r4']);
      const third = await rheo.deadLetters('s', 'g', { limit: 2, after: second[1]!.id });
      expect(third.map((d) => d.reason)).toEqual(['r5']);
      expect(await rheo.deadLetters('s', 'g', { after: third[0]!.id })).toEqual([]);
    });

    it('an after id that names no dead letter of the group is cursor_not_found', async () => {
      const { rheo } = fx();
      await rejectAll(rheo, 2);
      const error = await expectCode(rheo.deadLetters('s', 'g', { after: '999999999' }), 'cursor_not_found');
      expect(error.message).toContain('"g"');
      expect([error.stream, error.group]).toEqual(['s', 'g']);
    });

    it('an after that only looks like an id (leading zeros, too many digits, not digits) is cursor_not_found', async () => {
      const { rheo } = fx();
      await rejectAll(rheo, 12);
      const all = await rheo.deadLetters('s', 'g');
      expect(all).toHaveLength(12);
      // Every id pages, whatever its length.
      for (const [i, d] of all.entries()) {
        expect((await rheo.deadLetters('s', 'g', { after: d.id, limit: 1 })).map((x) => x.id)).toEqual(all.slice(i + 1, i + 2).map((x) => x.id));
      }
      const first = all[0]!.id;
      for (const after of [`0${first}`, `00${first}`, '9'.repeat(20), `${first}x`, `x${first}`, ' 1']) {
        await expectCode(rheo.deadLetters('s', 'g', { after }), 'cursor_not_found');
      }
    });

    it("another group's dead-letter id is cursor_not_found", async () => {
      const { rheo } = fx();
      await rejectAll(rheo, 1);
      await rheo.createGroup('s', 'other');
      const [lease] = await rheo.fetch('s', 'other');
      await rheo.reject(lease!);
      const [otherDead] = await rheo.deadLetters('s', 'other');
      await expectCode(rheo.deadLetters('s', 'g', { after: otherDead!.id }), 'cursor_not_found');
    });

    it('the id of a redriven dead letter is cursor_not_found', async () => {
      const { rheo } = fx();
      await rejectAll(rheo, 2);
      const [first] = await rheo.deadLetters('s', 'g');
      await rheo.redrive('s', 'g', { eventIds: [first!.event.id] });
      await expectCode(rheo.deadLetters('s', 'g', { after: first!.id }), 'cursor_not_found');
    });

    it('redrive of all reopens every dead letter with attempts reset, and returns how many', async () => {
      const { rheo } = fx();
      await rejectAll(rheo, 3);
      expect(await frontiers(rheo, 's', 'g')).toEqual([3]);
      expect(await rheo.redrive('s', 'g')).toBe(3);
      expect(await rheo.deadLetters('s', 'g')).toEqual([]);
      expect(await frontiers(rheo, 's', 'g')).toEqual([0]);
      const again = await fetchAll(rheo, 's', 'g');
      expect(again.map((l) => [l.event.sequence, l.attempt])).toEqual([
        [1, 1],
        [2, 1],
        [3, 1],
      ]);
    });

    it('redrive by eventIds reopens only those', async () => {
      const { rheo } = fx();
      await rejectAll(rheo, 3);
      const dead = await rheo.deadLetters('s', 'g');
      expect(await rheo.redrive('s', 'g', { eventIds: [dead[1]!.event.id] })).toBe(1);
      expect((await rheo.deadLetters('s', 'g')).map((d) => d.event.sequence)).toEqual([1, 3]);
      expect(sequences(await fetchAll(rheo, 's', 'g'))).toEqual([2]);
    });

    it('redrive with nothing dead returns 0', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      expect(await rheo.redrive('s', 'g')).toBe(0);
    });

    it('a redriven delivery gets its full maxAttempts again', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g', { maxAttempts: 2 });
      await appendN(rheo, 's', 1);
      for (let i = 0; i < 2; i++) await rheo.nack((await rheo.fetch('s', 'g'))[0]!, `n${i}`);
      expect(await rheo.deadLetters('s', 'g')).toHaveLength(1);
      await rheo.redrive('s', 'g');
      const [first] = await rheo.fetch('s', 'g');
      expect(first!.attempt).toBe(1);
      await rheo.nack(first!, 'again');
      const [second] = await rheo.fetch('s', 'g');
      expect(second!.attempt).toBe(2);
      await rheo.nack(second!, 'dead again');
      expect((await rheo.deadLetters('s', 'g')).map((d) => [d.attempt, d.reason])).toEqual([[2, 'dead again']]);
    });

    it('dead letters stay in the log and stay visible to other groups', async () => {
      const { rheo } = fx();
      await rejectAll(rheo, 2);
      await rheo.createGroup('s', 'other');
      expect(sequences(await fetchAll(rheo, 's', 'other'))).toEqual([1, 2]);
      expect(await readAll(rheo, 's')).toHaveLength(2);
    });
  });
}
