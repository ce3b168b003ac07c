import { describe, expect, it } from 'vitest';
import { partitionForKey } from '../../src/core/partitioner.js';
import {
  appendN,
  consumeAll,
  expectCode,
  fetchAll,
  readAll,
  stored,
  useFixture,
  type BackendFactory,
} from './fixture.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** Keys that land on distinct partitions of a stream with `partitions` partitions. */
export function keysSpreadingOver(partitions: number): string[] {
  const byPartition = new Map<number, string>();
  for (let i = 0; byPartition.size < partitions; i++) {
    const key = `key-${i}`;
    const p = partitionForKey(key, partitions);
    if (!byPartition.has(p)) byPartition.set(p, key);
  }
  return [...byPartition.entries()].sort((a, b) => a[0] - b[0]).map(([, k]) => k);
}

export function registerLogTests(makeBackend: BackendFactory): void {
  describe('streams', () => {
    const fx = useFixture(makeBackend);

    it('lists created streams with their partition counts', async () => {
      const { rheo } = fx();
      await rheo.createStream('orders', { partitions: 3 });
      await rheo.createStream('audit');
      const streams = await rheo.listStreams();
      expect(streams.map((s) => [s.name, s.partitions]).sort()).toEqual([
        ['audit', 1],
        ['orders', 3],
      ]);
      for (const s of streams) expect(s.createdAt).toBeInstanceOf(Date);
    });

    it('rejects a second stream with the same name as already_exists', async () => {
      const { rheo } = fx();
      await rheo.createStream('orders', { partitions: 2 });
      const error = await expectCode(rheo.createStream('orders', { partitions: 4 }), 'already_exists');
      expect(error.message).toContain('orders');
      expect([error.stream, error.group]).toEqual(['orders', undefined]);
      expect((await rheo.listStreams()).map((s) => [s.name, s.partitions])).toEqual([['orders', 2]]);
    });

    it('accepts every name character of [A-Za-z0-9._:-] and 200-character names', async () => {
      const { rheo } = fx();
      const long = 'a'.repeat(200);
      await rheo.createStream('Az09._:-');
      await rheo.createStream(long);
      expect((await rheo.listStreams()).map((s) => s.name).sort()).toEqual(['Az09._:-', long].sort());
    });

    it('rejects bad stream names with invalid_argument and creates nothing', async () => {
      const { rheo } = fx();
      for (const name of ['', 'a b', 'a/b', 'é', 'a'.repeat(201), 'x\u0000']) {
        await expectCode(rheo.createStream(name), 'invalid_argument');
      }
      await expectCode(rheo.createStream(42 as unknown as string), 'invalid_argument');
      expect(await rheo.listStreams()).toEqual([]);
    });

    it('rejects partition counts that are not positive integers', async () => {
      const { rheo } = fx();
      for (const partitions of [0, -1, 1.5, Number.NaN]) {
        await expectCode(rheo.createStream('s', { partitions }), 'invalid_argument');
      }
      expect(await rheo.listStreams()).toEqual([]);
    });
  });

  describe('group lifecycle', () => {
    const fx = useFixture(makeBackend);

    it('createGroup on a missing stream is stream_not_found', async () => {
      const { rheo } = fx();
      const error = await expectCode(rheo.createGroup('nope', 'g'), 'stream_not_found');
      expect(error.message).toContain('nope');
    });

    it('a second group with the same name on the same stream is already_exists', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const error = await expectCode(rheo.createGroup('s', 'g'), 'already_exists');
      expect(error.message).toContain('g');
      expect([error.stream, error.group]).toEqual(['s', 'g']);
      expect(await rheo.listGroups('s')).toEqual(['g']);
    });

    it('the same group name on two streams names two groups', async () => {
      const { rheo } = fx();
      await rheo.createStream('a');
      await rheo.createStream('b');
      await rheo.createGroup('a', 'g');
      await rheo.createGroup('b', 'g');
      expect(await rheo.listGroups('a')).toEqual(['g']);
      expect(await rheo.listGroups('b')).toEqual(['g']);
    });

    it('a startAfter map naming a missing partition is invalid_partition', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await expectCode(rheo.createGroup('s', 'g', { startAfter: { 2: 5 } }), 'invalid_partition');
      expect(await rheo.listGroups('s')).toEqual([]);
    });

    it('a startAfter map naming a missing partition is invalid_partition even when the group exists', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g', { maxAttempts: 3 });
      await expectCode(rheo.createGroup('s', 'g', { startAfter: { 2: 5 } }), 'invalid_partition');
      expect((await rheo.groupInfo('s', 'g')).maxAttempts).toBe(3);
    });

    it('rejects bad group names and bad group options with invalid_argument', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await expectCode(rheo.createGroup('s', 'bad name'), 'invalid_argument');
      await expectCode(rheo.createGroup('s', ''), 'invalid_argument');
      await expectCode(rheo.createGroup('s', 'g', { startAfter: -1 }), 'invalid_argument');
      await expectCode(rheo.createGroup('s', 'g', { maxAttempts: 0 }), 'invalid_argument');
      await expectCode(rheo.createGroup('s', 'g', { startAt: new Date(Number.NaN) }), 'invalid_argument');
      await expectCode(rheo.createGroup('s', 'g', { startAfter: 1, startAt: new Date() }), 'invalid_argument');
      expect(await rheo.listGroups('s')).toEqual([]);
    });

    it('every group operation on a missing group is group_not_found naming stream and group', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const calls: Array<() => Promise<unknown>> = [
        () => rheo.fetch('s', 'ghost'),
        () => rheo.lag('s', 'ghost'),
        () => rheo.groupInfo('s', 'ghost'),
        () => rheo.deadLetters('s', 'ghost'),
        () => rheo.redrive('s', 'ghost'),
        () => rheo.replay('s', 'ghost', { fromSequence: 1 }),
        () => rheo.resetGroup('s', 'ghost', { confirm: true }),
      ];
      for (const call of calls) {
        const error = await expectCode(call(), 'group_not_found');
        expect(error.message).toContain('ghost');
        expect(error.message).toContain('"s"');
      }
    });

    it('every operation on a missing stream is stream_not_found', async () => {
      const { rheo } = fx();
      const calls: Array<() => Promise<unknown>> = [
        () => rheo.append('ghost', { payload: 1 }),
        () => rheo.appendBatch('ghost', [{ payload: 1 }]),
        () => rheo.read('ghost'),
        () => rheo.query('ghost'),
        () => rheo.listGroups('ghost'),
        () => rheo.fetch('ghost', 'g'),
      ];
      for (const call of calls) {
        const error = await expectCode(call(), 'stream_not_found');
        expect(error.message).toContain('ghost');
      }
    });
  });

  describe('append and read', () => {
    const fx = useFixture(makeBackend);

    it('fills defaults: type "event", key null, metadata {}, a UUIDv7 id, the clock time', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      const e = await rheo.append('s', { payload: { a: 1 } });
      expect(e).toMatchObject({ stream: 's', partition: 0, sequence: 1, type: 'event', key: null, metadata: {} });
      expect(e.payload).toEqual({ a: 1 });
      expect(e.id).toMatch(UUID_V7);
      expect(e.timestamp.getTime()).toBe(clock.now());
      expect(e.existed).toBe(false);
      expect(await rheo.read('s')).toEqual([stored(e)]);
    });

    it('stores the given type, key, metadata, id and timestamp', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const at = new Date(Date.UTC(2025, 5, 1, 12, 0, 0, 123));
      const e = await rheo.append('s', {
        payload: [1, 'two', null, { three: true }],
        type: 'order.paid',
        key: 'order-1',
        metadata: { trace: 'abc', nested: { n: 1 } },
        id: 'my-id',
        timestamp: at,
      });
      expect(e).toMatchObject({ id: 'my-id', type: 'order.paid', key: 'order-1', metadata: { trace: 'abc', nested: { n: 1 } } });
      expect(e.timestamp.getTime()).toBe(at.getTime());
      expect(await rheo.read('s')).toEqual([stored(e)]);
    });

    it('numbers each partition from 1 contiguously, independently of the others', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 3 });
      const got: Array<[number, number]> = [];
      for (let i = 0; i < 12; i++) {
        const e = await rheo.append('s', { payload: i, partition: i % 2 === 0 ? 0 : 2 });
        got.push([e.partition, e.sequence]);
      }
      const batch = await rheo.appendBatch('s', [
        { payload: 'a', partition: 2 },
        { payload: 'b', partition: 1 },
        { payload: 'c', partition: 2 },
      ]);
      expect(batch.map((e) => [e.partition, e.sequence])).toEqual([
        [2, 7],
        [1, 1],
        [2, 8],
      ]);
      expect(got.filter(([p]) => p === 0).map(([, s]) => s)).toEqual([1, 2, 3, 4, 5, 6]);
      expect((await rheo.read('s', { partition: 2 })).map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      expect((await rheo.read('s', { partition: 1 })).map((e) => e.payload)).toEqual(['b']);
    });

    it('read honours partition, after and limit', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await appendN(rheo, 's', 10, { partition: 1 });
      expect(await rheo.read('s', { partition: 0 })).toEqual([]);
      const page = await rheo.read('s', { partition: 1, after: 3, limit: 4 });
      expect(page.map((e) => e.sequence)).toEqual([4, 5, 6, 7]);
      expect(await rheo.read('s', { partition: 1, after: 10 })).toEqual([]);
    });

    it('read of a partition the stream does not have is invalid_partition', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await expectCode(rheo.read('s', { partition: 2 }), 'invalid_partition');
    });

    it('appendBatch returns events in input order and generates distinct ids', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const events = await appendN(rheo, 's', 50);
      expect(events.map((e) => (e.payload as { n: number }).n)).toEqual([...Array(50).keys()]);
      expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
      expect(new Set(events.map((e) => e.id)).size).toBe(50);
    });

    it('an empty appendBatch writes nothing and returns []', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      expect(await rheo.appendBatch('s', [])).toEqual([]);
      expect(await rheo.read('s')).toEqual([]);
    });

    it('keeps its own copy of the payload and metadata', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const payload = { list: [1, 2], inner: { x: 1 } };
      const metadata = { tag: 'a' };
      await rheo.append('s', { payload, metadata });
      payload.list.push(3);
      payload.inner.x = 99;
      metadata.tag = 'changed';
      const [stored] = await rheo.read('s');
      expect(stored!.payload).toEqual({ list: [1, 2], inner: { x: 1 } });
      expect(stored!.metadata).toEqual({ tag: 'a' });
    });
  });

  describe('routing', () => {
    const fx = useFixture(makeBackend);

    it('routes a key to murmur2(key) % partitions, the same partition every time', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 7 });
      const keys = ['order-1', 'order-2', 'customer-42', 'a-little-bit-long-string', '', 'ключ', '🦀'];
      for (let round = 0; round < 3; round++) {
        for (const key of keys) {
          const e = await rheo.append('s', { payload: round, key });
          expect(e.partition).toBe(partitionForKey(key, 7));
          expect(e.key).toBe(key);
        }
      }
    });

    it('spreads distinct keys over all partitions', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 4 });
      const events = await rheo.appendBatch(
        's',
        Array.from({ length: 40 }, (_, i) => ({ payload: i, key: `user-${i}` })),
      );
      expect(new Set(events.map((e) => e.partition))).toEqual(new Set([0, 1, 2, 3]));
    });

    it('an explicit partition wins over the key', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 4 });
      const [key] = keysSpreadingOver(4).slice(1);
      expect(partitionForKey(key!, 4)).toBe(1);
      const e = await rheo.append('s', { payload: 1, key: key!, partition: 3 });
      expect(e.partition).toBe(3);
      expect(e.key).toBe(key);
    });

    it('with neither key nor partition the event lands on partition 0', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 5 });
      const events = await appendN(rheo, 's', 10);
      expect(events.every((e) => e.partition === 0)).toBe(true);
    });

    it('an explicit partition out of range is invalid_partition and writes nothing', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      const error = await expectCode(rheo.append('s', { payload: 1, partition: 2 }), 'invalid_partition');
      expect(error.message).toContain('"s"');
      expect(await readAll(rheo, 's')).toEqual([]);
    });
  });

  describe('idempotent append', () => {
    const fx = useFixture(makeBackend);

    it('a repeated id returns the stored event and writes nothing', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      const first = await rheo.append('s', { id: 'evt-1', payload: { v: 1 }, type: 't1' });
      clock.advance(1000);
      const again = await rheo.append('s', { id: 'evt-1', payload: { v: 2 }, type: 't2' });
      expect([first.existed, again.existed]).toEqual([false, true]);
      expect(stored(again)).toEqual(stored(first));
      expect(await rheo.read('s')).toEqual([stored(first)]);
    });

    it('in a batch, known ids return stored events while the others append', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const first = await rheo.append('s', { id: 'a', payload: 1 });
      const batch = await rheo.appendBatch('s', [
        { id: 'b', payload: 2 },
        { id: 'a', payload: 99 },
        { id: 'c', payload: 3 },
      ]);
      expect(stored(batch[1]!)).toEqual(stored(first));
      expect(batch.map((e) => [e.id, e.sequence, e.payload, e.existed])).toEqual([
        ['b', 2, 2, false],
        ['a', 1, 1, true],
        ['c', 3, 3, false],
      ]);
      expect((await rheo.read('s')).map((e) => e.id)).toEqual(['a', 'b', 'c']);
    });

    it('an id repeated within one batch yields the event of its first occurrence', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const batch = await rheo.appendBatch('s', [
        { id: 'x', payload: 'first' },
        { id: 'x', payload: 'second' },
      ]);
      expect(stored(batch[1]!)).toEqual(stored(batch[0]!));
      expect(batch[0]!.payload).toBe('first');
      // As if appended one by one: the second occurrence found the first one stored.
      expect(batch.map((e) => e.existed)).toEqual([false, true]);
      expect(await rheo.read('s')).toEqual([stored(batch[0]!)]);
    });

    it('ids are scoped to the stream', async () => {
      const { rheo } = fx();
      await rheo.createStream('a');
      await rheo.createStream('b');
      await rheo.append('a', { id: 'same', payload: 'a' });
      const inB = await rheo.append('b', { id: 'same', payload: 'b' });
      expect(inB).toMatchObject({ stream: 'b', payload: 'b', sequence: 1, existed: false });
      expect(await rheo.read('b')).toEqual([stored(inB)]);
    });
  });

  describe('immutability', () => {
    const fx = useFixture(makeBackend);

    it('fetch, ack, nack, reject, release and replay leave the log unchanged', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g', { maxAttempts: 2 });
      await rheo.appendBatch(
        's',
        Array.from({ length: 8 }, (_, i) => ({ payload: { i }, key: `k${i}`, metadata: { m: i } })),
      );
      const before = await readAll(rheo, 's');
      const queryBefore = await rheo.query('s');
      const leases = await fetchAll(rheo, 's', 'g');
      expect(leases).toHaveLength(8);
      await rheo.ack(leases[0]!);
      await rheo.nack(leases[1]!, 'retry');
      await rheo.reject(leases[2]!, 'bad');
      await rheo.release(leases[3]!);
      clock.advance(60_000);
      await consumeAll(rheo, 's', 'g');
      await rheo.replay('s', 'g', { fromSequence: 1 });
      await consumeAll(rheo, 's', 'g');
      expect(await readAll(rheo, 's')).toEqual(before);
      expect(await rheo.query('s')).toEqual(queryBefore);
    });

    it('changing an event the caller was given (appended, read or leased) does not change the log', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const appended = await rheo.append('s', { payload: { n: 1, nested: { list: [1, 2] } }, metadata: { m: 'x' } });
      // A deep copy: the log may hand out its own (frozen) objects.
      const original = structuredClone(await readAll(rheo, 's'));
      const [read] = await rheo.read('s', { partition: 0 });
      const [lease] = await rheo.fetch('s', 'g');
      for (const event of [appended, read!, lease!.event]) {
        // A backend may hand out frozen events (memory) or copies (PostgreSQL, Redis): either way the log keeps its own.
        const attempts = [
          () => ((event.payload as { n: number }).n = 2),
          () => (event.payload as { nested: { list: number[] } }).nested.list.push(3),
          () => ((event.metadata as { m: string }).m = 'y'),
          () => ((event as { type: string }).type = 'changed'),
        ];
        for (const attempt of attempts) {
          try {
            attempt();
          } catch (error) {
            expect(error).toBeInstanceOf(TypeError);
          }
        }
      }
      expect(await readAll(rheo, 's')).toEqual(original);
      expect(original[0]!.payload).toEqual({ n: 1, nested: { list: [1, 2] } });
      expect(original[0]!.metadata).toEqual({ m: 'x' });
    });
  });
}
