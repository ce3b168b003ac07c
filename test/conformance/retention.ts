import { describe, expect, it as vitestIt } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { appendN, consumeAll, expectCode, fetchAll, frontiers, readAll, useFixture, type BackendFactory } from './fixture.js';

const MINUTE = 60_000;

/**
 * On a backend without the `retention` capability every retention and
 * deletion call, and `createStream` with a retention option, is refused as
 * `unsupported` (naming the capability) and writes nothing.
 */
export async function expectRetentionUnsupported(rheo: Rheo): Promise<void> {
  await rheo.createStream('s');
  await rheo.createGroup('s', 'g');
  await appendN(rheo, 's', 3);
  const refused = [
    rheo.createStream('t', { retention: { maxEvents: 1 } }),
    rheo.setRetention('s', { maxEvents: 1 }),
    rheo.trim('s', { keep: 0, force: true }),
    rheo.deleteGroup('s', 'g', { confirm: true }),
    rheo.deleteStream('s', { confirm: true }),
  ];
  for (const call of refused) {
    const error = await call.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: 'unsupported' });
    expect((error as Error).message).toContain('"retention"');
  }
  const streams = await rheo.listStreams();
  expect(streams.map((s) => [s.name, s.retention])).toEqual([['s', null]]);
  expect(streams[0]!.watermarks).toEqual({ 0: { lowWatermark: 1, highWatermark: 3 } });
  expect(await rheo.listGroups('s')).toEqual(['g']);
  expect((await rheo.read('s')).map((e) => e.sequence)).toEqual([1, 2, 3]);
  expect((await rheo.lag('s', 'g')).partitions[0]).toMatchObject({ lowWatermark: 1, frontier: 0, highWatermark: 3, lag: 3 });
  // The background trimmer has nothing to do and records no error.
  await rheo.trimmer?.runOnce();
  expect(rheo.trimmer?.lastError ?? null).toBeNull();
}

/**
 * Stream `s` with 6 events and group `g` where 1 and 2 were acked, then
 * replayed (new again), while 3 and 4 are still leased (held); the four leases.
 */
async function replayedOverLeases(rheo: Rheo): Promise<Lease[]> {
  await rheo.createStream('s');
  await rheo.createGroup('s', 'g');
  await appendN(rheo, 's', 6);
  const leases = await rheo.fetch('s', 'g', { limit: 4 });
  await rheo.ackMany(leases.slice(0, 2));
  await rheo.replay('s', 'g', { fromSequence: 1 });
  return leases;
}

