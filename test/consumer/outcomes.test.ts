import { describe, expect, it } from 'vitest';
import type { HandlerOutcome } from '../../src/consumer/consumer-types.js';
import { createRheo } from '../../src/rheo.js';
import { consumerFactories } from '../support/backends.js';
import { nextEvent, record, useConsumerFixture, waitFor } from './harness.js';

for (const factory of consumerFactories) {
  describe(`consume: handler outcomes (${factory.name})`, () => {
    const fx = useConsumerFixture(factory);

    it.each([
      ['nothing', undefined],
      ["'ack'", 'ack'],
    ])('returning %s acks', async (_name, outcome) => {
      const { rheo, stream, group, consume, faulty } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      const consumer = consume({ handler: () => outcome as HandlerOutcome });
      const acked = await nextEvent(consumer, 'ack');
      expect(acked).toMatchObject({ stream, group, partition: 0, sequence: 1, attempt: 1 });
      expect(faulty.settlesOf(0, 1).map((s) => s.kind)).toEqual(['ack']);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('{ retry, delayMs } nacks; the event comes back only after the delay, with attempt 2', async () => {
      const { rheo, stream, consume, faulty, clock } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      const attempts: number[] = [];
      const consumer = consume({
        handler: (_event, { attempt }) => {
          attempts.push(attempt);
          return attempt === 1 ? { retry: 'not yet', delayMs: 60_000 } : 'ack';
        },
      });
      const retried = await nextEvent(consumer, 'retry');
      expect(retried).toMatchObject({ reason: 'not yet', delayMs: 60_000, attempt: 1 });
      const fetches = faulty.calls.fetch;
      await waitFor(() => faulty.calls.fetch >= fetches + 3, 'three more fetches');
      expect(attempts).toEqual([1]); // still delayed
      clock.advance(60_000);
      await waitFor(() => consumer.stats().acked === 1, 'the retry acked');
      expect(attempts).toEqual([1, 2]);
      expect(consumer.stats()).toMatchObject({ retried: 1, acked: 1, handled: 2 });
    });

    it('{ retry, delayMs } on a second attempt also holds the event back until the delay has passed', async () => {
      const { rheo, stream, consume, faulty, clock } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      const attempts: number[] = [];
      const consumer = consume({
        handler: (_event, { attempt }) => {
          attempts.push(attempt);
          if (attempt === 1) return { retry: 'at once' };
          return attempt === 2 ? { retry: 'not yet', delayMs: 60_000 } : 'ack';
        },
      });
      const retried = await nextEvent(consumer, 'retry', (r) => r.attempt === 2);
      expect(retried).toMatchObject({ reason: 'not yet', delayMs: 60_000 });
      const fetches = faulty.calls.fetch;
      await waitFor(() => faulty.calls.fetch >= fetches + 3, 'three more fetches');
      expect(attempts).toEqual([1, 2]);
      clock.advance(60_000);
      await waitFor(() => consumer.stats().acked === 1, 'the third attempt acked');
      expect(attempts).toEqual([1, 2, 3]);
    });

    it('{ reject } dead-letters at once with the reason', async () => {
      const { rheo, stream, group, consume } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      const consumer = consume({ handler: () => ({ reject: 'malformed order' }) });
      const dead = await nextEvent(consumer, 'dead-letter');
      expect(dead).toMatchObject({ reason: 'malformed order', attempt: 1, sequence: 1 });
      const letters = await rheo.deadLetters(stream, group);
      expect(letters.map((l) => l.reason)).toEqual(['malformed order']);
      expect(consumer.stats().deadLettered).toBe(1);
    });

    it('a throw nacks with the error message and reports handler-error', async () => {
      const { rheo, stream, consume } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      const attempts: number[] = [];
      const consumer = consume({
        handler: (_event, { attempt }) => {
          attempts.push(attempt);
          if (attempt === 1) throw new Error('warehouse offline');
        },
      });
      const log = record(consumer, 'handler-error', 'retry', 'ack');
      await waitFor(() => consumer.stats().acked === 1, 'acked on the second attempt');
      expect(attempts).toEqual([1, 2]);
      expect(log.map((e) => e.event)).toEqual(['handler-error', 'retry', 'ack']);
      expect(log[0]!.payload).toMatchObject({ kind: 'threw' });
      expect((log[1]!.payload as { reason: string }).reason).toContain('warehouse offline');
    });

    it('an async handler settles by what its promise resolves to, and a rejection nacks like a throw', async () => {
      const { rheo, stream, group, consume } = fx();
      await rheo.appendBatch(stream, [{ payload: { n: 1 } }, { payload: { n: 2 } }]);
      const consumer = consume({
        concurrency: 2,
        handler: async (event, { attempt }) => {
          await new Promise<void>((resolve) => setImmediate(resolve));
          if ((event.payload as { n: number }).n === 1) return { reject: 'malformed order' };
          if (attempt === 1) throw new Error('warehouse offline');
          return 'ack';
        },
      });
      const log = record(consumer, 'handler-error', 'dead-letter', 'ack');
      await waitFor(() => consumer.stats().acked === 1 && consumer.stats().deadLettered === 1, 'both settled');
      expect(log.filter((e) => e.event === 'handler-error').map((e) => e.payload)).toMatchObject([
        { kind: 'threw', sequence: 2 },
      ]);
      expect((await rheo.deadLetters(stream, group)).map((d) => [d.event.sequence, d.reason])).toEqual([
        [1, 'malformed order'],
      ]);
      expect(consumer.stats()).toMatchObject({ handled: 3, acked: 1, deadLettered: 1, retried: 1, inflight: 0 });
    });

    it.each([
      ['a misspelt outcome', { retyr: 'x' }],
      ['a number', 42],
      ['null', null],
      ['a negative delay', { retry: 'x', delayMs: -1 }],
    ])('returning %s nacks with a reason that says the return was invalid', async (_name, outcome) => {
      const { rheo, stream, consume } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      const consumer = consume({ handler: () => outcome as unknown as HandlerOutcome });
      const [failure, retry] = await Promise.all([nextEvent(consumer, 'handler-error'), nextEvent(consumer, 'retry')]);
      expect(failure.kind).toBe('invalid-outcome');
      expect(retry.reason).toMatch(/^invalid handler outcome/);
      await consumer.stop();
      expect(consumer.stats().acked).toBe(0);
    });

    it('handlerTimeoutMs aborts the signal and nacks with a timeout reason', async () => {
      const { rheo, stream, consume } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      let abortReason: unknown = null;
      const consumer = consume({
        handlerTimeoutMs: 30,
        handler: (_event, { signal, attempt }) =>
          attempt > 1
            ? 'ack'
            : new Promise<HandlerOutcome>((resolve) => {
                // Cooperative: stops (and returns 'ack', which must be ignored) once aborted.
                signal.addEventListener('abort', () => {
                  abortReason = signal.reason;
                  resolve('ack');
                });
              }),
      });
      const [failure, retry] = await Promise.all([nextEvent(consumer, 'handler-error'), nextEvent(consumer, 'retry')]);
      expect(failure.kind).toBe('timeout');
      expect(retry.reason).toBe('handler timed out after 30 ms');
      expect(String(abortReason)).toContain('timed out');
      await waitFor(() => consumer.stats().acked === 1, 'acked on attempt 2');
      expect(consumer.stats().retried).toBe(1);
    });

    it('a lost lease aborts the signal and is not settled', async () => {
      const { rheo, stream, group, consume, faulty, clock } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      let aborted: unknown = null;
      const consumer = consume({
        leaseMs: 60,
        handler: (_event, { signal }) =>
          new Promise<HandlerOutcome>((resolve) => {
            started();
            signal.addEventListener('abort', () => {
              aborted = signal.reason;
              resolve('ack');
            });
          }),
      });
      await running;
      // Hold the consumer's renewals and fetches (letting any on its way finish) so the lease can run out.
      const resume = [faulty.hold('renew'), faulty.hold('fetch')];
      await waitFor(() => faulty.active('renew') + faulty.active('fetch') === 0, 'no call in flight');
      clock.advance(61); // the lease runs out on the backend's clock...
      const thief = createRheo({ backend: faulty.inner, clock }); // (not closed: it borrows the backend)
      const [stolen] = await thief.fetch(stream, group, { consumerId: 'thief' }); // ...and someone else claims it
      for (const go of resume) go();
      expect(stolen?.attempt).toBe(2);
      const lost = await nextEvent(consumer, 'lease-lost'); // the next renewal comes back stale
      expect(lost).toMatchObject({ sequence: 1, attempt: 1 });
      await waitFor(() => aborted !== null, 'the handler signal aborted');
      expect((aborted as { code?: string }).code).toBe('stale_lease');
      await consumer.stop();
      expect(faulty.settles.filter((s) => s.leaseId !== stolen!.leaseId)).toEqual([]);
      expect(consumer.stats()).toMatchObject({ lost: 1, acked: 0 });
    });
  });
}
