import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { HandlerOutcome } from '../../src/consumer/consumer-types.js';
import { ManualClock } from '../../src/core/clock.js';
import type { LogFields, Logger, LogLevel } from '../../src/core/logger.js';
import { createRheo } from '../../src/rheo.js';
import { consumerFactories } from '../support/backends.js';
import { FaultyBackend } from '../support/faulty-backend.js';
import { deferred, nextEvent, waitFor } from './harness.js';

/** A logger that keeps what it was given. */
function capture(): { logger: Logger; lines: Array<{ level: LogLevel; fields: LogFields; message: string }> } {
  const lines: Array<{ level: LogLevel; fields: LogFields; message: string }> = [];
  const at = (level: LogLevel) => (fields: LogFields, message: string) => void lines.push({ level, fields, message });
  return { logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, lines };
}

for (const factory of consumerFactories) {
  describe(`consume: logs and self-stop (${factory.name})`, () => {
    async function setup() {
      const clock = new ManualClock();
      const faulty = new FaultyBackend(await factory.make(clock));
      const { logger, lines } = capture();
      const rheo = createRheo({ backend: faulty, clock, logger, defaults: { pollMs: 5 } });
      await rheo.createStream('orders');
      await rheo.createGroup('orders', 'billing', { maxAttempts: 5 });
      const consumerLines = () => lines.filter((l) => l.message.startsWith('rheo consumer') || l.message.startsWith('rheo handler'));
      return { rheo, faulty, lines: consumerLines };
    }

    it('a failing handler is logged as a warning with its lease and error; a clean stop is logged as info', async () => {
      const { rheo, lines } = await setup();
      const appended = await rheo.append('orders', { key: 'k', payload: { n: 1 } });
      const boom = new Error('boom');
      const consumer = rheo.consume({
        stream: 'orders',
        group: 'billing',
        handler: (_e, { attempt }) => {
          if (attempt === 1) throw boom;
          return 'ack';
        },
      });
      await nextEvent(consumer, 'ack');
      await consumer.stop();
      const [failed, stopped, ...rest] = lines();
      expect(rest).toEqual([]);
      expect(failed).toEqual({
        level: 'warn',
        fields: expect.objectContaining({ stream: 'orders', group: 'billing', partition: 0, sequence: appended.sequence, attempt: 1, kind: 'threw', err: boom }),
        message: 'rheo handler for stream "orders", group "billing" failed (threw); the event is retried',
      });
      expect(stopped).toEqual({
        level: 'info',
        fields: { stream: 'orders', group: 'billing', consumerId: consumer.consumerId, released: 0, aborted: 0 },
        message: 'rheo consumer of stream "orders", group "billing" stopped',
      });
      await rheo.close();
    });

    it('a handler that only asks for a retry is not logged as a failure', async () => {
      const { rheo, lines } = await setup();
      await rheo.append('orders', { payload: { n: 1 } });
      const consumer = rheo.consume({
        stream: 'orders',
        group: 'billing',
        handler: (_e, { attempt }) => (attempt === 1 ? { retry: 'not yet' } : 'ack'),
      });
      await nextEvent(consumer, 'ack');
      await consumer.stop();
      expect(lines().map((l) => l.level)).toEqual(['info']);
      await rheo.close();
    });

    it('a stop that had to abort handlers at its timeout is logged as a warning with the count', async () => {
      const { rheo, lines } = await setup();
      await rheo.appendBatch('orders', [{ payload: { n: 1 } }, { payload: { n: 2 } }]);
      let running = 0;
      const consumer = rheo.consume({
        stream: 'orders',
        group: 'billing',
        concurrency: 2,
        handler: () => {
          running++;
          return new Promise<HandlerOutcome>(() => {});
        },
      });
      await waitFor(() => running === 2, 'both handlers running');
      const drained = nextEvent(consumer, 'drain');
      await consumer.stop({ timeoutMs: 20 });
      expect(await drained).toMatchObject({ aborted: 2, timedOut: true });
      expect(lines().at(-1)).toEqual({
        level: 'warn',
        fields: { stream: 'orders', group: 'billing', consumerId: consumer.consumerId, released: 0, aborted: 2 },
        message: 'rheo consumer of stream "orders", group "billing" stopped after aborting 2 handler(s) at the timeout',
      });
      await rheo.close();
    });

    it('stop() waits for a running handler within its timeout and does not abort it', async () => {
      const { rheo } = await setup();
      await rheo.append('orders', { payload: { n: 1 } });
      const finish = deferred<HandlerOutcome>();
      let signal: AbortSignal | null = null;
      const consumer = rheo.consume({
        stream: 'orders',
        group: 'billing',
        handler: (_e, context) => {
          signal = context.signal;
          return finish.promise;
        },
      });
      await waitFor(() => signal !== null, 'the handler running');
      const drained = nextEvent(consumer, 'drain');
      const stopping = consumer.stop({ timeoutMs: 60_000 });
      await waitFor(() => consumer.state === 'stopping', 'stopping');
      for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => setImmediate(resolve));
      expect(signal!.aborted).toBe(false);
      finish.resolve('ack');
      await stopping;
      expect(await drained).toMatchObject({ aborted: 0, timedOut: false });
      expect(consumer.stats()).toMatchObject({ acked: 1, state: 'stopped' });
      await rheo.close();
    });

    it('stop({ timeoutMs: 0 }) with nothing running has finished, not timed out; the signal keeps no listener', async () => {
      const { rheo, lines } = await setup();
      const controller = new AbortController();
      const consumer = rheo.consume({ stream: 'orders', group: 'billing', signal: controller.signal, handler: () => 'ack' });
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
      const drained = nextEvent(consumer, 'drain');
      await consumer.stop({ timeoutMs: 0 });
      expect(await drained).toMatchObject({ aborted: 0, timedOut: false });
      expect(lines().map((l) => l.level)).toEqual(['info']);
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
      await rheo.close();
    });

    it('a consumer on a rheo with telemetry: false handles and settles as usual', async () => {
      const clock = new ManualClock();
      const rheo = createRheo({ backend: await factory.make(clock), clock, telemetry: false, defaults: { pollMs: 5 } });
      await rheo.createStream('orders');
      await rheo.createGroup('orders', 'billing');
      await rheo.appendBatch('orders', [{ payload: { n: 1 } }, { payload: { n: 2 } }]);
      const consumer = rheo.consume({ stream: 'orders', group: 'billing', handler: (e) => (e.sequence === 1 ? 'ack' : { reject: 'no' }) });
      await waitFor(() => consumer.stats().acked + consumer.stats().deadLettered === 2, 'both settled');
      await consumer.stop();
      expect(consumer.stats()).toMatchObject({ acked: 1, deadLettered: 1, settleErrors: 0 });
      await rheo.close();
    });

    it("a fetch answered 'closed' (the backend shut under it) stops the consumer by itself", async () => {
      const { rheo, faulty } = await setup();
      faulty.fail('fetch', 'closed', { times: Infinity });
      const consumer = rheo.consume({ stream: 'orders', group: 'billing', handler: () => 'ack' });
      const error = await nextEvent(consumer, 'fetch-error');
      expect(error.error.code).toBe('closed');
      await consumer.done;
      expect(consumer.stats()).toMatchObject({ state: 'stopped', fetchErrors: 1 });
      await rheo.close();
    });

    it('another fetch error backs off and keeps the consumer running', async () => {
      const { rheo, faulty } = await setup();
      faulty.fail('fetch', 'backend_unavailable', { times: 1 });
      await rheo.append('orders', { payload: { n: 1 } });
      const consumer = rheo.consume({ stream: 'orders', group: 'billing', handler: () => 'ack' });
      await nextEvent(consumer, 'fetch-error');
      expect(consumer.state).toBe('running');
      await nextEvent(consumer, 'ack');
      expect(consumer.stats()).toMatchObject({ state: 'running', fetchErrors: 1, backoffMs: 0 });
      await consumer.stop();
      await rheo.close();
    });
  });
}
