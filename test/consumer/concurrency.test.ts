import { describe, expect, it } from 'vitest';
import { consumerFactories } from '../support/backends.js';
import { deferred, useConsumerFixture, waitFor } from './harness.js';

/** Lets other handlers interleave, so that overlap is real rather than sequential. */
const yieldTurns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

for (const factory of consumerFactories) {
  describe(`consume: concurrency and ordering (${factory.name})`, () => {
    const fx = useConsumerFixture(factory);

    it('never runs more than `concurrency` handlers at once, and reaches it', async () => {
      const { rheo, stream, group, consume } = fx();
      await rheo.appendBatch(stream, Array.from({ length: 40 }, (_, n) => ({ payload: { n } })));
      let active = 0;
      let peak = 0;
      const firstWave = deferred();
      const consumer = consume({
        concurrency: 4,
        maxDemand: 8,
        handler: async () => {
          active++;
          peak = Math.max(peak, active);
          if (active === 4) firstWave.resolve();
          await firstWave.promise; // the first handlers wait until the bound is reached
          await yieldTurns(3);
          active--;
        },
      });
      await waitFor(() => consumer.stats().acked === 40, '40 acks');
      expect(peak).toBe(4);
      expect(consumer.stats()).toMatchObject({ handled: 40, acked: 40, inflight: 0 });
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('orderBy key: one handler per key at a time, in sequence order per key, keys in parallel', async () => {
      const { rheo, stream, consume } = fx();
      const keys = ['a', 'b', 'c'];
      await rheo.appendBatch(
        stream,
        Array.from({ length: 30 }, (_, n) => ({ key: keys[n % 3]!, payload: { n } })),
      );
      const activeByKey = new Map<string, number>();
      const seenByKey = new Map<string, number[]>();
      let active = 0;
      let peak = 0;
      let peakPerKey = 0;
      const threeKeysAtOnce = deferred();
      const consumer = consume({
        concurrency: 3,
        maxDemand: 12,
        orderBy: 'key',
        handler: async (event) => {
          const key = event.key!;
          activeByKey.set(key, (activeByKey.get(key) ?? 0) + 1);
          peakPerKey = Math.max(peakPerKey, activeByKey.get(key)!);
          active++;
          peak = Math.max(peak, active);
          if (active === 3) threeKeysAtOnce.resolve();
          await threeKeysAtOnce.promise; // proves three different keys run together
          seenByKey.set(key, [...(seenByKey.get(key) ?? []), event.sequence]);
          await yieldTurns(2);
          active--;
          activeByKey.set(key, activeByKey.get(key)! - 1);
        },
      });
      await waitFor(() => consumer.stats().acked === 30, '30 acks');
      expect(peakPerKey).toBe(1);
      expect(peak).toBe(3);
      for (const key of keys) {
        const seen = seenByKey.get(key)!;
        expect(seen).toHaveLength(10);
        expect(seen).toEqual([...seen].sort((x, y) => x - y));
      }
    });

    it('orderBy partition and a custom key function also hold one handler per key', async () => {
      const { rheo, stream, consume } = fx();
      await rheo.appendBatch(
        stream,
        Array.from({ length: 12 }, (_, n) => ({ payload: { n, tenant: `t${n % 2}` } })),
      );
      const active = new Map<string, number>();
      let peakPerKey = 0;
      let peak = 0;
      let running = 0;
      const consumer = consume({
        concurrency: 4,
        orderBy: (lease) => String((lease.event.payload as { tenant: string }).tenant),
        handler: async (event) => {
          const key = (event.payload as { tenant: string }).tenant;
          active.set(key, (active.get(key) ?? 0) + 1);
          running++;
          peak = Math.max(peak, running);
          peakPerKey = Math.max(peakPerKey, active.get(key)!);
          await yieldTurns(3);
          running--;
          active.set(key, active.get(key)! - 1);
        },
      });
      await waitFor(() => consumer.stats().acked === 12, '12 acks');
      expect(peakPerKey).toBe(1);
      expect(peak).toBeLessThanOrEqual(2); // two tenants: never more than two at once
    });
  });

  describe(`consume: orderBy partition (${factory.name})`, () => {
    const fx = useConsumerFixture(factory, { partitions: 3 });

    it('runs one handler per partition, partitions in parallel, in sequence order', async () => {
      const { rheo, stream, consume } = fx();
      await rheo.appendBatch(stream, Array.from({ length: 24 }, (_, n) => ({ partition: n % 3, payload: { n } })));
      const active = [0, 0, 0];
      const seen: number[][] = [[], [], []];
      let peakPerPartition = 0;
      let running = 0;
      const allPartitions = deferred();
      const consumer = consume({
        concurrency: 6,
        orderBy: 'partition',
        handler: async (event) => {
          const p = event.partition;
          active[p]!++;
          peakPerPartition = Math.max(peakPerPartition, active[p]!);
          if (++running === 3) allPartitions.resolve();
          await allPartitions.promise;
          seen[p]!.push(event.sequence);
          await yieldTurns(2);
          running--;
          active[p]!--;
        },
      });
      await waitFor(() => consumer.stats().acked === 24, '24 acks');
      expect(peakPerPartition).toBe(1);
      for (const s of seen) expect(s).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    });
  });
}
