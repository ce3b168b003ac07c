import diagnosticsChannel from 'node:diagnostics_channel';
import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import type { ConsumerEventMap } from '../../src/observability/lease-events.js';
import { consumerFactories } from '../support/backends.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { deferred, nextEvent, useConsumerFixture, waitFor } from './harness.js';

type Emitted = { [K in keyof ConsumerEventMap]: { event: K; payload: ConsumerEventMap[K][0] } }[keyof ConsumerEventMap];

for (const factory of consumerFactories) {
  describe(`consume: events tie to their lease (${factory.name})`, () => {
    const fx = useConsumerFixture(factory);

    it('lease, ack, retry, dead-letter and settle-error carry the leaseId of the lease they are about', async () => {
      const { rheo, stream, faulty, consume } = fx();
      await rheo.appendBatch(stream, [
        { type: 'ok', payload: 1 },
        { type: 'bad', payload: 2 },
        { type: 'flaky', payload: 3 },
        { type: 'broken', payload: 4 },
      ]);
      // The reject of 'broken' fails: a settle-error.
      const leases = new Map<string, Lease>();
      const log: Emitted[] = [];
      const consumer = consume({
        concurrency: 4,
        handler: (event, { lease, attempt }) => {
          leases.set(`${event.id}/${attempt}`, lease);
          if (event.type === 'bad') return { reject: 'bad' };
          if (event.type === 'flaky' && attempt === 1) return { retry: 'again' };
          if (event.type === 'broken') {
            faulty.fail('settle', 'internal', { kinds: ['reject'] });
            return { reject: 'broken' };
          }
          return 'ack';
        },
      });
      for (const event of ['lease', 'ack', 'retry', 'dead-letter', 'settle-error'] as const) {
        consumer.on(event, (payload: ConsumerEventMap[typeof event][0]) => log.push({ event, payload } as Emitted));
      }
      await waitFor(() => consumer.stats().acked === 2 && consumer.stats().settleErrors === 1, 'every outcome');
      await consumer.stop();
      const byEvent = (name: Emitted['event']) => log.filter((l) => l.event === name).map((l) => l.payload);
      expect(byEvent('lease')).toHaveLength(5);
      expect(byEvent('ack')).toHaveLength(2);
      expect(byEvent('retry')).toHaveLength(1);
      expect(byEvent('dead-letter')).toHaveLength(1);
      expect(byEvent('settle-error')).toHaveLength(1);
      for (const { payload } of log) {
        if (!('eventId' in payload)) continue;
        const lease = leases.get(`${payload.eventId}/${payload.attempt}`);
        expect(lease, `${payload.eventId}/${payload.attempt} was handled`).toBeDefined();
        expect((payload as { leaseId?: string }).leaseId).toBe(lease!.leaseId);
      }
    });

    it('a settle that comes back stale emits lease-lost with the leaseId, once, and counts one loss', async () => {
      const { rheo, clock, stream, group, consume } = fx();
      await rheo.append(stream, { payload: 1 });
      // Manual timers: no renewal runs, so the ack is what finds the lease gone.
      const timers = new ManualTimers(clock);
      const started = deferred<Lease>();
      const finish = deferred();
      // maxDemand 1: holding the lease, the consumer never fetches again, so
      // only the thief below can reclaim it once it expires.
      const consumer = consume({
        timers,
        leaseMs: 1000,
        maxDemand: 1,
        handler: async (_event, { lease }) => {
          started.resolve(lease);
          await finish.promise;
        },
      });
      const lost: Array<ConsumerEventMap['lease-lost'][0]> = [];
      consumer.on('lease-lost', (info) => lost.push(info));
      const published: unknown[] = [];
      const onPublish = (message: unknown): void => void published.push(message);
      diagnosticsChannel.subscribe('rheo:lease-lost', onPublish);
      try {
        const lease = await started.promise;
        clock.advance(1500);
        expect(await rheo.fetch(stream, group, { consumerId: 'thief' })).toHaveLength(1);
        finish.resolve();
        await waitFor(() => consumer.stats().lost === 1, 'the stale ack to be reported');
        await consumer.stop({ timeoutMs: 0 });
        expect(lost.map((l) => [l.leaseId, l.error.code])).toEqual([[lease.leaseId, 'stale_lease']]);
        expect(consumer.stats()).toMatchObject({ lost: 1, acked: 0, settleErrors: 0 });
        expect(published).toHaveLength(1);
        expect(published[0]).not.toHaveProperty('leaseId');
      } finally {
        finish.resolve();
        diagnosticsChannel.unsubscribe('rheo:lease-lost', onPublish);
      }
    });

    it('surfaces renew-error with the leaseIds whose renewal failed, and keeps the leases', async () => {
      const { rheo, clock, stream, faulty, consume } = fx();
      await rheo.append(stream, { payload: 1 });
      const timers = new ManualTimers(clock);
      const started = deferred<Lease>();
      const finish = deferred();
      // maxDemand 1: holding the lease, the consumer never fetches again, so
      // only the thief below can reclaim it once it expires.
      const consumer = consume({
        timers,
        leaseMs: 1000,
        maxDemand: 1,
        handler: async (_event, { lease }) => {
          started.resolve(lease);
          await finish.promise;
        },
      });
      const lease = await started.promise;
      faulty.fail('renew', 'backend_unavailable', { wholeCall: true });
      const failed = nextEvent(consumer, 'renew-error');
      timers.advance(500);
      const info = await failed;
      expect(info).toMatchObject({ stream, consumerId: consumer.consumerId, leaseIds: [lease.leaseId] });
      expect(info.error.code).toBe('backend_unavailable');
      expect(consumer.stats().held).toBe(1);
      finish.resolve();
      await waitFor(() => consumer.stats().acked === 1, 'the ack');
      await consumer.stop({ timeoutMs: 0 });
    });

    it('an ack listener that throws stops the consumer and rejects done with it; the rest of that settle call is still answered', async () => {
      const { rheo, stream, group, consume } = fx();
      await rheo.appendBatch(stream, [1, 2, 3, 4, 5].map((payload) => ({ payload })));
      const boom = new Error('listener broke');
      const consumer = consume({ concurrency: 5, maxDemand: 5, handler: () => 'ack' });
      let heard = 0;
      consumer.on('ack', () => {
        heard++;
        if (heard === 2) throw boom;
      });
      await expect(consumer.done).rejects.toBe(boom);
      // Every ack of the call was answered and confirmed: nothing held, nothing waiting for expiry.
      expect(consumer.stats()).toMatchObject({ state: 'stopped', held: 0, acked: 5 });
      expect(heard).toBe(5);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('passes fetchBackoff on to its producer and validates it and minDemand', async () => {
      const { rheo, faulty, consume } = fx();
      faulty.fail('fetch', 'backend_unavailable');
      const consumer = consume({ handler: () => 'ack', fetchBackoff: { initialMs: 5000, maxMs: 60_000 }, minDemand: 2 });
      const failed = await nextEvent(consumer, 'fetch-error');
      // Jitter takes off at most 20% of the first delay.
      expect(failed.backoffMs).toBeGreaterThanOrEqual(4000);
      expect(failed.backoffMs).toBeLessThanOrEqual(5000);
      await consumer.stop({ timeoutMs: 0 });
      const bad: Array<Record<string, unknown>> = [
        { fetchBackoff: { initialMs: 0 } },
        { fetchBackoff: { initialMs: 100, maxMs: 50 } },
        { fetchBackoff: 5 },
        { minDemand: 0 },
        { minDemand: 11, maxDemand: 10 },
      ];
      for (const options of bad) {
        expect(() => rheo.consume({ stream: 's', group: 'g', handler: () => 'ack', ...options })).toThrow(
          expect.objectContaining({ code: 'invalid_argument' }),
        );
      }
    });
  });
}