export function registerRetentionTests(makeBackend: BackendFactory): void {
  describe('retention and trimming', () => {
    const fx = useFixture(makeBackend);

    /**
     * Each case runs in full on a backend with the `retention` capability; on
     * one without it, the case checks that retention and deletion are refused
     * as `unsupported` and change nothing.
     */
    function it(name: string, fn: () => Promise<void>): void {
      vitestIt(name, async () => {
        if (fx().rheo.capabilities.retention) return fn();
        await expectRetentionUnsupported(fx().rheo);
      });
    }

    async function lowWatermarks(stream: string): Promise<number[]> {
      const info = (await fx().rheo.listStreams()).find((s) => s.name === stream)!;
      return Object.keys(info.watermarks)
        .map(Number)
        .sort((a, b) => a - b)
        .map((p) => info.watermarks[p]!.lowWatermark);
    }

    vitestIt('a stream without retention reports retention null and low watermark 1 on every backend', async () => {
      const { rheo } = fx();
      await rheo.createStream('plain', { partitions: 2 });
      await appendN(rheo, 'plain', 2, { partition: 1 });
      await rheo.createGroup('plain', 'g');
      const [info] = await rheo.listStreams();
      expect(info).toMatchObject({ name: 'plain', retention: null, watermarks: { 0: { lowWatermark: 1, highWatermark: 0 }, 1: { lowWatermark: 1, highWatermark: 2 } } });
      const lag = await rheo.lag('plain', 'g');
      expect(lag.partitions[0]).toEqual({ lowWatermark: 1, frontier: 0, highWatermark: 0, lag: 0, oldestUnsettledAt: null });
      expect(lag.partitions[1]).toEqual({ lowWatermark: 1, frontier: 0, highWatermark: 2, lag: 2, oldestUnsettledAt: expect.any(Date) });
    });

    it('a new stream reports its retention and low watermark 1 everywhere', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2, retention: { maxEvents: 5 } });
      await rheo.createStream('plain');
      await appendN(rheo, 's', 3, { partition: 1 });
      const [plain, s] = await rheo.listStreams();
      expect(plain!.retention).toBeNull();
      expect(plain!.watermarks).toEqual({ 0: { lowWatermark: 1, highWatermark: 0 } });
      expect(s!.retention).toEqual({ maxAgeMs: null, maxEvents: 5 });
      expect(s!.watermarks).toEqual({ 0: { lowWatermark: 1, highWatermark: 0 }, 1: { lowWatermark: 1, highWatermark: 3 } });
      await rheo.createGroup('s', 'g');
      const lag = await rheo.lag('s', 'g');
      expect(lag.partitions[1]).toEqual({ lowWatermark: 1, frontier: 0, highWatermark: 3, lag: 3, oldestUnsettledAt: expect.any(Date) });
    });

    it('retention by count trims only what every group has settled, and reports the low watermark everywhere', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { retention: { maxEvents: 3 } });
      await rheo.createGroup('s', 'fast');
      await rheo.createGroup('s', 'slow');
      await appendN(rheo, 's', 10);
      await consumeAll(rheo, 's', 'fast');
      const slow = await rheo.fetch('s', 'slow', { limit: 4 });
      await rheo.ackMany(slow.slice(0, 3)); // slow settled 1..3; 4 is leased
      const report = await rheo.trim('s');
      expect(report).toEqual({ deleted: 3, partitions: { 0: { deleted: 3, lowWatermark: 4 } }, forced: [] });
      expect(await lowWatermarks('s')).toEqual([4]);
      expect((await rheo.lag('s', 'slow')).partitions[0]).toMatchObject({ lowWatermark: 4, frontier: 3, highWatermark: 10, lag: 7 });
      expect((await rheo.groupInfo('s', 'fast')).lag.partitions[0]).toMatchObject({ lowWatermark: 4, frontier: 10, lag: 0 });
      expect((await rheo.read('s')).map((e) => e.sequence)).toEqual([4, 5, 6, 7, 8, 9, 10]);
      // Once slow settles 4 and more, retention (keep 3) allows up to 7.
      await rheo.ack(slow[3]!);
      await consumeAll(rheo, 's', 'slow');
      expect((await rheo.trim('s')).partitions[0]).toEqual({ deleted: 4, lowWatermark: 8 });
      expect((await rheo.read('s')).map((e) => e.sequence)).toEqual([8, 9, 10]);
      expect((await rheo.trim('s')).deleted).toBe(0);
    });

    it('retention by age trims the leading run of events older than maxAgeMs, by the backend clock', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { retention: { maxAgeMs: 10 * MINUTE } });
      const t0 = clock.now();
      await rheo.appendBatch('s', [
        { payload: 1, timestamp: new Date(t0 - 30 * MINUTE) },
        { payload: 2, timestamp: new Date(t0 - 20 * MINUTE) },
        { payload: 3, timestamp: new Date(t0 - 5 * MINUTE) },
        // Older again, but behind a retained event: trimming never skips over one.
        { payload: 4, timestamp: new Date(t0 - 40 * MINUTE) },
        { payload: 5, timestamp: new Date(t0) },
      ]);
      expect((await rheo.trim('s')).partitions[0]).toEqual({ deleted: 2, lowWatermark: 3 });
      clock.advance(6 * MINUTE); // event 3 is now 11 minutes old, so 3 and 4 go; 5 is 6 minutes old
      expect((await rheo.trim('s')).partitions[0]).toEqual({ deleted: 2, lowWatermark: 5 });
      expect((await rheo.read('s')).map((e) => e.payload)).toEqual([5]);
    });

    it('with both limits an event goes when either allows it', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { retention: { maxAgeMs: MINUTE, maxEvents: 4 } });
      const t0 = clock.now();
      await rheo.appendBatch('s', Array.from({ length: 6 }, (_, i) => ({ payload: i, timestamp: new Date(t0 - (i < 3 ? 2 * MINUTE : 0)) })));
      // Count allows 1..2, age allows 1..3: the union is 1..3.
      expect((await rheo.trim('s')).partitions[0]!.lowWatermark).toBe(4);
    });

    it('a stream without retention trims nothing unless given explicit bounds', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 2 });
      const t0 = clock.now();
      await rheo.appendBatch('s', [
        { payload: 'a', partition: 0, timestamp: new Date(t0 - 2 * MINUTE) },
        { payload: 'b', partition: 0, timestamp: new Date(t0) },
        { payload: 'c', partition: 1, timestamp: new Date(t0) },
        { payload: 'd', partition: 1, timestamp: new Date(t0) },
        { payload: 'e', partition: 1, timestamp: new Date(t0) },
      ]);
      expect(await rheo.trim('s')).toEqual({
        deleted: 0,
        partitions: { 0: { deleted: 0, lowWatermark: 1 }, 1: { deleted: 0, lowWatermark: 1 } },
        forced: [],
      });
      expect((await rheo.trim('s', { before: new Date(t0 - MINUTE) })).partitions).toEqual({
        0: { deleted: 1, lowWatermark: 2 },
        1: { deleted: 0, lowWatermark: 1 },
      });
      expect((await rheo.trim('s', { keep: 1 })).partitions).toEqual({
        0: { deleted: 0, lowWatermark: 2 },
        1: { deleted: 2, lowWatermark: 3 },
      });
      expect((await readAll(rheo, 's')).map((e) => e.payload)).toEqual(['b', 'e']);
      // keep 0 empties the partitions: the low watermark passes the high watermark.
      await rheo.trim('s', { keep: 0 });
      expect((await rheo.listStreams())[0]!.watermarks).toEqual({
        0: { lowWatermark: 3, highWatermark: 2 },
        1: { lowWatermark: 4, highWatermark: 3 },
      });
    });

    it('unsettled events are kept unless forced; a forced trim reports per group what it removed', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2, retention: { maxEvents: 1 } });
      await rheo.createGroup('s', 'done');
      await rheo.createGroup('s', 'busy');
      await rheo.createGroup('s', 'idle');
      await appendN(rheo, 's', 5, { partition: 0 });
      await appendN(rheo, 's', 2, { partition: 1 });
      await consumeAll(rheo, 's', 'done');
      const busy = await rheo.fetch('s', 'busy', { limit: 3, partitions: [0] });
      await rheo.ack(busy[0]!); // busy: 1 acked, 2 and 3 leased, 4 and 5 never offered
      await rheo.reject(busy[2]!, 'poison'); // 3 dead-lettered
      expect((await rheo.trim('s')).deleted).toBe(0); // idle settled nothing
      const report = await rheo.trim('s', { force: true });
      expect(report.deleted).toBe(5);
      expect(report.partitions).toEqual({ 0: { deleted: 4, lowWatermark: 5 }, 1: { deleted: 1, lowWatermark: 2 } });
      // busy lost 2 (leased) and 4 (never offered); idle lost everything deleted; done lost nothing.
      expect(report.forced).toEqual([
        { group: 'busy', partition: 0, unsettled: 2 },
        { group: 'busy', partition: 1, unsettled: 1 },
        { group: 'idle', partition: 0, unsettled: 4 },
        { group: 'idle', partition: 1, unsettled: 1 },
      ]);
      // They count as dead-lettered and gone: frontiers moved, nobody waits on a deleted event.
      expect(await frontiers(rheo, 's', 'busy')).toEqual([4, 1]);
      expect(await frontiers(rheo, 's', 'idle')).toEqual([4, 1]);
      expect((await rheo.lag('s', 'idle')).lag).toBe(2);
      await expectCode(rheo.ack(busy[1]!), 'stale_lease');
      // The dead letter of a trimmed event went with it.
      expect(await rheo.deadLetters('s', 'busy')).toEqual([]);
      expect((await rheo.groupInfo('s', 'busy')).deadLetters).toBe(0);
      expect((await rheo.groupInfo('s', 'busy')).inflight).toBe(0);
      // What is left is delivered normally.
      expect((await fetchAll(rheo, 's', 'idle')).map((l) => `${l.event.partition}:${l.event.sequence}`).sort()).toEqual(['0:5', '1:2']);
    });

    it('a forced trim after a replay counts held sequences once and delivers what is left', async () => {
      const { rheo } = fx();
      const leases = await replayedOverLeases(rheo);
      const report = await rheo.trim('s', { keep: 1, force: true });
      // Unsettled up to 5: 1, 2 and 5 (never offered since the replay) and 3, 4 (leased).
      expect(report.forced).toEqual([{ group: 'g', partition: 0, unsettled: 5 }]);
      expect(await frontiers(rheo, 's', 'g')).toEqual([5]);
      await expectCode(rheo.ack(leases[2]!), 'stale_lease');
      expect((await fetchAll(rheo, 's', 'g')).map((l) => [l.event.sequence, l.attempt])).toEqual([[6, 1]]);
    });

    it('a forced trim whose bound lands on a held sequence counts it once', async () => {
      const { rheo } = fx();
      await replayedOverLeases(rheo);
      const report = await rheo.trim('s', { keep: 2, force: true });
      // Up to 4: 1 and 2 (new since the replay) and 3 and 4 (leased), each once.
      expect(report.forced).toEqual([{ group: 'g', partition: 0, unsettled: 4 }]);
      expect(await frontiers(rheo, 's', 'g')).toEqual([4]);
      expect((await fetchAll(rheo, 's', 'g')).map((l) => [l.event.sequence, l.attempt])).toEqual([
        [5, 1],
        [6, 1],
      ]);
    });

    it('a forced trim below a held sequence leaves it held', async () => {
      const { rheo } = fx();
      const leases = await replayedOverLeases(rheo);
      const report = await rheo.trim('s', { keep: 3, force: true });
      // Up to 3: 1, 2 and 3. 4 stays leased, and held: once acked it is not offered again.
      expect(report.forced).toEqual([{ group: 'g', partition: 0, unsettled: 3 }]);
      await rheo.ack(leases[3]!);
      expect((await fetchAll(rheo, 's', 'g')).map((l) => l.event.sequence)).toEqual([5, 6]);
    });

    it('a trim takes the dead letter of the event at its very bound', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      const [a, b, c] = (await rheo.fetch('s', 'g', { limit: 3 })) as [Lease, Lease, Lease];
      await rheo.ack(a);
      await rheo.reject(b, 'x');
      await rheo.ack(c);
      expect((await rheo.trim('s', { keep: 1 })).partitions[0]).toEqual({ deleted: 2, lowWatermark: 3 });
      expect(await rheo.deadLetters('s', 'g')).toEqual([]);
      expect((await rheo.groupInfo('s', 'g')).deadLetters).toBe(0);
    });

    it('a normal trim deletes dead letters of the events it trims (they are settled)', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      const [a, b, c] = (await rheo.fetch('s', 'g', { limit: 3 })) as [Lease, Lease, Lease];
      await rheo.reject(a, 'x');
      await rheo.reject(c, 'y');
      await rheo.ack(b);
      expect((await rheo.trim('s', { keep: 1 })).partitions[0]).toEqual({ deleted: 2, lowWatermark: 3 });
      const dead = await rheo.deadLetters('s', 'g');
      expect(dead.map((d) => d.event.sequence)).toEqual([3]);
      expect(await rheo.redrive('s', 'g')).toBe(1);
    });

    it('sequences are never reused: after trimming everything, appends continue after the high watermark', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const first = await appendN(rheo, 's', 4);
      await rheo.trim('s', { keep: 0 });
      expect(await rheo.read('s')).toEqual([]);
      const [next] = await appendN(rheo, 's', 1);
      expect(next!.sequence).toBe(5);
      // An id is remembered only while its event is retained.
      const again = await rheo.append('s', { id: first[0]!.id, payload: 'again' });
      expect(again.existed).toBe(false);
      expect(again.sequence).toBe(6);
    });

    it('read and query below the low watermark start at it', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await appendN(rheo, 's', 6);
      await rheo.trim('s', { keep: 3 });
      expect((await rheo.read('s', { after: 0, limit: 2 })).map((e) => e.sequence)).toEqual([4, 5]);
      expect((await rheo.read('s', { after: 4 })).map((e) => e.sequence)).toEqual([5, 6]);
      const q = await rheo.query('s', { afterSequence: 1, untilSequence: 5 });
      expect(q.events.map((e) => e.sequence)).toEqual([4, 5]);
      expect((await rheo.query('s', { order: 'desc' })).events.map((e) => e.sequence)).toEqual([6, 5, 4]);
    });

    it('createGroup, resetGroup and replay below the low watermark start at it', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      const t0 = clock.now();
      await rheo.appendBatch('s', Array.from({ length: 6 }, (_, i) => ({ payload: i, timestamp: new Date(t0 + i) })));
      await rheo.trim('s', { keep: 2 });
      await rheo.createGroup('s', 'a', { startAfter: 1 });
      await rheo.createGroup('s', 'b', { startAt: new Date(t0) });
      await rheo.createGroup('s', 'c', { startAfter: { 0: 0 } });
      for (const g of ['a', 'b', 'c']) {
        expect((await rheo.lag('s', g)).partitions[0]).toMatchObject({ lowWatermark: 5, frontier: 4, lag: 2 });
      }
      expect((await fetchAll(rheo, 's', 'a')).map((l) => l.event.sequence)).toEqual([5, 6]);
      await consumeAll(rheo, 's', 'b');
      await rheo.replay('s', 'b', { fromSequence: 1 });
      expect((await rheo.lag('s', 'b')).partitions[0]).toMatchObject({ frontier: 4, lag: 2 });
      expect((await fetchAll(rheo, 's', 'b')).map((l) => l.event.sequence)).toEqual([5, 6]);
      await rheo.resetGroup('s', 'c', { confirm: true, startAfter: 0 });
      expect((await rheo.lag('s', 'c')).partitions[0]).toMatchObject({ frontier: 4, lag: 2 });
      expect((await fetchAll(rheo, 's', 'c')).map((l) => l.event.sequence)).toEqual([5, 6]);
    });

    it('replay by query, by event ids or from a time never reopens a trimmed event', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const t0 = clock.now();
      const ids = (
        await rheo.appendBatch('s', Array.from({ length: 5 }, (_, i) => ({ type: 't', payload: i, timestamp: new Date(t0 + i) })))
      ).map((e) => e.id);
      await consumeAll(rheo, 's', 'g');
      await rheo.trim('s', { keep: 2 });
      await rheo.replay('s', 'g', { query: { type: 't' } });
      expect((await rheo.lag('s', 'g')).partitions[0]).toMatchObject({ lowWatermark: 4, frontier: 3, lag: 2 });
      const redelivered = await fetchAll(rheo, 's', 'g');
      expect(redelivered.map((l) => l.event.sequence)).toEqual([4, 5]);
      await rheo.ackMany(redelivered);
      await rheo.replay('s', 'g', { from: new Date(t0) });
      const again = await fetchAll(rheo, 's', 'g');
      expect(again.map((l) => l.event.sequence)).toEqual([4, 5]);
      await rheo.ackMany(again);
      // Trimmed ids are unknown ids: refused, and nothing is reopened.
      await expectCode(rheo.replay('s', 'g', { eventIds: ids.slice(0, 3) }), 'invalid_argument');
      expect((await rheo.lag('s', 'g')).partitions[0]).toMatchObject({ frontier: 5, lag: 0 });
      expect(await fetchAll(rheo, 's', 'g')).toEqual([]);
    });

    it('setRetention changes and clears the policy', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await appendN(rheo, 's', 4);
      await rheo.setRetention('s', { maxEvents: 1 });
      expect((await rheo.listStreams())[0]!.retention).toEqual({ maxAgeMs: null, maxEvents: 1 });
      await rheo.setRetention('s', { maxAgeMs: 5000, maxEvents: null });
      expect((await rheo.listStreams())[0]!.retention).toEqual({ maxAgeMs: 5000, maxEvents: null });
      await rheo.setRetention('s', null);
      expect((await rheo.listStreams())[0]!.retention).toBeNull();
      expect((await rheo.trim('s')).deleted).toBe(0);
    });

    it('trims in bounded batches and sums them', async () => {
      const { backend, clock } = fx();
      const small = createRheo({ backend, clock, retention: { enabled: false, batchSize: 3 } });
      await small.createStream('s', { partitions: 2 });
      await appendN(small, 's', 5, { partition: 0 });
      await appendN(small, 's', 4, { partition: 1 });
      const one = await backend.trim!('s', { before: null, keep: 0, force: false, limit: 3 });
      expect(one.deleted).toBe(3);
      const report = await small.trim('s', { keep: 0 });
      expect(report.deleted).toBe(6);
      expect(report.partitions).toEqual({ 0: { deleted: 2, lowWatermark: 6 }, 1: { deleted: 4, lowWatermark: 5 } });
    });

    it('the background trimmer applies retention to the streams that have it', async () => {
      const { backend, clock } = fx();
      const rheo = createRheo({ backend, clock, retention: { intervalMs: 3_600_000 } });
      await rheo.createStream('kept');
      await rheo.createStream('trimmed', { retention: { maxEvents: 2 } });
      await appendN(rheo, 'kept', 5);
      await appendN(rheo, 'trimmed', 5);
      await rheo.createGroup('trimmed', 'g');
      await rheo.trimmer!.runOnce();
      expect(await lowWatermarks('trimmed')).toEqual([1]); // g settled nothing yet
      await consumeAll(rheo, 'trimmed', 'g');
      await rheo.trimmer!.runOnce();
      expect(await lowWatermarks('trimmed')).toEqual([4]);
      expect(await lowWatermarks('kept')).toEqual([1]);
      expect(rheo.trimmer!.lastError).toBeNull();
      await rheo.trimmer!.close();
    });

    it('deleteGroup removes the group and its state; its leases go stale', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await rheo.createGroup('s', 'other');
      await appendN(rheo, 's', 3);
      const [lease] = await rheo.fetch('s', 'g', { limit: 1 });
      await expectCode(rheo.deleteGroup('s', 'g', undefined as never), 'confirm_required');
      await expectCode(rheo.deleteGroup('s', 'g', { confirm: 'yes' } as never), 'confirm_required');
      expect(await rheo.listGroups('s')).toEqual(['g', 'other']);
      await rheo.deleteGroup('s', 'g', { confirm: true });
      expect(await rheo.listGroups('s')).toEqual(['other']);
      await expectCode(rheo.ack(lease!), 'stale_lease');
      await expectCode(rheo.lag('s', 'g'), 'group_not_found');
      await expectCode(rheo.deleteGroup('s', 'g', { confirm: true }), 'group_not_found');
      await expectCode(rheo.deleteGroup('nope', 'g', { confirm: true }), 'stream_not_found');
      // The name is free again and starts fresh.
      await rheo.createGroup('s', 'g');
      expect((await rheo.lag('s', 'g')).lag).toBe(3);
      expect((await fetchAll(rheo, 's', 'g')).map((l) => l.attempt)).toEqual([1, 1, 1]);
    });

    it('deleteStream removes the stream with its events and groups; the name can be created again, fresh', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2, retention: { maxEvents: 10 } });
      await rheo.createGroup('s', 'g');
      const old = await appendN(rheo, 's', 3);
      const [lease] = await rheo.fetch('s', 'g', { limit: 1 });
      await expectCode(rheo.deleteStream('s', {} as never), 'confirm_required');
      expect((await rheo.listStreams()).map((s) => s.name)).toEqual(['s']);
      await rheo.deleteStream('s', { confirm: true });
      expect(await rheo.listStreams()).toEqual([]);
      await expectCode(rheo.read('s'), 'stream_not_found');
      await expectCode(rheo.listGroups('s'), 'stream_not_found');
      await expectCode(rheo.ack(lease!), 'stale_lease');
      await expectCode(rheo.deleteStream('s', { confirm: true }), 'stream_not_found');
      await rheo.createStream('s');
      const [info] = await rheo.listStreams();
      expect(info).toMatchObject({ name: 's', partitions: 1, retention: null, watermarks: { 0: { lowWatermark: 1, highWatermark: 0 } } });
      expect(await rheo.listGroups('s')).toEqual([]);
      const again = await rheo.append('s', { id: old[0]!.id, payload: 'fresh' });
      expect(again).toMatchObject({ sequence: 1, existed: false, payload: 'fresh' });
      await rheo.createGroup('s', 'g');
      expect((await rheo.lag('s', 'g')).lag).toBe(1);
    });

    vitestIt('groupInfo counts leases held and dead letters per partition, summing to the totals', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 4, { partition: 0 });
      await appendN(rheo, 's', 3, { partition: 2 });
      const p0 = await rheo.fetch('s', 'g', { limit: 4, partitions: [0] });
      const p2 = await rheo.fetch('s', 'g', { limit: 3, partitions: [2] });
      await rheo.reject(p0[0]!, 'x');
      await rheo.ack(p0[1]!);
      await rheo.reject(p2[2]!, 'y');
      await rheo.nack(p2[0]!, 'later', { delayMs: 60_000 });
      const info = await rheo.groupInfo('s', 'g');
      expect(info.partitions).toEqual({
        0: { inflight: 2, deadLetters: 1 },
        1: { inflight: 0, deadLetters: 0 },
        2: { inflight: 1, deadLetters: 1 },
      });
      expect(info.inflight).toBe(3);
      expect(info.deadLetters).toBe(2);
    });

    it('bad input is invalid_argument and changes nothing', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await appendN(rheo, 's', 3);
      const bad: unknown[] = [
        {},
        { maxAgeMs: 0 },
        { maxAgeMs: -5 },
        { maxEvents: -1 },
        { maxEvents: 1.5 },
        { maxEvents: '3' },
        { maxAgeMs: null, maxEvents: null },
        { maxEvent: 3 },
        'forever',
        [],
      ];
      for (const retention of bad) {
        await expectCode(rheo.createStream('t', { retention } as never), 'invalid_argument');
        await expectCode(rheo.setRetention('s', retention as never), 'invalid_argument');
      }
      await expectCode(rheo.setRetention('s', undefined as never), 'invalid_argument');
      expect((await rheo.listStreams()).map((s) => [s.name, s.retention])).toEqual([['s', null]]);
      for (const options of [{ keep: -1 }, { keep: 1.5 }, { before: 'yesterday' }, { before: new Date(NaN) }, { force: 'yes' }, { maxEvents: 1 }, 'all']) {
        await expectCode(rheo.trim('s', options as never), 'invalid_argument');
      }
      await expectCode(rheo.trim('bad name!'), 'invalid_argument');
      await expectCode(rheo.trim('nope'), 'stream_not_found');
      await expectCode(rheo.setRetention('nope', { maxEvents: 1 }), 'stream_not_found');
      await expectCode(rheo.deleteStream('bad name!', { confirm: true }), 'invalid_argument');
      expect((await rheo.read('s')).length).toBe(3);
    });
  });
}
