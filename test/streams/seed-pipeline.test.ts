import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import { rejectLease } from '../../src/runtime/lease-outcome.js';
import { createBatchSink, type BatchContext } from '../../src/sinks/batch-sink.js';
import { createBatcherRouter } from '../../src/sinks/batcher-router.js';
import { createLeaseSink } from '../../src/sinks/lease-sink.js';
import { createKeyOrderedTransform } from '../../src/transforms/key-ordered-transform.js';
import { createMapTransform } from '../../src/transforms/map-transform.js';
import { createWindowTransform } from '../../src/transforms/window-transform.js';
import { backendFactories } from '../support/backends.js';
import { useStreamsFixture } from './support/fixture.js';
import { collect } from './support/collect.js';
import { until } from './support/wait.js';

type Tick = { n: number };

/** A promise the test resolves with `open()`: a handler or trigger that blocks until the test lets it go. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

for (const factory of backendFactories) {
  describe(`the seeds' pipeline pieces (${factory.name})`, () => {
    const fx = useStreamsFixture(factory, { maxAttempts: 5 });

    it("a producer's onFailure 'reject' dead-letters what a sink's handler throws on; a stage's own onFailure wins", async () => {
      const { rheo, stream, group } = fx();
      await fx().append(2);
      const producer = fx().producer<Tick>({ maxDemand: 2, onFailure: 'reject' });
      expect(producer.onFailure).toBe('reject');
      const sink = createLeaseSink<Tick>({
        producer,
        handler: (lease) => {
          if (lease.event.payload.n === 2) void producer.drain();
          throw new Error(`bad tick ${lease.event.payload.n}`);
        },
      });
      await pipeline(producer, sink);
      const dead = await rheo.deadLetters(stream, group);
      expect(dead.map((d) => [d.event.sequence, d.reason])).toEqual([
        [1, 'bad tick 1'],
        [2, 'bad tick 2'],
      ]);

      await rheo.redrive(stream, group);
      const second = fx().producer<Tick>({ maxDemand: 2, onFailure: 'reject' });
      const nacking = createLeaseSink<Tick>({
        producer: second,
        onFailure: 'nack',
        handler: (lease) => {
          if (lease.event.payload.n === 2) void second.drain();
          throw new Error('transient');
        },
      });
      await pipeline(second, nacking);
      expect(await rheo.deadLetters(stream, group)).toEqual([]);
      const again = await rheo.fetch(stream, group, { limit: 5 });
      expect(again.map((l) => l.attempt)).toEqual([2, 2]);
    });

    it('refuses an onFailure that is neither nack nor reject, on the producer and on a stage', () => {
      expect(() => fx().producer({ onFailure: 'drop' as never })).toThrow(/onFailure must be 'nack' or 'reject'/);
      const producer = fx().producer<Tick>();
      expect(() => createLeaseSink<Tick>({ producer, onFailure: 'ignore' as never, handler: () => undefined })).toThrow(
        /createLeaseSink: onFailure must be 'nack' or 'reject'/,
      );
    });

    it('processors compose into a lease sink: the handler sees the mapped value; a map can reject its lease', async () => {
      const { rheo, stream, group } = fx();
      await fx().append(3);
      const producer = fx().producer<Tick>({ maxDemand: 3 });
      const seen: Array<[number, unknown]> = [];
      const processors = createMapTransform<Tick, string>({
        producer,
        concurrency: 2,
        map: (lease) => {
          if (lease.event.payload.n === 2) throw rejectLease('tick 2 is poison');
          return `doubled ${lease.event.payload.n * 2}`;
        },
      });
      const sink = createLeaseSink<Tick>({
        producer,
        handler: (lease, { value }) => {
          seen.push([lease.event.payload.n, value]);
          if (seen.length === 2) void producer.drain();
        },
      });
      await pipeline(producer, processors, sink);
      expect(seen).toEqual([
        [1, 'doubled 2'],
        [3, 'doubled 6'],
      ]);
      const dead = await rheo.deadLetters(stream, group);
      expect(dead.map((d) => [d.event.sequence, d.reason])).toEqual([[2, 'tick 2 is poison']]);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('a key-ordered map rejects by the policy, not only nacks', async () => {
      const { rheo, stream, group } = fx();
      await fx().append(1);
      const producer = fx().producer<Tick>({ maxDemand: 1 });
      const ordered = createKeyOrderedTransform<Tick, number>({
        producer,
        onFailure: 'reject',
        map: () => {
          void producer.drain();
          throw new Error('cannot score');
        },
      });
      await pipeline(producer, ordered, collect([]));
      expect((await rheo.deadLetters(stream, group)).map((d) => d.reason)).toEqual(['cannot score']);
    });

    it('processors compose into a batch sink: the batch handler sees the values beside their leases', async () => {
      const { rheo, stream, group } = fx();
      await fx().append(4);
      const producer = fx().producer<Tick>({ maxDemand: 4 });
      const batches: Array<{ sequences: number[]; values: unknown[] | undefined }> = [];
      const processors = createMapTransform<Tick, { square: number }>({
        producer,
        map: (lease) => ({ square: lease.event.payload.n ** 2 }),
      });
      const warehouse = createBatchSink<Tick>({
        producer,
        batchSize: 2,
        handler: (leases, context: BatchContext) => {
          batches.push({ sequences: leases.map((l) => l.event.sequence), values: context.values });
          if (batches.length === 2) void producer.drain();
        },
      });
      await pipeline(producer, processors, warehouse);
      expect(batches).toEqual([
        { sequences: [1, 2], values: [{ square: 1 }, { square: 4 }] },
        { sequences: [3, 4], values: [{ square: 9 }, { square: 16 }] },
      ]);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('anything but a lease reaching a sink fails the pipeline with invalid_argument, and the lease comes back', async () => {
      const { rheo, stream, group, clock } = fx();
      await fx().append(1);
      const producer = fx().producer<Tick>({ maxDemand: 1 });
      const sink = createLeaseSink<Tick>({ producer, handler: () => undefined });
      const wrong = createMapTransform<Tick, number>({ producer, map: () => 1 });
      // A stage that drops the lease: what reaches the sink is no lease at all.
      const broken = pipeline(
        producer,
        wrong,
        new Transform({
          objectMode: true,
          transform(mapped: { value: number }, _encoding, callback) {
            callback(null, { notALease: mapped.value });
          },
        }),
        sink,
      );
      await expect(broken).rejects.toMatchObject({ code: 'invalid_argument', message: expect.stringMatching(/createLeaseSink takes leases/) });
      const batch = createBatchSink<Tick>({ producer: fx().producer<Tick>(), handler: () => undefined });
      await expect(pipeline(Readable.from([42]), batch)).rejects.toMatchObject({ code: 'invalid_argument' });
      // The lease was handed downstream and dropped by the broken stage: it expires and comes back.
      clock.advance(1001);
      const again = await rheo.fetch(stream, group, { limit: 5 });
      expect(again.map((l) => [l.event.sequence, l.attempt])).toEqual([[1, 2]]);
    });

    it('fans out to several batchers by a function of the event; a slow batcher stalls only its own leases', async () => {
      const { rheo, stream, group, timers } = fx();
      await rheo.appendBatch(
        stream,
        Array.from({ length: 6 }, (_, i) => ({ type: i % 3 === 0 ? 'audit' : 'trade', payload: { n: i + 1 } })),
      );
      const producer = fx().producer<Tick>({ maxDemand: 6 });
      const stuck = gate();
      const warehouseBatches: number[][] = [];
      const auditBatches: number[][] = [];
      const warehouse = createBatchSink<Tick>({
        producer,
        batchSize: 2,
        concurrency: 2,
        handler: (leases) => void warehouseBatches.push(leases.map((l) => l.event.payload.n)),
      });
      const audit = createBatchSink<Tick>({
        producer,
        batchSize: 1,
        handler: async (leases) => {
          auditBatches.push(leases.map((l) => l.event.payload.n));
          await stuck.wait;
        },
      });
      const router = createBatcherRouter<Tick>({
        producer,
        batchers: { warehouse, audit },
        route: (lease) => (lease.event.type === 'audit' ? 'audit' : 'warehouse'),
      });
      const done = pipeline(producer, router);
      // Audit's first batch blocks; every warehouse lease still gets through and settles.
      await until(() => warehouseBatches.flat().length === 4 && producer.inflightCount === 2, 'the warehouse batches ran and settled');
      expect(auditBatches).toEqual([[1]]);
      expect(router.routedCounts).toEqual({ warehouse: 4, audit: 2 });
      const partway = await rheo.lag(stream, group);
      expect(partway.partitions[0]?.frontier).toBe(0); // sequence 1 (audit) is still held
      expect(producer.inflightCount).toBe(2);
      stuck.open();
      await until(() => auditBatches.length === 2, 'the audit batcher resumed');
      void producer.drain();
      timers.advance(1000);
      await done;
      expect(warehouseBatches.flat().sort((a, b) => a - b)).toEqual([2, 3, 5, 6]);
      expect(auditBatches).toEqual([[1], [4]]);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('a route naming no batcher fails the pipeline with invalid_argument', async () => {
      await fx().append(1);
      const producer = fx().producer<Tick>({ maxDemand: 1 });
      const only = createBatchSink<Tick>({ producer, handler: () => undefined });
      const router = createBatcherRouter<Tick>({ producer, batchers: { only }, route: () => 'elsewhere' });
      await expect(pipeline(producer, router)).rejects.toMatchObject({
        code: 'invalid_argument',
        message: expect.stringMatching(/"elsewhere", which names no batcher \(batchers: "only"\)/),
      });
    });

    it('batchKey: one batch holds leases of one key only', async () => {
      await fx().append(6); // keys k0, k1, k2, k0, k1, k2
      const producer = fx().producer<Tick>({ maxDemand: 6 });
      const batches: Array<{ key: string | undefined; ns: number[] }> = [];
      const sink = createBatchSink<Tick>({
        producer,
        batchSize: 2,
        batchKey: (lease) => lease.event.key ?? '',
        handler: (leases, { key }) => {
          batches.push({ key, ns: leases.map((l) => l.event.payload.n) });
          if (batches.length === 3) void producer.drain();
        },
      });
      await pipeline(producer, sink);
      expect(batches.sort((a, b) => String(a.key).localeCompare(String(b.key)))).toEqual([
        { key: 'k0', ns: [1, 4] },
        { key: 'k1', ns: [2, 5] },
        { key: 'k2', ns: [3, 6] },
      ]);
      expect(sink.openBatchLength).toBe(0);
    });

    it('keyed windows: one window per key, settled only when its own window emits; stages run in parallel', async () => {
      const { rheo, stream, group, timers, faulty } = fx();
      await fx().append(4); // keys k0, k1, k2, k0
      const producer = fx().producer<Tick>({ maxDemand: 4 });
      const out: Array<{ key: string | undefined; sum: number }> = [];
      const k0Trigger = gate();
      let running = 0;
      let maxRunning = 0;
      const windows = createWindowTransform<Tick, number, { key: string | undefined; sum: number }>({
        producer,
        key: (lease) => lease.event.key ?? '',
        stages: 4,
        every: 2,
        everyMs: 1000,
        initial: () => 0,
        reduce: (sum, lease) => sum + lease.event.payload.n,
        trigger: async (sum, _leases, { key }) => {
          running++;
          maxRunning = Math.max(maxRunning, running);
          if (key === 'k0') await k0Trigger.wait;
          running--;
          return { key, sum };
        },
      });
      const done = pipeline(producer, windows, collect(out));
      await until(() => windows.openWindows === 2 && out.length === 0 && running === 1, 'k0 closed at 2 leases, k1 and k2 open');
      expect(faulty.settles).toEqual([]);
      timers.advance(1000); // closes k1 and k2 while k0's trigger still waits
      await until(() => out.length === 2 && faulty.settles.length === 2, 'k1 and k2 emitted and settled beside the waiting k0');
      expect(out.map((o) => o.key).sort()).toEqual(['k1', 'k2']);
      expect(faulty.settles.map((s) => s.sequence).sort()).toEqual([2, 3]);
      expect(maxRunning).toBeGreaterThanOrEqual(2);
      k0Trigger.open();
      await until(() => out.length === 3, 'k0 emitted');
      expect(out.find((o) => o.key === 'k0')).toEqual({ key: 'k0', sum: 5 });
      void producer.drain();
      await done;
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('keyed windows need everyMs, and stages need a key', () => {
      const producer = fx().producer<Tick>({ maxDemand: 4 });
      expect(() => createWindowTransform({ producer, key: () => 'x', every: 2, trigger: () => 1 })).toThrow(/need everyMs/);
      expect(() => createWindowTransform({ producer, stages: 2, every: 2, trigger: () => 1 })).toThrow(/stages needs key/);
    });

    it('the two knobs: a sink whose concurrency is above the producer\'s maxDemand is refused', () => {
      const producer = fx().producer<Tick>({ maxDemand: 4 });
      expect(() => createLeaseSink<Tick>({ producer, concurrency: 5, handler: () => undefined })).toThrow(
        /createLeaseSink: concurrency \(5\) is above the producer's maxDemand \(4\)/,
      );
      expect(() => createBatchSink<Tick>({ producer, concurrency: 5, handler: () => undefined })).toThrow(/createBatchSink: concurrency \(5\)/);
      expect(createLeaseSink<Tick>({ producer, concurrency: 4, handler: () => undefined }).concurrency).toBe(4);
    });

    it('confirm takes several lease ids at once', async () => {
      const { rheo } = fx();
      await fx().append(3);
      const producer = fx().producer<Tick>({ maxDemand: 3 });
      const leases: Lease<Tick>[] = [];
      producer.on('data', (lease: Lease<Tick>) => leases.push(lease));
      await until(() => leases.length === 3, 'three leases read');
      producer.pause();
      for (const lease of leases) await rheo.ack(lease);
      expect(producer.confirm([leases[0]!.leaseId, leases[1]!.leaseId])).toBe(true);
      expect(producer.inflightCount).toBe(1);
      expect(producer.confirm([leases[1]!.leaseId, leases[2]!.leaseId])).toBe(false); // the first was no longer held
      expect(producer.inflightCount).toBe(0);
      expect(() => producer.confirm([1, 2] as never)).toThrow(/confirm expects a lease id or an array of lease ids/);
    });
  });

  describe(`the window transform's destroy paths (${factory.name})`, () => {
    const fx = useStreamsFixture(factory);

    it('a window destroyed during its trigger releases its leases: they come back at attempt 1 and nothing is acked', async () => {
      const { rheo, stream, group, faulty } = fx();
      await fx().append(2);
      const producer = fx().producer<Tick>({ maxDemand: 2 });
      let triggered = false;
      const release = gate();
      const windows = createWindowTransform<Tick, Lease<Tick>[], number>({
        producer,
        every: 2,
        trigger: async (leases) => {
          triggered = true;
          await release.wait; // ignores its signal: finishes after the destroy
          return leases.length;
        },
      });
      const abort = new AbortController();
      const done = pipeline(producer, windows, collect([]), { signal: abort.signal }).catch((e: unknown) => e);
      await until(() => triggered, 'the trigger started');
      abort.abort();
      await done;
      release.open();
      await until(() => faulty.settles.length === 2, 'both leases settled');
      expect(faulty.settles.map((s) => s.kind)).toEqual(['release', 'release']);
      const again = await rheo.fetch(stream, group, { limit: 5 });
      expect(again.map((l) => [l.event.sequence, l.attempt])).toEqual([
        [1, 1],
        [2, 1],
      ]);
    });

    it('a trigger that throws after the shutdown abort releases instead of nacking', async () => {
      const { rheo, stream, group, faulty } = fx();
      await fx().append(2);
      const producer = fx().producer<Tick>({ maxDemand: 2 });
      let triggered = false;
      const windows = createWindowTransform<Tick, Lease<Tick>[], number>({
        producer,
        every: 2,
        trigger: (_leases, _all, { signal }) =>
          new Promise<number>((_resolve, reject) => {
            triggered = true;
            signal.addEventListener('abort', () => reject(new Error('aborted by shutdown')));
          }),
      });
      const errors: unknown[] = [];
      windows.on('trigger-error', (info) => errors.push(info.error));
      const abort = new AbortController();
      const done = pipeline(producer, windows, collect([]), { signal: abort.signal }).catch((e: unknown) => e);
      await until(() => triggered, 'the trigger started');
      abort.abort();
      await done;
      await until(() => faulty.settles.length === 2, 'both leases settled');
      expect(errors).toEqual([]);
      expect(faulty.settles.map((s) => s.kind)).toEqual(['release', 'release']);
      expect((await rheo.fetch(stream, group, { limit: 5 })).map((l) => l.attempt)).toEqual([1, 1]);
    });

    it('destroy releases the leases of the unfinished window', async () => {
      const { rheo, stream, group, faulty } = fx();
      await fx().append(2);
      const producer = fx().producer<Tick>({ maxDemand: 2, minDemand: 2 });
      const windows = createWindowTransform<Tick, Lease<Tick>[], number>({ producer, every: 3, everyMs: 60_000, trigger: (l) => l.length });
      let fetched = 0;
      producer.on('fetched', (info: { count: number }) => (fetched += info.count));
      const abort = new AbortController();
      const done = pipeline(producer, windows, collect([]), { signal: abort.signal }).catch((e: unknown) => e);
      await until(() => fetched === 2 && producer.readableLength === 0 && windows.openWindows === 1, 'the window holds both');
      abort.abort();
      await done;
      expect(faulty.settles.map((s) => s.kind)).toEqual(['release', 'release']);
      expect((await rheo.fetch(stream, group, { limit: 5 })).map((l) => [l.event.sequence, l.attempt])).toEqual([
        [1, 1],
        [2, 1],
      ]);
    });
  });
}
