import diagnosticsChannel from 'node:diagnostics_channel';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Backend } from '../../src/core/backend.js';
import { ManualClock } from '../../src/core/clock.js';
import type { PartitionConsumer } from '../../src/consumer/partition-consumer.js';
import type { PartitionConsumeOptions } from '../../src/consumer/partition-options.js';
import { systemTimers, type Timers } from '../../src/runtime/timers.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { consumerFactories } from '../support/backends.js';
import { makeRedisTestBackend, redisTarget } from '../support/redis.js';
import { waitFor } from './harness.js';

interface Fx {
  rheo: Rheo;
  clock: ManualClock;
  consume(options: Omit<PartitionConsumeOptions, 'stream' | 'group' | 'assignment'>): PartitionConsumer;
}

/** A deferred the test resolves by hand: handlers wait on it instead of on a guessed duration. */
function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

async function frontiers(rheo: Rheo): Promise<number[]> {
  const lag = await rheo.lag('s', 'g');
  return Object.values(lag.partitions).map((p) => p.frontier);
}

// Every backend implements partition ownership (memory, PostgreSQL, Redis), so
// every one runs these cases; Redis also on a Cluster, where a group's
// membership and each partition's fence live on different slots.
const factories: Array<{ name: string; make(clock: ManualClock): Promise<Backend> }> =
  process.env.RHEO_MEMORY_ONLY === '1'
    ? consumerFactories
    : [...consumerFactories, { name: 'redis cluster', make: async (clock) => makeRedisTestBackend(await redisTarget('cluster'), clock) }];

