import { describe, expect, it } from 'vitest';
import type { FetchErrorEvent } from '../../src/observability/lease-events.js';
import { consumerFactories } from '../support/backends.js';
import { nextEvent, useConsumerFixture, waitFor } from './harness.js';

for (const factory of consumerFactories) {
  describe(`consume: failure injection (${factory.name})`, () => {
    const fx = useConsumerFixture(factory);

    it('fetch errors back off exponentially and recover', async () => {
      const { rheo, stream, consume, faulty } = fx();
      faulty.fail('fetch', 'backend_unavailable', { times: 4 });
      await rheo.append(stream, { payload: { n: 1 } });
      const errors: FetchErrorEvent[] = [];
      const backoffs: number[] = [];
      const consumer = consume({ pollMs: 5, handler: () => 'ack' });
      consumer.on('fetch-error', (e) => {
        errors.push(e);
        backoffs.push(consumer.stats().backoffMs);
      });
      await waitFor(() => consumer.stats().acked === 1, 'recovered and acked');
      expect(errors.map((e) => e.failures)).toEqual([1, 2, 3, 4]);
      expect(errors.every((e) => e.error.code === 'backend_unavailable')).toBe(true);
      // 5, 10, 20, 40 ms less up to 20% jitter: strictly growing.
      for (let i = 1; i < backoffs.length; i++) expect(backoffs[i]!).toBeGreaterThan(backoffs[i - 1]!);
      expect(consumer.stats()).toMatchObject({ fetchErrors: 4, backoffMs: 0 });
    });

    it('an ack failing with ambiguous is neither nacked nor retried: the lease is left to expire', async () => {
      const { rheo, stream, group, consume, faulty, clock } = fx();
      const leaseMs = 1000;
      await rheo.append(stream, { payload: { n: 1 } });
      faulty.fail('settle', 'ambiguous', { kinds: ['ack'] });
      const consumer = consume({ leaseMs, handler: () => 'ack' });
      const failure = await nextEvent(consumer, 'settle-error');
      expect(failure).toMatchObject({ op: 'ack', sequence: 1 });
      expect(failure.error.code).toBe('ambiguous');
      await consumer.stop();
      expect(faulty.settlesOf(0, 1).map((s) => s.kind)).toEqual(['ack']); // no nack, no second ack
      expect(await rheo.fetch(stream, group)).toEqual([]); // still leased, not redelivered early
      clock.advance(leaseMs);
      const [again] = await rheo.fetch(stream, group);
      expect(again?.attempt).toBe(2);
    });

    it('an ack failing with backend_unavailable (nothing written) is sent again and lands: no redelivery', async () => {
      const { rheo, stream, group, consume, faulty, clock } = fx();
      const leaseMs = 60_000;
      await rheo.append(stream, { payload: { n: 1 } });
      faulty.fail('settle', 'backend_unavailable', { kinds: ['ack'], times: 2 });
      const consumer = consume({ leaseMs, handler: () => 'ack' });
      const settleErrors: unknown[] = [];
      consumer.on('settle-error', (info) => settleErrors.push(info));
      await waitFor(() => consumer.stats().acked === 1, 'the retried ack landed');
      await consumer.stop();
      expect(settleErrors).toEqual([]);
      expect(faulty.settlesOf(0, 1).map((s) => [s.kind, s.code])).toEqual([
        ['ack', 'backend_unavailable'],
        ['ack', 'backend_unavailable'],
        ['ack', null],
      ]);
      clock.advance(leaseMs);
      expect(await rheo.fetch(stream, group)).toEqual([]);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('an ambiguous ack that did land stays acked: nothing comes back after expiry', async () => {
      const { rheo, stream, group, consume, faulty, clock } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      faulty.fail('settle', 'ambiguous', { kinds: ['ack'], applied: true });
      const consumer = consume({ leaseMs: 1000, handler: () => 'ack' });
      await nextEvent(consumer, 'settle-error');
      await consumer.stop();
      clock.advance(1000);
      expect(await rheo.fetch(stream, group)).toEqual([]);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('a definite ack failure nacks, so the event is retried at once', async () => {
      const { rheo, stream, consume, faulty } = fx();
      await rheo.append(stream, { payload: { n: 1 } });
      faulty.fail('settle', 'internal', { kinds: ['ack'] });
      const attempts: number[] = [];
      const consumer = consume({
        handler: (_event, { attempt }) => {
          attempts.push(attempt);
          return 'ack';
        },
      });
      const retry = nextEvent(consumer, 'retry');
      await waitFor(() => consumer.stats().acked === 1, 'acked on the second attempt');
      expect((await retry).reason).toContain('ack failed (internal)');
      expect(attempts).toEqual([1, 2]); // no clock advance was needed
      expect(faulty.settlesOf(0, 1).map((s) => [s.kind, s.ok])).toEqual([
        ['ack', false],
        ['nack', true],
        ['ack', true],
      ]);
      expect(consumer.stats()).toMatchObject({ settleErrors: 1, retried: 1, acked: 1 });
    });

    it('settle calls failing with backend_unavailable until the leases would expire leave them to expire', async () => {
      const { rheo, stream, group, consume, faulty, clock } = fx();
      await rheo.appendBatch(stream, Array.from({ length: 3 }, (_, n) => ({ payload: { n } })));
      faulty.fail('settle', 'backend_unavailable', { wholeCall: true, times: Infinity });
      const consumer = consume({ concurrency: 3, leaseMs: 1000, handler: () => 'ack' });
      await waitFor(() => consumer.stats().settleErrors === 3, 'three settle errors');
      faulty.clear('settle');
      await consumer.stop();
      expect(faulty.settles.every((s) => s.kind === 'ack')).toBe(true);
      // Sent again after about 100, 200, 400 and 800 ms; the next wait (about
      // 1600 ms) would end past the 1000 ms lease, so each ack went 5 times.
      for (const sequence of [1, 2, 3]) expect(faulty.settlesOf(0, sequence)).toHaveLength(5);
      clock.advance(1000);
      const again = await rheo.fetch(stream, group);
      expect(again.map((l) => l.attempt)).toEqual([2, 2, 2]);
    });
  });
}
