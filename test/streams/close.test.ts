import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { RheoError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/types.js';
import { RheoProducer } from '../../src/producer/rheo-producer.js';
import { leaseSourceOf } from '../../src/rheo.js';
import { createLeaseSink } from '../../src/sinks/lease-sink.js';
import { deferred } from '../consumer/harness.js';
import { backendFactories } from '../support/backends.js';
import { useStreamsFixture } from './support/fixture.js';

// rheo.close() must end what the instance started: before, a producer kept
// retrying its fetch on `closed` (backoff up to 30 s) and a pipeline never
// settled. Manual timers: nothing here advances time, so a producer that
// waits for a poll or a backoff instead of ending hangs the test.
for (const factory of backendFactories) {
  describe(`rheo.close() ends producers and consumers (${factory.name})`, () => {
    const fx = useStreamsFixture(factory);

    it('a running pipeline(producer, sink) rejects with closed, settles issued meanwhile land, unread leases are released', async () => {
      const { rheo, faulty, timers } = fx();
      await fx().append(5);
      const producer = fx().producer({ maxDemand: 5 });
      const released: Array<{ count: number; error: RheoError | null }> = [];
      producer.on('released', ({ leases, error }) => released.push({ count: leases.length, error }));
      const started = deferred<Lease>();
      const finish = deferred();
      const sink = createLeaseSink({
        producer,
        concurrency: 1,
        handler: async (lease) => {
          started.resolve(lease);
          await finish.promise;
        },
      });
      const running = pipeline(producer, sink);
      const first = await started.promise;
      const closing = rheo.close();
      // The handler finishes while rheo is closing: its ack still goes through.
      finish.resolve();
      const error = await running.then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(RheoError);
      expect((error as RheoError).code).toBe('closed');
      await closing;
      expect(producer.destroyed).toBe(true);
      expect(faulty.settlesOf(first.event.partition, first.event.sequence).map((s) => [s.kind, s.ok])).toEqual([['ack', true]]);
      // Nothing is left to expire: every delivery was settled exactly once and
      // successfully (the handler's work, or a release of a lease never started).
      expect(faulty.settles.every((s) => s.ok)).toBe(true);
      expect(faulty.settles.map((s) => s.sequence).sort()).toEqual([1, 2, 3, 4, 5]);
      expect(released.every((r) => r.error === null)).toBe(true);
      expect(timers.pendingDelays({ keepAlive: true })).toEqual([]);
    });

    it('a producer nobody reads or watches for errors is closed quietly (no unhandled error)', async () => {
      const { rheo } = fx();
      const producer = fx().producer();
      await rheo.close();
      expect(producer.destroyed).toBe(true);
      expect(producer.errored).toBeNull();
    });

    it('a producer built on rheo directly ends with closed at its next fetch', async () => {
      const { rheo, timers, stream, group } = fx();
      // Not made by rheo.producer(), so close() does not know it: its own fetch tells it.
      const producer = new RheoProducer(leaseSourceOf(rheo), { stream, group, timers, pollMs: 50 });
      const sink = createLeaseSink({ producer, handler: () => 'ack' });
      const running = pipeline(producer, sink).then(
        () => null,
        (e: unknown) => e,
      );
      const fetched = new Promise<void>((resolve) => producer.once('fetched', () => resolve()));
      await fx().append(1);
      timers.advance(50);
      await fetched;
      await rheo.close();
      // One poll interval: the producer fetches, learns `closed`, and ends instead of backing off.
      timers.advance(50);
      const error = await running;
      expect((error as RheoError).code).toBe('closed');
      await producer.close();
      expect(timers.pendingDelays({ keepAlive: true })).toEqual([]);
    });

    it('a running consumer stops: done resolves, its running handler is aborted, its lease nacked', async () => {
      const { rheo, faulty, timers } = fx();
      await fx().append(3);
      const started = deferred<AbortSignal>();
      const consumer = rheo.consume({
        stream: fx().stream,
        group: fx().group,
        timers,
        maxDemand: 3,
        handler: (_event, { signal }) => {
          started.resolve(signal);
          return new Promise<void>(() => undefined);
        },
      });
      const signal = await started.promise;
      await rheo.close();
      await consumer.done;
      expect(consumer.state).toBe('stopped');
      expect(signal.aborted).toBe(true);
      const kinds = faulty.settles.map((s) => [s.kind, s.ok]);
      expect(kinds).toContainEqual(['nack', true]);
      expect(kinds.every(([, ok]) => ok)).toBe(true);
      expect(timers.pendingDelays({ keepAlive: true })).toEqual([]);
    });
  });
}