for (const factory of factories) {
  describe(`consume({ assignment: 'partitions' }) (${factory.name})`, () => {
    let current: Fx | null = null;
    let consumers: PartitionConsumer[] = [];
    beforeEach(async () => {
      const clock = new ManualClock();
      const rheo = createRheo({ backend: await factory.make(clock), clock, defaults: { pollMs: 5 } });
      await rheo.createStream('s', { partitions: 4 });
      await rheo.createGroup('s', 'g', { maxAttempts: 3 });
      consumers = [];
      current = {
        rheo,
        clock,
        consume: (o) => {
          const c = rheo.consume({ stream: 's', group: 'g', assignment: 'partitions', heartbeatMs: 10, retryBackoff: { initialMs: 1, maxMs: 5 }, ...o });
          consumers.push(c);
          return c;
        },
      };
    });
    afterEach(async () => {
      await Promise.all(consumers.map((c) => c.stop({ timeoutMs: 1000 })));
      await current?.rheo.close();
      current = null;
    });
    const fx = (): Fx => current!;

    it('handles every event once, in sequence order per partition, with one commit per batch', async () => {
      const { rheo, consume } = fx();
      await rheo.appendBatch('s', Array.from({ length: 200 }, (_, i) => ({ partition: i % 4, payload: { i } })));
      const seen = new Map<number, number[]>();
      const consumer = consume({
        batchSize: 25,
        handler: (event) => {
          const list = seen.get(event.partition) ?? [];
          list.push(event.sequence);
          seen.set(event.partition, list);
        },
      });
      await waitFor(async () => (await rheo.lag('s', 'g')).lag === 0, 'the group to drain');
      for (let p = 0; p < 4; p++) expect(seen.get(p)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
      const stats = consumer.stats();
      expect(stats.owned).toEqual([0, 1, 2, 3]);
      expect(stats.handled).toBe(200);
      // 50 events per partition in batches of 25: two commits each.
      expect(stats.commits).toBe(8);
      await consumer.stop();
      expect((await rheo.members('s', 'g')).members).toEqual([]);
      expect(await frontiers(rheo)).toEqual([50, 50, 50, 50]);
    });

    it('commits of partitions that finish together go out as one call, one call in flight at a time', async () => {
      const { rheo, consume } = fx();
      await rheo.appendBatch('s', Array.from({ length: 40 }, (_, i) => ({ partition: i % 4, payload: { i } })));
      // Every commit call the consumer makes, as the partitions it carried.
      const calls: number[][] = [];
      let inFlight = 0;
      let peak = 0;
      const commit = rheo.commit.bind(rheo);
      rheo.commit = async (ops, options) => {
        calls.push(ops.map((op) => op.partition));
        peak = Math.max(peak, ++inFlight);
        try {
          return await commit(ops, options);
        } finally {
          inFlight--;
        }
      };
      const hold = gate();
      let waiting = 0;
      consume({
        batchSize: 10,
        concurrency: 4,
        handler: async () => {
          waiting++;
          await hold.promise;
        },
      });
      await waitFor(() => waiting === 4, 'a handler running on every partition');
      hold.open();
      await waitFor(async () => (await rheo.lag('s', 'g')).lag === 0, 'the group to drain');
      expect(calls).toHaveLength(1);
      expect([...calls[0]!].sort()).toEqual([0, 1, 2, 3]);
      expect(peak).toBe(1);
      expect(await frontiers(rheo)).toEqual([10, 10, 10, 10]);
    });

    it("orderBy 'key' runs different keys in parallel and one key at a time, in order", async () => {
      const { rheo, consume } = fx();
      await rheo.appendBatch('s', [
        { partition: 0, key: 'a', payload: 1 },
        { partition: 0, key: 'b', payload: 1 },
        { partition: 0, key: 'a', payload: 2 },
        { partition: 0, key: 'b', payload: 2 },
      ]);
      const hold = gate();
      const order: string[] = [];
      let running = 0;
      let peak = 0;
      consume({
        orderBy: 'key',
        concurrency: 4,
        handler: async (event) => {
          running++;
          peak = Math.max(peak, running);
          if (event.key === 'a' && event.payload === 1) await hold.promise;
          order.push(`${event.key}${String(event.payload)}`);
          running--;
        },
      });
      // b runs to the end while a1 is held: keys are independent.
      await waitFor(() => order.length === 2, 'key b to finish');
      expect(order).toEqual(['b1', 'b2']);
      expect(await frontiers(rheo)).toEqual([0, 0, 0, 0]);
      hold.open();
      await waitFor(async () => (await frontiers(rheo))[0] === 4, 'the contiguous commit');
      expect(order).toEqual(['b1', 'b2', 'a1', 'a2']);
      expect(peak).toBe(2);
    });

    it('retries a failing event in place, then dead-letters it at maxAttempts and goes on', async () => {
      const { rheo, consume } = fx();
      await rheo.appendBatch('s', [0, 1, 2].map((i) => ({ partition: 0, type: i === 1 ? 'poison' : 'ok', payload: i })));
      const runs: string[] = [];
      const consumer = consume({
        handler: (event, { attempt }) => {
          runs.push(`${event.sequence}#${attempt}`);
          if (event.type === 'poison') throw new Error('cannot parse');
        },
      });
      await waitFor(async () => (await frontiers(rheo))[0] === 3, 'the partition to pass the poison event');
      expect(runs).toEqual(['1#1', '2#1', '2#2', '2#3', '3#1']);
      const dead = await rheo.deadLetters('s', 'g');
      expect(dead.map((d) => [d.event.sequence, d.attempt, d.reason])).toEqual([[2, 3, 'handler threw: cannot parse']]);
      expect(consumer.stats()).toMatchObject({ retried: 2, deadLettered: 1 });
    });

    it('a reject dead-letters at once with its reason; a handler past handlerTimeoutMs is aborted and retried', async () => {
      const { rheo, consume } = fx();
      await rheo.appendBatch('s', [0, 1, 2].map((i) => ({ partition: 0, type: ['bad', 'slow', 'ok'][i]!, payload: i })));
      const runs: string[] = [];
      const aborted: string[] = [];
      const consumer = consume({
        handlerTimeoutMs: 20,
        handler: (event, { attempt, signal }) => {
          runs.push(`${event.sequence}#${attempt}`);
          if (event.type === 'bad') return { reject: 'unreadable' };
          if (event.type === 'slow' && attempt === 1) {
            // Never settles by itself: only the timeout ends this attempt.
            return new Promise<void>(() => signal.addEventListener('abort', () => aborted.push(String(signal.reason))));
          }
          return undefined;
        },
      });
      await waitFor(async () => (await frontiers(rheo))[0] === 3, 'the partition to drain');
      expect(runs).toEqual(['1#1', '2#1', '2#2', '3#1']);
      expect(aborted).toEqual(['TimeoutError: handler timed out after 20 ms']);
      const dead = await rheo.deadLetters('s', 'g');
      expect(dead.map((d) => [d.event.sequence, d.attempt, d.reason])).toEqual([[1, 1, 'unreadable']]);
      expect(consumer.stats()).toMatchObject({ retried: 1, deadLettered: 1 });
    });

    it("onFailure 'block' retries until the event succeeds and never dead-letters", async () => {
      const { rheo, consume } = fx();
      await rheo.appendBatch('s', [0, 1].map((i) => ({ partition: 0, payload: i })));
      const runs: string[] = [];
      consume({
        onFailure: 'block',
        handler: (event, { attempt }) => {
          runs.push(`${event.sequence}#${attempt}`);
          if (event.sequence === 1 && attempt < 5) return { retry: 'not yet' };
        },
      });
      await waitFor(async () => (await frontiers(rheo))[0] === 2, 'the partition to drain');
      expect(runs).toEqual(['1#1', '1#2', '1#3', '1#4', '1#5', '2#1']);
      expect(await rheo.deadLetters('s', 'g')).toEqual([]);
    });

    it('hands a partition over gracefully: the owner finishes, commits and releases before the newcomer reads', async () => {
      const { rheo, consume } = fx();
      await rheo.appendBatch('s', [0, 1, 2, 3].map((p) => ({ partition: p, payload: 'first' })));
      const hold = gate();
      const handledBy: Array<[string, number, number]> = [];
      const rebalances: unknown[] = [];
      const onRebalance = (m: unknown): void => void rebalances.push(m);
      diagnosticsChannel.subscribe('rheo:rebalance', onRebalance);
      try {
        const a = consume({
          memberId: 'a',
          concurrency: 4,
          handler: async (event) => {
            if (event.partition === 3) await hold.promise;
            handledBy.push(['a', event.partition, event.sequence]);
          },
        });
        await waitFor(() => handledBy.length === 3, 'a to handle partitions 0-2');
        const b = consume({ memberId: 'b', concurrency: 4, handler: (event) => void handledBy.push(['b', event.partition, event.sequence]) });
        // Partition 2 was idle and moved at once; partition 3 waits for its running handler.
        await waitFor(() => b.stats().owned.includes(2), 'b to receive partition 2');
        expect(b.stats().owned).toEqual([2]);
        expect(a.stats().revoking).toEqual([3]);
        expect((await rheo.members('s', 'g')).owners).toEqual({ 0: 'a', 1: 'a', 2: 'b', 3: 'a' });
        hold.open();
        await waitFor(() => b.stats().owned.length === 2, 'b to receive partition 3');
        expect(await frontiers(rheo)).toEqual([1, 1, 1, 1]);
        await rheo.appendBatch('s', [2, 3].map((p) => ({ partition: p, payload: 'second' })));
        await waitFor(async () => (await rheo.lag('s', 'g')).lag === 0, 'b to handle the new events');
        expect(handledBy.slice(3).sort()).toEqual([
          ['a', 3, 1],
          ['b', 2, 2],
          ['b', 3, 2],
        ]);
        expect(rebalances).toContainEqual(expect.objectContaining({ memberId: 'a', revoked: [2, 3] }));
        expect(rebalances).toContainEqual(expect.objectContaining({ memberId: 'b', assigned: [expect.objectContaining({ partition: 2 })] }));
      } finally {
        diagnosticsChannel.unsubscribe('rheo:rebalance', onRebalance);
      }
    });

    it('a paused member past its session cannot commit: the new owner redoes its work', async () => {
      const { rheo, clock, consume } = fx();
      await rheo.appendBatch('s', [1, 2].map((n) => ({ partition: 0, payload: n })));
      const hold = gate();
      const handled: string[] = [];
      // a's timers stop firing once paused: no more heartbeats, as under SIGSTOP.
      let paused = false;
      const timers: Timers = {
        schedule: (ms, callback, options) => systemTimers.schedule(ms, () => void (paused || callback()), options),
      };
      const a = consume({
        memberId: 'a',
        sessionMs: 1_000,
        timers,
        handler: async (event) => {
          if (event.sequence === 1) await hold.promise;
          handled.push(`a${event.partition}:${event.sequence}`);
        },
      });
      await waitFor(() => a.stats().owned.length === 4, 'a to own every partition');
      paused = true;
      clock.advance(1_000);
      const b = consume({ memberId: 'b', handler: (event) => void handled.push(`b${event.partition}:${event.sequence}`) });
      await waitFor(async () => (await frontiers(rheo))[0] === 2, 'b to redo partition 0');
      expect(handled).toEqual(['b0:1', 'b0:2']);
      // a resumes: it finishes its batch, its commit is refused, its worker ends.
      hold.open();
      await waitFor(() => a.stats().owned.length === 0, 'a to notice it was fenced');
      expect(handled).toEqual(['b0:1', 'b0:2', 'a0:1', 'a0:2']);
      expect(b.stats().owned).toEqual([0, 1, 2, 3]);
      expect(await frontiers(rheo)).toEqual([2, 0, 0, 0]);
      expect(a.stats().commits).toBe(0);
      // Every partition a owned moved on without its release: all four are counted lost, 0 (fenced by its refused commit) too.
      expect(a.stats().lost).toBe(4);
    });
  });
}
