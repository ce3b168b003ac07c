import diagnosticsChannel from 'node:diagnostics_channel';
import { afterEach, describe, expect, it } from 'vitest';
import { RHEO_EVENT_NAMES, channelName } from '../../src/observability/diagnostics.js';
import type { RheoEventName } from '../../src/observability/lease-events.js';
import { consumerFactories } from '../support/backends.js';
import { nextEvent, useConsumerFixture, waitFor } from './harness.js';

const LEASE_FIELDS = ['attempt', 'consumerId', 'eventId', 'eventType', 'group', 'partition', 'sequence', 'stream'];

for (const factory of consumerFactories) {
  describe(`consume: observability (${factory.name})`, () => {
    const fx = useConsumerFixture(factory);
    const subscriptions: Array<[string, (message: unknown) => void]> = [];
    afterEach(() => {
      for (const [name, fn] of subscriptions.splice(0)) diagnosticsChannel.unsubscribe(name, fn);
    });
    function subscribeAll(): Array<{ channel: string; message: Record<string, unknown> }> {
      const seen: Array<{ channel: string; message: Record<string, unknown> }> = [];
      for (const event of RHEO_EVENT_NAMES) {
        const name = channelName(event);
        const fn = (message: unknown): void => void seen.push({ channel: name, message: message as Record<string, unknown> });
        diagnosticsChannel.subscribe(name, fn);
        subscriptions.push([name, fn]);
      }
      return seen;
    }

    it('publishes every outcome on rheo:* channels, with lease coordinates and never the payload', async () => {
      const { rheo, stream, group, consume } = fx();
      const seen = subscribeAll();
      await rheo.appendBatch(stream, [
        { type: 'ok', payload: { secret: 'card-1' }, metadata: { pii: true } },
        { type: 'bad', payload: { secret: 'card-2' } },
        { type: 'flaky', payload: { secret: 'card-3' } },
        { type: 'boom', payload: { secret: 'card-4' } },
      ]);
      const consumer = consume({
        concurrency: 4,
        handler: (event, { attempt }) => {
          if (event.type === 'bad') return { reject: 'bad input' };
          if (event.type === 'flaky' && attempt === 1) return { retry: 'try again' };
          if (event.type === 'boom' && attempt === 1) throw new Error('boom');
          return 'ack';
        },
      });
      await waitFor(() => consumer.stats().acked === 3 && consumer.stats().deadLettered === 1, 'all settled');
      await consumer.stop();
      const count = (event: RheoEventName): number => seen.filter((s) => s.channel === channelName(event)).length;
      expect(count('lease')).toBe(6); // four first deliveries, two retries
      expect(count('ack')).toBe(3);
      expect(count('retry')).toBe(2);
      expect(count('dead-letter')).toBe(1);
      expect(count('handler-error')).toBe(1);
      expect(count('drain')).toBe(1);
      for (const { channel, message } of seen) {
        expect(JSON.stringify(message)).not.toContain('card-');
        expect(message).not.toHaveProperty('payload');
        expect(message).not.toHaveProperty('metadata');
        expect(message).not.toHaveProperty('leaseId');
        if (channel !== 'rheo:drain') expect(Object.keys(message)).toEqual(expect.arrayContaining(LEASE_FIELDS));
        expect(message).toMatchObject({ stream, group, consumerId: consumer.consumerId });
      }
      const dead = seen.find((s) => s.channel === 'rheo:dead-letter')!.message;
      expect(dead).toMatchObject({ eventType: 'bad', partition: 0, sequence: 2, attempt: 1, reason: 'bad input' });
    });

    it('publishes fetch errors and lease losses; the emitter gets the same payloads', async () => {
      const { consume, faulty } = fx();
      const seen = subscribeAll();
      faulty.fail('fetch', 'backend_unavailable');
      const consumer = consume({ handler: () => 'ack' });
      const emitted = await nextEvent(consumer, 'fetch-error');
      const published = seen.find((s) => s.channel === 'rheo:fetch-error')!.message;
      expect(published).toEqual(emitted);
      expect(emitted).toMatchObject({ failures: 1, consumerId: consumer.consumerId });
      expect(emitted.backoffMs).toBeGreaterThan(0);
    });

    it('a standalone RheoProducer publishes the same lease-level events', async () => {
      const { rheo, stream, group } = fx();
      const seen = subscribeAll();
      await rheo.appendBatch(stream, [{ payload: 1 }, { payload: 2 }]);
      const producer = rheo.producer({ stream, group, consumerId: 'pipeline' });
      const leases = [];
      for await (const lease of producer) {
        leases.push(lease);
        if (leases.length === 2) break;
      }
      await producer.ack(leases[0]!).catch(() => undefined);
      await producer.reject(leases[1]!, 'no').catch(() => undefined);
      await producer.close();
      const channels = seen.map((s) => s.channel);
      expect(channels.filter((c) => c === 'rheo:lease')).toHaveLength(2);
      expect(channels).toContain('rheo:dead-letter');
      expect(seen.every((s) => s.message.consumerId === 'pipeline')).toBe(true);
    });

    it('stats() reports gauges and counters', async () => {
      const { rheo, stream, consume } = fx();
      await rheo.appendBatch(stream, [{ payload: 1 }, { payload: 2 }]);
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const consumer = consume({ concurrency: 2, handler: () => gate });
      await waitFor(() => consumer.stats().inflight === 2, 'two running');
      expect(consumer.stats()).toMatchObject({ inflight: 2, held: 2, handled: 0, state: 'running', backoffMs: 0 });
      release();
      await waitFor(() => consumer.stats().acked === 2, 'two acked');
      expect(consumer.stats()).toMatchObject({
        inflight: 0,
        held: 0,
        handled: 2,
        acked: 2,
        retried: 0,
        deadLettered: 0,
        lost: 0,
        settleErrors: 0,
        fetchErrors: 0,
      });
    });
  });
}
