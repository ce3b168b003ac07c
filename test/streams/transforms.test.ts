import { Readable, type Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { Lease } from '../../src/core/types.js';
import { createBatchTransform } from '../../src/transforms/batch-transform.js';
import { createKeyOrderedTransform } from '../../src/transforms/key-ordered-transform.js';
import { createMapTransform, type Mapped } from '../../src/transforms/map-transform.js';
import { createRateLimit } from '../../src/transforms/rate-limit.js';
import { createWindowTransform } from '../../src/transforms/window-transform.js';
import { backendFactories } from '../support/backends.js';
import { useStreamsFixture } from './support/fixture.js';
import { ManualTimers } from './support/manual-timers.js';
import { collect } from './support/collect.js';
import { until } from './support/wait.js';

type Tick = { n: number };

for (const factory of backendFactories) {
  describe(`window transform (${factory.name})`, () => {
    const fx = useStreamsFixture(factory);

    it('reduce with a trigger every 3 emits 3 (the notebook), and acks on trigger', async () => {
      const { rheo, stream, group } = fx();
      await fx().append(6);
      const producer = fx().producer<Tick>({ maxDemand: 6 });
      const out: number[] = [];
      const window = createWindowTransform<Tick, Lease<Tick>[], number>({
        producer,
        every: 3,
        trigger: (leases) => {
          if (out.length === 1) void producer.drain();
          return leases.length;
        },
      });
      await pipeline(producer, window, collect(out));
      expect(out[0]).toBe(3);
      expect(out).toEqual([3, 3]);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('window with a trigger every 2 over 4 events emits [2, 2] (the notebook)', async () => {
      await fx().append(4);
      const producer = fx().producer<Tick>({ maxDemand: 4 });
      const out: number[] = [];
      const window = createWindowTransform<Tick, number, number>({
        producer,
        every: 2,
        initial: () => 0,
        reduce: (count) => count + 1,
        trigger: (count) => {
          void producer.drain();
          return count;
        },
      });
      await pipeline(producer, window, collect(out));
      expect(out).toEqual([2, 2]);
    });

    it('settles a window’s leases only after the trigger pushed its output', async () => {
      const { rheo, stream, group, faulty } = fx();
      await fx().append(3);
      const producer = fx().producer<Tick>({ maxDemand: 3 });
      const log: string[] = [];
      const window = createWindowTransform<Tick, number, number>({
        producer,
        every: 3,
        initial: () => 0,
        reduce: (sum, lease) => {
          log.push(`reduce ${lease.event.payload.n} settled=${faulty.settles.length}`);
          return sum + lease.event.payload.n;
        },
        trigger: async (sum, leases) => {
          const info = await rheo.groupInfo(stream, group);
          log.push(`trigger ${sum} leases=${leases.length} inflight=${info.inflight} frontier=${info.lag.partitions[0]?.frontier}`);
          void producer.drain();
          return sum;
        },
      });
      const out = new Writable({
        objectMode: true,
        write(sum: number, _encoding, callback) {
          log.push(`pushed ${sum} settled=${faulty.settles.length}`);
          callback();
        },
      });
      await pipeline(producer, window, out);
      expect(log).toEqual([
        'reduce 1 settled=0',
        'reduce 2 settled=0',
        'reduce 3 settled=0',
        'trigger 6 leases=3 inflight=3 frontier=0',
        'pushed 6 settled=0',
      ]);
      expect(faulty.settles.map((s) => s.kind)).toEqual(['ack', 'ack', 'ack']);
      expect((await rheo.lag(stream, group)).partitions[0]?.frontier).toBe(3);
    });

    it('a failing trigger nacks the window’s leases', async () => {
      const { rheo, stream, group, faulty } = fx();
      await fx().append(2);
      const producer = fx().producer<Tick>({ maxDemand: 2 });
      const window = createWindowTransform<Tick, Lease<Tick>[], number>({
        producer,
        every: 2,
        trigger: () => {
          void producer.drain();
          throw new Error('aggregate store down');
        },
      });
      const errors: unknown[] = [];
      window.on('trigger-error', (info) => errors.push(info.error));
      const out: number[] = [];
      await pipeline(producer, window, collect(out));
      expect(out).toEqual([]);
      expect(errors).toHaveLength(1);
      expect(faulty.settles.map((s) => s.kind)).toEqual(['nack', 'nack']);
      const again = await rheo.fetch(stream, group, { limit: 5 });
      expect(again.map((l) => l.attempt)).toEqual([2, 2]);
    });

    it('a window closes on everyMs too', async () => {
      const { timers } = fx();
      await fx().append(2);
      // Leases that outlive the advance: a poll after it must not find them expired and claim them again.
      const producer = fx().producer<Tick>({ maxDemand: 5, leaseMs: 60_000 });
      const out: number[] = [];
      const window = createWindowTransform<Tick, Lease<Tick>[], number>({
        producer,
        every: 5,
        everyMs: 1000,
        trigger: (leases) => {
          void producer.drain();
          return leases.length;
        },
      });
      const done = pipeline(producer, window, collect(out));
      await until(() => producer.inflightCount === 2 && producer.readableLength === 0, 'both leases reached the window');
      timers.advance(1000);
      await done;
      expect(out).toEqual([2]);
    });

    it('refuses a window that could never fill', () => {
      const producer = fx().producer<Tick>({ maxDemand: 2 });
      expect(() => createWindowTransform({ producer, every: 3, trigger: () => 1 })).toThrow(/never fill/);
    });
  });

  describe(`map and key-ordered transforms (${factory.name})`, () => {
    const fx = useStreamsFixture(factory);

    it('map runs concurrently, keeps input order and passes the lease along', async () => {
      const { rheo, stream, group } = fx();
      await fx().append(6);
      const producer = fx().producer<Tick>({ maxDemand: 6 });
      let running = 0;
      let maxRunning = 0;
      const map = createMapTransform<Tick, number>({
        concurrency: 3,
        map: async (lease) => {
          running++;
          maxRunning = Math.max(maxRunning, running);
          // Later leases finish first: n=1 waits longest.
          for (let i = 0; i < 10 - lease.event.payload.n; i++) await new Promise<void>((r) => setImmediate(r));
          running--;
          return lease.event.payload.n * 10;
        },
      });
      const seen: number[] = [];
      const out: Array<Mapped<Tick, number>> = [];
      const writer = new Writable({
        objectMode: true,
        write(mapped: Mapped<Tick, number>, _encoding, callback) {
          out.push(mapped);
          seen.push(mapped.value);
          producer.ack(mapped.lease).then(() => {
            if (out.length === 6) void producer.drain();
            callback();
          }, callback);
        },
      });
      await pipeline(producer, map, writer);
      expect(seen).toEqual([10, 20, 30, 40, 50, 60]);
      expect(out.map((m) => m.lease.event.payload.n)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(maxRunning).toBe(3);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('key-ordered: at most one lease per key in flight, different keys in parallel', async () => {
      await fx().append(9); // keys k0, k1, k2, three events each
      const producer = fx().producer<Tick>({ maxDemand: 9 });
      const inFlight = new Map<string, number>();
      let maxPerKey = 0;
      const order: Record<string, number[]> = {};
      const keyed = createKeyOrderedTransform<Tick, string>({
        concurrency: 2,
        producer,
        map: async (lease) => {
          const key = lease.event.key!;
          inFlight.set(key, (inFlight.get(key) ?? 0) + 1);
          maxPerKey = Math.max(maxPerKey, inFlight.get(key)!);
          (order[key] ??= []).push(lease.event.payload.n);
          for (let i = 0; i < 3; i++) await new Promise<void>((r) => setImmediate(r));
          inFlight.set(key, inFlight.get(key)! - 1);
          return key;
        },
      });
      let acked = 0;
      const writer = new Writable({
        objectMode: true,
        write(mapped: Mapped<Tick, string>, _encoding, callback) {
          producer.ack(mapped.lease).then(() => {
            if (++acked === 9) void producer.drain();
            callback();
          }, callback);
        },
      });
      await pipeline(producer, keyed, writer);
      expect(maxPerKey).toBe(1);
      expect(keyed.maxActiveCount).toBe(2);
      expect(order).toEqual({ k0: [1, 4, 7], k1: [2, 5, 8], k2: [3, 6, 9] });
    });
  });
}

describe('rate limit and batch transforms', () => {
  it('lets at most N items pass per interval', async () => {
    const clock = new ManualClock();
    const timers = new ManualTimers(clock);
    const limiter = createRateLimit<number>({ limit: 2, intervalMs: 1000, clock, timers });
    const out: number[] = [];
    const done = pipeline(Readable.from([1, 2, 3, 4, 5]), limiter, collect(out));
    await until(() => out.length === 2, 'two items passed');
    for (let i = 0; i < 20; i++) await new Promise<void>((r) => setImmediate(r));
    expect(out).toEqual([1, 2]);
    timers.advance(1000);
    await until(() => out.length === 4, 'four items passed');
    timers.advance(1000);
    await done;
    expect(out).toEqual([1, 2, 3, 4, 5]);
  });

  it('batches by size, by time, and flushes the rest at the end', async () => {
    const clock = new ManualClock();
    const timers = new ManualTimers(clock);
    const batcher = createBatchTransform<number>({ size: 3, timeMs: 500, timers });
    const out: number[][] = [];
    batcher.on('data', (batch: number[]) => out.push(batch));
    for (const n of [1, 2, 3, 4]) batcher.write(n);
    await until(() => out.length === 1, 'the size batch');
    expect(out).toEqual([[1, 2, 3]]);
    timers.advance(500);
    expect(out).toEqual([[1, 2, 3], [4]]);
    batcher.write(5);
    batcher.end();
    await until(() => batcher.readableEnded, 'the end');
    expect(out).toEqual([[1, 2, 3], [4], [5]]);
  });
});

for (const factory of backendFactories) {
  describe(`transforms give back held leases on destroy (${factory.name})`, () => {
    const fx = useStreamsFixture(factory);

    async function destroyedPipeline(stage: Transform, producer: Readable, ready: () => boolean): Promise<void> {
      const abort = new AbortController();
      const done = pipeline(producer, stage, collect<unknown>([]), { signal: abort.signal }).catch((e: unknown) => e);
      await waitFor(ready);
      abort.abort();
      await done;
    }

    it('a rate limit releases the lease waiting for its turn', async () => {
      const { rheo, stream, group, timers, clock } = fx();
      await fx().append(2);
      const producer = fx().producer<Tick>({ maxDemand: 2, minDemand: 2 });
      const passed: number[] = [];
      const limiter = createRateLimit<Lease<Tick>>({ limit: 1, intervalMs: 1000, clock, timers, producer });
      limiter.on('data', (lease: Lease<Tick>) => passed.push(lease.event.sequence));
      await destroyedPipeline(limiter, producer, () => passed.length === 1 && timers.pendingDelays().length > 0);
      const again = await rheo.fetch(stream, group, { limit: 10 });
      expect(again.map((l) => [l.event.sequence, l.attempt])).toEqual([[2, 1]]);
    });

    it('a batch transform releases the leases of its unfinished batch', async () => {
      const { rheo, stream, group, timers } = fx();
      await fx().append(2);
      const producer = fx().producer<Tick>({ maxDemand: 2, minDemand: 2 });
      const batcher = createBatchTransform<Lease<Tick>>({ size: 5, timeMs: 60_000, timers, producer });
      let received = 0;
      producer.on('fetched', (info: { count: number }) => (received += info.count));
      await destroyedPipeline(batcher, producer, () => received === 2 && producer.inflightCount === 2 && timers.pendingDelays().length > 0);
      const again = await rheo.fetch(stream, group, { limit: 10 });
      expect(again.map((l) => [l.event.sequence, l.attempt])).toEqual([
        [1, 1],
        [2, 1],
      ]);
    });
  });
}

async function waitFor(condition: () => boolean): Promise<void> {
  await until(async () => condition(), 'the stage holds its leases');
}
