import { describe, expect, it } from 'vitest';
import type { HandlerOutcome } from '../../src/consumer/consumer-types.js';
import { createRheo } from '../../src/rheo.js';
import { consumerFactories } from '../support/backends.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { deferred, nextEvent, record, useConsumerFixture, waitFor } from './harness.js';

for (const factory of consumerFactories) {
  describe(`consume: drain (${factory.name})`, () => {
    const fx = useConsumerFixture(factory);

    it('finishes in-flight work, gives unstarted leases back at once, resolves only after the last settle', async () => {
      const { rheo, stream, group, consume, faulty, clock } = fx();
      await rheo.appendBatch(stream, Array.from({ length: 6 }, (_, n) => ({ payload: { n } })));
      const finish = deferred<HandlerOutcome>();
      const started: number[] = [];
      const consumer = consume({
        concurrency: 2,
        maxDemand: 6,
        handler: (event) => {
          started.push(event.sequence);
          return finish.promise;
        },
      });
      await waitFor(() => started.length === 2 && consumer.stats().held === 6, 'two running, six held');
      const log = record(consumer, 'ack', 'drain');
      let stopped = false;
      const stopping = consumer.stop({ timeoutMs: 60_000 }).then(() => (stopped = true));

      // The four never started come back at once (no clock advance), with their attempt given back.
      const other = createRheo({ backend: faulty.inner, clock });
      await waitFor(async () => (await other.groupInfo(stream, group)).inflight === 2, 'four released');
      const returned = await other.fetch(stream, group, { consumerId: 'other', limit: 10 });
      expect(returned.map((l) => l.event.sequence).sort()).toEqual([3, 4, 5, 6]);
      expect(returned.every((l) => l.attempt === 1)).toBe(true);
      await other.ackMany(returned);
      expect(stopped).toBe(false);

      // The running two finish; their acks are held at the backend: stop must wait for them.
      const resumeSettles = faulty.hold('settle');
      finish.resolve('ack');
      await waitFor(() => consumer.stats().inflight === 0 && faulty.calls.settle > 0, 'handlers done, ack sent');
      expect(stopped).toBe(false);
      resumeSettles();
      await stopping;
      expect(started).toEqual([1, 2]);
      expect(log.map((e) => e.event)).toEqual(['ack', 'ack', 'drain']);
      expect(log[2]!.payload).toMatchObject({ released: 4, aborted: 0, timedOut: false });
      expect(consumer.stats()).toMatchObject({ state: 'stopped', inflight: 0, held: 0, acked: 2 });
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('at the timeout aborts the handlers still running and nacks their leases', async () => {
      const { rheo, stream, group, consume } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      const started = deferred();
      let signalReason: unknown = null;
      const consumer = consume({
        handler: (_event, { signal }) => {
          started.resolve();
          signal.addEventListener('abort', () => (signalReason = signal.reason));
          return new Promise<HandlerOutcome>(() => {}); // ignores its signal, never settles
        },
      });
      await started.promise;
      const drained = nextEvent(consumer, 'drain');
      const retry = nextEvent(consumer, 'retry');
      await consumer.stop({ timeoutMs: 20 });
      expect(await drained).toMatchObject({ aborted: 1, timedOut: true, released: 0 });
      expect((await retry).reason).toBe('consumer stopped before the handler finished');
      expect(String(signalReason)).toContain('consumer stopped');
      const [again] = await rheo.fetch(stream, group);
      expect(again?.attempt).toBe(2); // nacked, so at once claimable again
    });

    it('an aborted signal option stops the consumer; asyncDispose and repeated stops share the drain', async () => {
      const { rheo, stream, consume } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      const controller = new AbortController();
      const consumer = consume({ signal: controller.signal, handler: () => 'ack' });
      await nextEvent(consumer, 'ack');
      controller.abort();
      await consumer.done;
      expect(consumer.state).toBe('stopped');

      const second = consume({ handler: () => 'ack' });
      const first = second.stop();
      expect(second.stop()).toStrictEqual(first);
      await second[Symbol.asyncDispose]();
      expect(second.state).toBe('stopped');

      const aborted = AbortSignal.abort();
      const never = consume({ signal: aborted, handler: () => 'ack' });
      await never.done;
      expect(never.stats()).toMatchObject({ state: 'stopped', handled: 0 });
    });

    it('stops by itself when rheo is closed under it: nothing is held and no timer is left to fetch or renew', async () => {
      const { rheo, stream, consume, faulty, clock } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      const timers = new ManualTimers(clock);
      const consumer = consume({ timers, handler: () => 'ack' });
      await nextEvent(consumer, 'ack');
      await rheo.close();
      await consumer.done;
      expect(consumer.stats()).toMatchObject({ state: 'stopped', held: 0, inflight: 0 });
      expect(timers.pendingDelays()).toEqual([]);
      const calls = { ...faulty.calls };
      timers.advance(3_600_000);
      for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
      expect(faulty.calls).toEqual(calls);
    });
  });
}
