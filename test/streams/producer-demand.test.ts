import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import { createLeaseSink } from '../../src/sinks/lease-sink.js';
import { backendFactories } from '../support/backends.js';
import { useStreamsFixture } from './support/fixture.js';
import { readOne, until } from './support/wait.js';

for (const factory of backendFactories) {
  describe(`producer demand (${factory.name})`, () => {
    const fx = useStreamsFixture(factory, { partitions: 2 });

    it('never holds more than maxDemand leases under a slow consumer, sampled on every event', async () => {
      const { rheo, stream, group } = fx();
      await fx().append(30);
      const producer = fx().producer({ maxDemand: 4 });
      const samples: number[] = [];
      const emit = producer.emit.bind(producer);
      producer.emit = (event: string | symbol, ...args: unknown[]): boolean => {
        samples.push(producer.inflightCount);
        return emit(event, ...args);
      };
      let handled = 0;
      const sink = createLeaseSink({
        producer,
        concurrency: 2,
        handler: async () => {
          samples.push(producer.inflightCount);
          // A slow handler: several turns of the event loop per lease.
          for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
          handled++;
          if (handled === 30) void producer.drain();
        },
      });
      await pipeline(producer, sink);
      expect(handled).toBe(30);
      expect(samples.length).toBeGreaterThan(60);
      expect(Math.max(...samples)).toBe(4);
      expect(producer.inflightCount).toBe(0);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('at the cap, a confirm (not a timer) resumes fetching', async () => {
      const { faulty, timers } = fx();
      await fx().append(3);
      const producer = fx().producer({ maxDemand: 2 });
      const first = await readOne<Lease>(producer);
      const second = await readOne<Lease>(producer);
      await until(() => producer.inflightCount === 2, 'two leases are held');
      const fetchesAtCap = faulty.calls.fetch;
      // No timer is involved in resuming: there is none pending besides renewal.
      expect(timers.pendingDelays({ keepAlive: true })).toEqual([]);
      for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
      expect(faulty.calls.fetch).toBe(fetchesAtCap);
      await producer.ack(first);
      const third = await readOne<Lease>(producer);
      expect(third.event.sequence).toBeGreaterThan(0);
      expect(producer.inflightCount).toBe(2);
      await producer.ack(second);
      await producer.ack(third);
      expect(producer.inflightCount).toBe(0);
    });

    it('below the cap, waits until minDemand slots are free and then fills them in one fetch', async () => {
      const { faulty } = fx();
      await fx().append(20);
      const producer = fx().producer({ maxDemand: 8, minDemand: 3 });
      const limits: number[] = [];
      producer.on('fetched', ({ count }) => limits.push(count));
      const held: Lease[] = [];
      for (let i = 0; i < 8; i++) held.push(await readOne<Lease>(producer));
      await until(() => producer.inflightCount === 8, 'eight leases are held');
      const fetchesAtCap = faulty.calls.fetch;
      await producer.ack(held[0]!);
      await producer.ack(held[1]!);
      for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
      expect(faulty.calls.fetch).toBe(fetchesAtCap); // two free slots are below minDemand
      expect(producer.inflightCount).toBe(6);
      await producer.ack(held[2]!);
      await until(() => producer.inflightCount === 8, 'three slots refilled');
      expect(faulty.calls.fetch).toBe(fetchesAtCap + 1);
      expect(limits).toEqual([8, 3]);
    });

    it('coalesces settles issued together into one settleMany call', async () => {
      const { faulty, rheo, stream, group } = fx();
      await fx().append(12);
      const leases = await rheo.fetch(stream, group, { limit: 12 });
      const producer = fx().producer({ maxDemand: 12 });
      const before = faulty.calls.settle;
      await Promise.all([
        ...leases.slice(0, 10).map((l) => producer.ack(l)),
        producer.nack(leases[10]!, 'again', { delayMs: 0 }),
        producer.reject(leases[11]!, 'poison'),
      ]);
      expect(faulty.calls.settle - before).toBe(1);
      expect(faulty.settles.map((s) => s.kind).sort()).toEqual([...Array(10).fill('ack'), 'nack', 'reject'].sort());
      expect((await rheo.deadLetters(stream, group)).map((d) => d.reason)).toEqual(['poison']);
    });

    it('a pipeline acking 100 leases through concurrent handlers makes far fewer than 100 settle calls', async () => {
      const { faulty, rheo, stream, group } = fx();
      await fx().append(100);
      const producer = fx().producer({ maxDemand: 20 });
      let handled = 0;
      const sink = createLeaseSink({
        producer,
        concurrency: 10,
        handler: async () => {
          await new Promise<void>((resolve) => setImmediate(resolve));
          if (++handled === 100) void producer.drain();
        },
      });
      const before = faulty.calls.settle;
      await pipeline(producer, sink);
      const calls = faulty.calls.settle - before;
      expect(faulty.settles.filter((s) => s.ok && s.kind === 'ack')).toHaveLength(100);
      expect(calls).toBeLessThanOrEqual(25);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('confirms even when the settle fails, so a fenced lease is neither renewed nor counted', async () => {
      const { faulty } = fx();
      await fx().append(1);
      const producer = fx().producer({ maxDemand: 1 });
      const lease = await readOne<Lease>(producer);
      faulty.fail('settle', 'ambiguous', { wholeCall: true });
      await expect(producer.ack(lease)).rejects.toMatchObject({ code: 'ambiguous' });
      expect(producer.inflightCount).toBe(0);
      expect(producer.holds(lease.leaseId)).toBe(false);
    });
  });
}
