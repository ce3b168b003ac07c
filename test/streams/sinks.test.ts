import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import { createBatchSink, type BatchContext } from '../../src/sinks/batch-sink.js';
import type { SettleErrorInfo, SinkLeaseLostInfo } from '../../src/runtime/lease-outcome.js';
import { createLeaseSink } from '../../src/sinks/lease-sink.js';
import { createMapTransform } from '../../src/transforms/map-transform.js';
import { createRateLimit } from '../../src/transforms/rate-limit.js';
import { backendFactories } from '../support/backends.js';
import { useStreamsFixture } from './support/fixture.js';
import { until } from './support/wait.js';

for (const factory of backendFactories) {
  describe(`lease sink (${factory.name})`, () => {
    const fx = useStreamsFixture(factory);

    it('settles by outcome: nothing/ack acks, retry nacks, reject dead-letters, a throw nacks with the message', async () => {
      const { rheo, stream, group, faulty } = fx();
      await fx().append(5);
      const producer = fx().producer<{ n: number }>({ maxDemand: 5 });
      const outcomes = [undefined, 'ack', { retry: 'later', delayMs: 60_000 }, { reject: 'poison' }] as const;
      let seen = 0;
      const sink = createLeaseSink<{ n: number }>({
        producer,
        concurrency: 3,
        handler: (lease) => {
          // All five were claimed by the first fetch: drain now, so nothing nacked here comes back in this run.
          if (++seen === 1) void producer.drain();
          if (lease.event.payload.n === 5) throw new Error('exploded');
          return outcomes[lease.event.payload.n - 1];
        },
      });
      await pipeline(producer, sink);
      const bySequence = Object.fromEntries(faulty.settles.map((s) => [s.sequence, s.kind]));
      expect(bySequence).toEqual({ 1: 'ack', 2: 'ack', 3: 'nack', 4: 'reject', 5: 'nack' });
      const dead = await rheo.deadLetters(stream, group);
      expect(dead.map((d) => [d.event.sequence, d.reason])).toEqual([[4, 'poison']]);
      fx().clock.advance(60_000);
      const retried = await rheo.fetch(stream, group, { limit: 10 });
      expect(retried.map((l) => [l.event.sequence, l.attempt])).toEqual([
        [3, 2],
        [5, 2],
      ]);
    });

    it('reports a failed settle as an event and keeps going', async () => {
      const { faulty } = fx();
      await fx().append(3);
      faulty.fail('settle', 'ambiguous', { wholeCall: true });
      const producer = fx().producer({ maxDemand: 1 });
      const errors: SettleErrorInfo<unknown>[] = [];
      let handled = 0;
      const sink = createLeaseSink({
        producer,
        handler: () => {
          if (++handled === 3) void producer.drain();
        },
      });
      sink.on('settle-error', (info) => errors.push(info));
      await pipeline(producer, sink);
      expect(handled).toBe(3);
      expect(errors.map((e) => [e.op, e.error.code, e.lease.event.sequence])).toEqual([['ack', 'ambiguous', 1]]);
      expect(faulty.settles.filter((s) => s.ok).map((s) => s.sequence)).toEqual([2, 3]);
    });

    it('reports a stale ack as lease-lost', async () => {
      const { rheo, clock, stream, group } = fx();
      await fx().append(1);
      const producer = fx().producer({ maxDemand: 1, leaseMs: 1000 });
      const lost: SinkLeaseLostInfo<unknown>[] = [];
      const sink = createLeaseSink({
        producer,
        handler: async () => {
          clock.advance(2000);
          await rheo.fetch(stream, group, { consumerId: 'thief' });
          void producer.drain();
        },
      });
      sink.on('lease-lost', (info) => lost.push(info));
      await pipeline(producer, sink);
      expect(lost.map((l) => l.error.code)).toEqual(['stale_lease']);
    });

    it('end waits for in-flight handlers and their settles', async () => {
      const { faulty } = fx();
      await fx().append(4);
      const leases = await fx().rheo.fetch(fx().stream, fx().group, { limit: 4 });
      const producer = fx().producer();
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => (release = resolve));
      const sink = createLeaseSink({ producer, concurrency: 4, handler: () => gate });
      const done = pipeline(Readable.from(leases), sink);
      await until(() => sink.activeCount === 4, 'four handlers run');
      release();
      await done;
      expect(faulty.settles.filter((s) => s.kind === 'ack' && s.ok)).toHaveLength(4);
    });

    it('runs at most `concurrency` handlers at once, oldest lease first', async () => {
      const { faulty, rheo, stream, group } = fx();
      await fx().append(12);
      const leases = await rheo.fetch(stream, group, { limit: 12 });
      const producer = fx().producer();
      const started: number[] = [];
      let peak = 0;
      const sink = createLeaseSink({
        producer,
        concurrency: 3,
        handler: async (lease) => {
          started.push(lease.event.sequence);
          peak = Math.max(peak, sink.activeCount);
          await new Promise<void>((resolve) => setImmediate(resolve));
        },
      });
      await pipeline(Readable.from(leases), sink);
      expect(peak).toBe(3);
      expect(started).toEqual(leases.map((l) => l.event.sequence));
      expect(faulty.settles.filter((s) => s.kind === 'ack' && s.ok)).toHaveLength(12);
    });

    it('starts leases in arrival order through a queue of thousands that drains while it fills', async () => {
      const { rheo, stream, group } = fx();
      await fx().append(2500);
      const leases = await rheo.fetch(stream, group, { limit: 2500 });
      const producer = fx().producer();
      const started: number[] = [];
      const sink = createLeaseSink({
        producer,
        concurrency: 2,
        handler: async (lease) => {
          started.push(lease.event.sequence);
          await new Promise<void>((resolve) => setImmediate(resolve));
        },
      });
      await pipeline(Readable.from(leases), sink);
      expect(started).toEqual(leases.map((l) => l.event.sequence));
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('a synchronous handler works through a long queue and acks every lease', async () => {
      const { rheo, stream, group } = fx();
      await fx().append(500);
      const leases = await rheo.fetch(stream, group, { limit: 500 });
      const producer = fx().producer();
      let handled = 0;
      const sink = createLeaseSink({ producer, concurrency: 2, handler: () => void handled++ });
      await pipeline(Readable.from(leases), sink);
      expect(handled).toBe(500);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('destroying the sink aborts running handlers and releases leases never started', async () => {
      const { faulty, rheo, stream, group } = fx();
      await fx().append(3);
      const leases = await rheo.fetch(stream, group, { limit: 3 });
      const producer = fx().producer();
      let signal: AbortSignal | null = null;
      const sink = createLeaseSink({
        producer,
        handler: (_lease, context) => {
          signal = context.signal;
          return new Promise<void>(() => {}); // never settles
        },
      });
      const done = pipeline(Readable.from(leases), sink).catch((error: unknown) => error);
      await until(() => sink.activeCount === 1 && sink.queuedCount === 2, 'one runs, two wait');
      sink.destroy(new Error('stop'));
      await done;
      await until(() => faulty.settles.length === 2, 'the waiting leases are released');
      expect(faulty.settles.map((s) => [s.kind, s.sequence, s.ok])).toEqual([
        ['release', 2, true],
        ['release', 3, true],
      ]);
      expect(signal!.aborted).toBe(true);
    });

    it('skips a lease lost while it waited for a slot, and still ends', async () => {
      const { rheo, clock, timers, stream, group, faulty } = fx();
      await fx().append(2);
      const producer = fx().producer({ maxDemand: 2, leaseMs: 1000 });
      const started: number[] = [];
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => (release = resolve));
      const sink = createLeaseSink({
        producer,
        handler: (lease) => {
          started.push(lease.event.sequence);
          void producer.drain();
          return gate;
        },
      });
      const lost: SinkLeaseLostInfo<unknown>[] = [];
      sink.on('lease-lost', (info) => lost.push(info));
      let producerLost = 0;
      producer.on('lease-lost', () => producerLost++);
      const done = pipeline(producer, sink);
      await until(() => sink.activeCount === 1 && sink.queuedCount === 1, 'one runs, one waits');
      // Both leases expire and another worker takes them; the next renewal finds both stale.
      clock.advance(1500);
      expect(await rheo.fetch(stream, group, { limit: 2, consumerId: 'thief' })).toHaveLength(2);
      timers.runDue();
      await until(() => producerLost === 2, 'the renewal reports both leases lost');
      release();
      await done;
      expect(started).toEqual([1]);
      expect(lost.map((l) => l.lease.event.sequence)).toEqual([1]);
      expect(faulty.settlesOf(0, 2)).toEqual([]);
    });
  });

  describe(`batch sink (${factory.name})`, () => {
    const fx = useStreamsFixture(factory);

    it('closes batches by size, and the partial batch at the end of the stream', async () => {
      const { rheo, stream, group } = fx();
      await fx().append(7);
      const producer = fx().producer({ maxDemand: 7 });
      const batches: Array<[number[], BatchContext['reason']]> = [];
      let seen = 0;
      const sink = createBatchSink({
        producer,
        batchSize: 3,
        batchTimeoutMs: 60_000,
        handler: (leases, { reason }) => {
          batches.push([leases.map((l) => l.event.sequence), reason]);
          seen += leases.length;
          if (seen === 6) void producer.drain();
        },
      });
      await pipeline(producer, sink);
      expect(batches).toEqual([
        [[1, 2, 3], 'size'],
        [[4, 5, 6], 'size'],
        [[7], 'end'],
      ]);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('closes a partial batch when batchTimeoutMs passes', async () => {
      const { timers } = fx();
      await fx().append(2);
      const producer = fx().producer({ maxDemand: 5 });
      const batches: Array<[number, BatchContext['reason']]> = [];
      const sink = createBatchSink({
        producer,
        batchSize: 5,
        batchTimeoutMs: 500,
        handler: (leases, { reason }) => {
          batches.push([leases.length, reason]);
          void producer.drain();
        },
      });
      const done = pipeline(producer, sink);
      await until(() => sink.openBatchLength === 2, 'two leases wait in the open batch');
      expect(batches).toEqual([]);
      timers.advance(499);
      expect(batches).toEqual([]);
      timers.advance(1);
      await done;
      expect(batches).toEqual([[2, 'time']]);
    });

    it('settles per-lease outcomes in one coalesced call, and a throw nacks the whole batch', async () => {
      const { rheo, stream, group, faulty } = fx();
      await fx().append(6);
      const producer = fx().producer({ maxDemand: 6 });
      let batch = 0;
      const sink = createBatchSink({
        producer,
        batchSize: 3,
        handler: () => {
          batch++;
          // All six were claimed by the first fetch: drain now, so nothing nacked here comes back in this run.
          void producer.drain();
          if (batch === 1) return ['ack', { retry: 'again' }, { reject: 'bad' }];
          throw new Error('warehouse down');
        },
      });
      const batchErrors: unknown[] = [];
      sink.on('batch-error', (info) => batchErrors.push(info.error));
      const before = faulty.calls.settle;
      await pipeline(producer, sink);
      // One call per batch at most (both batches' settles may even share one).
      expect(faulty.calls.settle - before).toBeLessThanOrEqual(2);
      expect(faulty.settles.map((s) => [s.sequence, s.kind])).toEqual([
        [1, 'ack'],
        [2, 'nack'],
        [3, 'reject'],
        [4, 'nack'],
        [5, 'nack'],
        [6, 'nack'],
      ]);
      expect(batchErrors).toHaveLength(1);
      expect((await rheo.deadLetters(stream, group)).map((d) => d.reason)).toEqual(['bad']);
    });

    it('handles at most `concurrency` batches at once, in the order they closed', async () => {
      const { faulty, rheo, stream, group } = fx();
      await fx().append(12);
      const leases = await rheo.fetch(stream, group, { limit: 12 });
      const producer = fx().producer();
      const started: number[][] = [];
      let peak = 0;
      const sink = createBatchSink({
        producer,
        batchSize: 2,
        concurrency: 2,
        handler: async (batch) => {
          started.push(batch.map((l) => l.event.sequence));
          peak = Math.max(peak, sink.activeCount);
          await new Promise<void>((resolve) => setImmediate(resolve));
        },
      });
      await pipeline(Readable.from(leases), sink);
      expect(peak).toBe(2);
      expect(started.flat()).toEqual(leases.map((l) => l.event.sequence));
      expect(started.every((batch) => batch.length === 2)).toBe(true);
      expect(faulty.settles.filter((s) => s.kind === 'ack' && s.ok)).toHaveLength(12);
    });

    it('destroying the sink releases the batches that wait for a slot', async () => {
      const { faulty, rheo, stream, group } = fx();
      await fx().append(3);
      const leases = await rheo.fetch(stream, group, { limit: 3 });
      const producer = fx().producer();
      let signal: AbortSignal | null = null;
      const sink = createBatchSink({
        producer,
        batchSize: 1,
        batchTimeoutMs: 60_000,
        handler: (_batch, context) => {
          signal = context.signal;
          return new Promise<void>(() => {}); // never settles
        },
      });
      // A source that never ends, so only the destroy can finish the pipeline.
      const source = new Readable({ objectMode: true, read() {} });
      for (const lease of leases) source.push(lease);
      const done = pipeline(source, sink).catch((error: unknown) => error);
      await until(() => sink.activeCount === 1 && sink.queuedCount === 2, 'one batch runs, two wait');
      sink.destroy(new Error('stop'));
      await done;
      await until(() => faulty.settles.length === 2, 'the waiting batches are released');
      expect(faulty.settles.map((s) => [s.kind, s.sequence, s.ok])).toEqual([
        ['release', 2, true],
        ['release', 3, true],
      ]);
      expect(signal!.aborted).toBe(true);
    });
  });
}

it('lease type parameter flows to handlers', () => {
  // Compile-time check: handler receives Lease<T>.
  const check = (lease: Lease<{ n: number }>): number => lease.event.payload.n;
  expect(typeof check).toBe('function');
});

describe('sink and transform options', () => {
  it('reject bad options with invalid_argument RheoErrors', () => {
    const bad: Array<() => unknown> = [
      () => createLeaseSink({} as never),
      () => createBatchSink(null as never),
      () => createRateLimit({ limit: 0, intervalMs: 10 }),
      () => createMapTransform({ map: 'nope' } as never),
      // The removed older names are no handler.
      () => createLeaseSink({ producer: {}, handle: () => 'ack' } as never),
      () => createBatchSink({ producer: {}, handleBatch: () => 'ack' } as never),
      () => createLeaseSink({ producer: {}, handler: 'ack' } as never),
    ];
    for (const make of bad) expect(make).toThrow(expect.objectContaining({ name: 'RheoError', code: 'invalid_argument' }));
  });
});
