/**
 * BullMQ, measured on the same throwaway redis-server as rheo's Redis
 * backend: bulk enqueue, drain with a no-op processor at one concurrency,
 * and idle latency add → processor. Kept in its own module so the redis
 * scenario only loads bullmq (a bench-only dependency) when it runs.
 */
import { Queue, Worker, type ConnectionOptions } from 'bullmq';

import { interleavedLatency, type LatencySubject } from './interleaved-latency.js';
import { now, rate, sleep, waitUntil } from './stats.js';
import { inChunks, payload, EVENT_TYPE } from './workload.js';

/** Worker concurrencies tried; the report keeps each and the best. */
export const BULLMQ_CONCURRENCIES = [10, 50, 200] as const;
const ENQUEUE_CHUNK = 1000;

function connection(url: string): ConnectionOptions {
  const u = new URL(url);
  // BullMQ's workers block on Redis and require maxRetriesPerRequest: null.
  return { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: null };
}

export interface BullmqDrain {
  enqueuePerSec: number;
  drainPerSec: number;
}

/**
 * Enqueues `jobs` jobs with `addBulk` (chunks of 1,000) into a fresh queue,
 * then drains them with one Worker at `concurrency` and a no-op processor.
 * The clock stops when the last job's completion is stored (`completed`
 * fires after moveToFinished). Completed jobs are removed
 * (`removeOnComplete: true`), as rheo keeps no per-job record either.
 * `cpu` brackets the drain only, so Redis CPU is per drained job.
 */
export async function bullmqDrain(
  url: string,
  name: string,
  jobs: number,
  concurrency: number,
  cpu: { before: () => Promise<void>; after: () => Promise<void> },
): Promise<BullmqDrain> {
  const queue = new Queue(name, { connection: connection(url) });
  try {
    let t0 = now();
    await inChunks(jobs, ENQUEUE_CHUNK, async (start, end) => {
      const batch = [];
      for (let i = start; i < end; i++) batch.push({ name: EVENT_TYPE, data: payload(i), opts: { removeOnComplete: true } });
      await queue.addBulk(batch);
    });
    const enqueuePerSec = rate(jobs, now() - t0);

    let completed = 0;
    let failed = 0;
    await cpu.before();
    t0 = now();
    const worker = new Worker(name, async () => undefined, { connection: connection(url), concurrency, autorun: true });
    worker.on('completed', () => {
      completed++;
    });
    worker.on('failed', () => {
      failed++;
    });
    // A worker's connection error must not crash the bench; the wait below times out instead.
    worker.on('error', () => undefined);
    try {
      await waitUntil(`bullmq ${name} drain`, () => completed + failed >= jobs, 300_000, 1);
    } finally {
      await worker.close();
    }
    const drainPerSec = rate(jobs, now() - t0);
    await cpu.after();
    if (failed > 0) throw new Error(`bullmq ${name}: ${failed} jobs failed`);
    return { enqueuePerSec, drainPerSec };
  } finally {
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
  }
}

/** One idle Worker (concurrency 1); p50 of add() call → processor start over `samples` jobs. */
export async function bullmqLatency(url: string, name: string, samples: number): Promise<number> {
  const subject = await bullmqLatencySubject(url, name);
  try {
    const [p50] = await interleavedLatency([subject], samples);
    return p50!;
  } finally {
    await subject.stop();
  }
}

/** A BullMQ Worker (concurrency 1) blocked on an empty queue, for `interleavedLatency`: `send` adds one job. */
export async function bullmqLatencySubject(url: string, name: string): Promise<LatencySubject> {
  const queue = new Queue(name, { connection: connection(url) });
  const latencies: number[] = [];
  const worker = new Worker<{ at: number }>(
    name,
    async (job) => {
      latencies.push(now() - job.data.at);
    },
    { connection: connection(url), concurrency: 1 },
  );
  worker.on('error', () => undefined);
  const stop = async (): Promise<void> => {
    await worker.close();
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
  };
  try {
    await worker.waitUntilReady();
    // Let the worker reach its blocking wait first.
    await sleep(300);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    name: 'BullMQ',
    latencies,
    send: async (at) => {
      await queue.add('lat', { at }, { removeOnComplete: true });
    },
    stop,
  };
}
