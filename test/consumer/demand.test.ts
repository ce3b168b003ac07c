import { describe, expect, it } from 'vitest';
import type { HandlerOutcome } from '../../src/consumer/consumer-types.js';
import { consumerFactories } from '../support/backends.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { deferred, useConsumerFixture, waitFor, type Deferred } from './harness.js';

const yieldTurns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** A handler that waits, each run, on a gate it appends to `gates`. */
const gatedInto =
  (gates: Deferred<HandlerOutcome>[]) =>
  (): Promise<HandlerOutcome> => {
    const gate = deferred<HandlerOutcome>();
    gates.push(gate);
    return gate.promise;
  };

for (const factory of consumerFactories) {
  describe(`consume: demand (${factory.name})`, () => {
    const fx = useConsumerFixture(factory, { partitions: 2 });

    it('never holds more than maxDemand leases, sampled on every lease, handler run and settle', async () => {
      const { rheo, stream, group, consume, faulty } = fx();
      await rheo.appendBatch(stream, Array.from({ length: 60 }, (_, n) => ({ payload: { n }, key: `k${n}` })));
      const samples: number[] = [];
      const consumer = consume({
        concurrency: 3,
        maxDemand: 7,
        handler: async () => {
          samples.push(consumer.stats().held);
          await yieldTurns(3);
          samples.push(consumer.stats().held);
        },
      });
      const sample = (): void => {
        samples.push(consumer.stats().held);
      };
      consumer.on('lease', sample);
      consumer.on('ack', sample);
      // Settles reach the backend while leases are still counted: sample there too.
      const settle = faulty.settle.bind(faulty);
      faulty.settle = (...args) => {
        sample();
        return settle(...args);
      };
      // 60 acks one settle at a time take seconds on PGlite's one session on a loaded machine.
      await waitFor(() => consumer.stats().acked === 60, '60 acks', 60_000);
      expect(samples.length).toBeGreaterThan(180);
      expect(Math.max(...samples)).toBe(7);
      await consumer.stop();
      expect(consumer.stats().held).toBe(0);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('fetches again only once minDemand slots are free (maxDemand 8: two), in one fetch', async () => {
      const { rheo, stream, consume, faulty } = fx();
      await rheo.appendBatch(stream, Array.from({ length: 20 }, (_, n) => ({ payload: { n } })));
      const gates: Deferred<HandlerOutcome>[] = [];
      const consumer = consume({
        concurrency: 8,
        maxDemand: 8,
        handler: gatedInto(gates),
      });
      await waitFor(() => gates.length === 8 && consumer.stats().held === 8, 'eight handlers running');
      const atCap = faulty.calls.fetch;

      gates[0]!.resolve('ack');
      await waitFor(() => consumer.stats().acked === 1 && consumer.stats().held === 7, 'one slot free');
      await yieldTurns(20);
      expect(faulty.calls.fetch).toBe(atCap); // one free slot is below minDemand
      expect(gates).toHaveLength(8);

      gates[1]!.resolve('ack');
      await waitFor(() => gates.length === 10, 'two more handlers');
      expect(faulty.calls.fetch).toBe(atCap + 1); // both slots filled by one fetch
      expect(consumer.stats().held).toBe(8);
      for (const gate of gates) gate.resolve('ack');
    });

    it("splits a full demand into the store's claimsInFlight claims, sending the next at once after a full one", async () => {
      const { rheo, stream, consume, faulty, clock } = fx();
      await rheo.appendBatch(stream, Array.from({ length: 20 }, (_, n) => ({ payload: { n } })));
      faulty.claimsInFlight = 2;
      const limits: number[] = [];
      const fetch = faulty.fetch.bind(faulty);
      faulty.fetch = (s, g, request) => {
        limits.push(request.limit);
        return fetch(s, g, request);
      };
      const gates: Deferred<HandlerOutcome>[] = [];
      const consumer = consume({
        // No poll fires (manual timers, and the store's own wait lasts two minutes):
        // a full half taken for a short claim would wait here for an append.
        timers: new ManualTimers(clock),
        pollMs: 60_000,
        concurrency: 8,
        maxDemand: 8,
        handler: gatedInto(gates),
      });
      await waitFor(() => gates.length === 8, 'eight handlers running');
      expect(limits).toEqual([4, 4]);
      expect(consumer.stats().held).toBe(8);

      // minDemand (2) free: one claim of the room, under the half.
      gates[0]!.resolve('ack');
      gates[1]!.resolve('ack');
      await waitFor(() => gates.length === 10, 'two more handlers');
      expect(limits).toEqual([4, 4, 2]);
      for (const gate of gates) gate.resolve('ack');
    });
  });
}
