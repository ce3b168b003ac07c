import { EventEmitter } from 'node:events';

import { Logger, makeWorkerUtils, run, type Runner, type WorkerEvents } from 'graphile-worker';
import pg from 'pg';
import PgBoss from 'pg-boss';

import type { LatencySubject } from './interleaved-latency.js';
import { now, sleep, waitUntil } from './stats.js';
import { inChunks, latencyGapMs, payload } from './workload.js';

/**
 * The peers, each driven with the settings its own documentation gives for
 * throughput. Only public APIs are used; completion is confirmed in the
 * database (not just "handler ran"), because both peers complete in batches
 * after the handler returns, exactly like rheo's settle batcher.
 */

export interface DrainResult {
  enqueuePerSec: number;
  /** Jobs per second from the first handler start to the last completion being durable. */
  drainPerSec: number;
}

const quietLogger = new Logger(() => (level, message) => {
  if (level === 'error') process.stderr.write(`graphile-worker: ${message}\n`);
});

/**
 * graphile-worker's documented fast configuration (worker.graphile.org/docs/performance):
 * `concurrentJobs: 24, maxPoolSize: 25, localQueue: { size: 500 },
 * completeJobBatchDelay: 0, failJobBatchDelay: 0`. One worker pool, as rheo
 * runs one consumer.
 */
export const GRAPHILE_FAST = {
  concurrency: 24,
  maxPoolSize: 25,
  localQueueSize: 500,
  completeJobBatchDelay: 0,
};

async function startGraphile(connectionString: string, task: () => void, events?: WorkerEvents): Promise<Runner> {
  return run({
    connectionString,
    events,
    concurrency: GRAPHILE_FAST.concurrency,
    maxPoolSize: GRAPHILE_FAST.maxPoolSize,
    noHandleSignals: true,
    logger: quietLogger,
    taskList: {
      noop: async () => {
        task();
      },
    },
    preset: {
      worker: {
        localQueue: { size: GRAPHILE_FAST.localQueueSize },
        completeJobBatchDelay: GRAPHILE_FAST.completeJobBatchDelay,
        failJobBatchDelay: 0,
      },
    },
  });
}

export async function graphileMigrate(connectionString: string): Promise<void> {
  const utils = await makeWorkerUtils({ connectionString, logger: quietLogger });
  try {
    await utils.migrate();
  } finally {
    await utils.release();
  }
}

export async function graphileDrain(connectionString: string, jobs: number): Promise<DrainResult> {
  const utils = await makeWorkerUtils({ connectionString, logger: quietLogger });
  let enqueueMs: number;
  try {
    await utils.migrate();
    // Bulk enqueue through the documented batch API (one add_jobs call per chunk).
    const t0 = now();
    await inChunks(jobs, 1000, async (start, end) => {
      const specs = [];
      for (let i = start; i < end; i++) specs.push({ identifier: 'noop', payload: payload(i) });
      await utils.addJobs(specs);
    });
    enqueueMs = now() - t0;
  } finally {
    await utils.release();
  }

  let handled = 0;
  // The clock starts when the local queue is created, right before its first
  // fetch, so the runner's own start-up (migration check, LISTEN) is not counted.
  let first = 0;
  const events: WorkerEvents = new EventEmitter();
  events.once('localQueue:init', () => {
    first = now();
  });
  const runner = await startGraphile(
    connectionString,
    () => {
      handled++;
    },
    events,
  );
  const db = new pg.Client({ connectionString });
  await db.connect();
  try {
    await waitUntil('graphile-worker handlers', () => handled >= jobs, 120_000);
    await waitUntil(
      'graphile-worker completions',
      async () => {
        const { rows } = await db.query<{ n: string }>('select count(*)::text as n from graphile_worker._private_jobs');
        return rows[0]?.n === '0';
      },
      60_000,
    );
    const elapsed = now() - first;
    return { enqueuePerSec: (jobs * 1000) / enqueueMs, drainPerSec: (jobs * 1000) / elapsed };
  } finally {
    await db.end();
    await runner.stop();
  }
}

/**
 * Append → handler start latency on an idle graphile-worker (it LISTENs for
 * new jobs, so this is its notification path). Returns one sample per job, ms.
 */
export async function graphileLatency(connectionString: string, count: number): Promise<number[]> {
  const sentAt = new Map<number, number>();
  const samples: number[] = [];
  const idle = await idleGraphile(connectionString, (p) => {
    const at = now();
    const sent = sentAt.get((p as { n: number }).n);
    if (sent !== undefined) samples.push(at - sent);
  });
  try {
    for (let i = 0; i < count; i++) {
      sentAt.set(i, now());
      await idle.runner.addJob('ping', { n: i });
      await sleep(latencyGapMs(i));
    }
    await waitUntil('graphile-worker latency handlers', () => samples.length >= count, 30_000);
    return samples;
  } finally {
    await idle.stop();
  }
}

/** An idle graphile-worker (its fast settings) for `interleavedLatency`: `send` adds one `ping` job. */
export async function graphileLatencySubject(connectionString: string): Promise<LatencySubject> {
  const latencies: number[] = [];
  const idle = await idleGraphile(connectionString, (p) => {
    latencies.push(now() - (p as { at: number }).at);
  });
  return {
    name: 'graphile-worker',
    latencies,
    send: async (at) => {
      await idle.runner.addJob('ping', { at });
    },
    stop: idle.stop,
  };
}

/** graphile-worker at its fast settings with one task, `ping`, started and given 200 ms to reach its LISTEN. */
async function idleGraphile(connectionString: string, ping: (payload: unknown) => void): Promise<{ runner: Runner; stop(): Promise<void> }> {
  await graphileMigrate(connectionString);
  // A pool of the bench's own, ended here: the scenario drops the database
  // WITH (FORCE) right after, and a connection the server terminated while
  // graphile-worker's own pool was ending came up as an unhandled 'error'
  // that ended the bench (once, on 2026-12-03).
  const pgPool = new pg.Pool({ connectionString, max: GRAPHILE_FAST.maxPoolSize });
  pgPool.on('error', () => undefined);
  let runner: Runner;
  try {
    runner = await run({
      pgPool,
      concurrency: GRAPHILE_FAST.concurrency,
      noHandleSignals: true,
      logger: quietLogger,
      taskList: {
        ping: async (p) => {
          ping(p);
        },
      },
      preset: { worker: { localQueue: { size: GRAPHILE_FAST.localQueueSize }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
    });
  } catch (error) {
    await pgPool.end();
    throw error;
  }
  await sleep(200);
  return {
    runner,
    stop: async () => {
      await runner.stop();
      await pgPool.end();
    },
  };
}

/**
 * pg-boss tuned for throughput. pg-boss 10 has no LISTEN/NOTIFY: each `work()`
 * loop fetches up to `batchSize` jobs, runs the handler on the array, completes
 * the whole array in one statement, then sleeps out the rest of
 * `pollingIntervalSeconds` (minimum 0.5 s). Throughput is therefore set by
 * batchSize × workers / 0.5 s until the database is the limit. Measured on
 * this machine class with 20,000 jobs: 1×20000 6k/s, 1×5000 10k/s, 2×5000
 * 11.5k/s, 2×10000 14k/s (best), 4×2500 stalls near 0.7k/s (concurrent
 * completes of large batches contend).
 */
export const PGBOSS_FAST = { workers: 2, batchSize: 10_000, pollingIntervalSeconds: 0.5 };

function newBoss(connectionString: string): PgBoss {
  const boss = new PgBoss({
    connectionString,
    max: 10,
    supervise: false,
    schedule: false,
    migrate: true,
  });
  boss.on('error', (error: unknown) => process.stderr.write(`pg-boss: ${String(error)}\n`));
  return boss;
}

export async function pgBossDrain(connectionString: string, jobs: number, queue: string): Promise<DrainResult> {
  const boss = newBoss(connectionString);
  await boss.start();
  const db = new pg.Client({ connectionString });
  await db.connect();
  try {
    await boss.createQueue(queue);
    const t0 = now();
    await inChunks(jobs, 1000, async (start, end) => {
      const batch = [];
      for (let i = start; i < end; i++) batch.push({ name: queue, data: payload(i) });
      await boss.insert(batch);
    });
    const enqueueMs = now() - t0;

    let handled = 0;
    const first = now();
    for (let w = 0; w < PGBOSS_FAST.workers; w++) {
      await boss.work(
        queue,
        { batchSize: PGBOSS_FAST.batchSize, pollingIntervalSeconds: PGBOSS_FAST.pollingIntervalSeconds },
        async (batch) => {
          handled += batch.length;
        },
      );
    }
    await waitUntil('pg-boss handlers', () => handled >= jobs, 120_000);
    await waitUntil(
      'pg-boss completions',
      async () => {
        const { rows } = await db.query<{ n: string }>(
          "select count(*)::text as n from pgboss.job where name = $1 and state <> 'completed'",
          [queue],
        );
        return rows[0]?.n === '0';
      },
      60_000,
    );
    const elapsed = now() - first;
    return { enqueuePerSec: (jobs * 1000) / enqueueMs, drainPerSec: (jobs * 1000) / elapsed };
  } finally {
    await db.end();
    await boss.stop({ graceful: false, timeout: 1000 });
  }
}

/** Append → handler start on an idle pg-boss worker polling at its minimum interval (0.5 s). */
export async function pgBossLatency(connectionString: string, count: number): Promise<number[]> {
  const boss = newBoss(connectionString);
  await boss.start();
  const queue = 'latency';
  const sentAt = new Map<number, number>();
  const samples: number[] = [];
  try {
    await boss.createQueue(queue);
    await boss.work<{ n: number }>(queue, { batchSize: 100, pollingIntervalSeconds: 0.5 }, async (batch) => {
      const at = now();
      for (const job of batch) {
        const sent = sentAt.get(job.data.n);
        if (sent !== undefined) samples.push(at - sent);
      }
    });
    await sleep(200);
    for (let i = 0; i < count; i++) {
      sentAt.set(i, now());
      await boss.send(queue, { n: i });
      await sleep(latencyGapMs(i));
    }
    await waitUntil('pg-boss latency handlers', () => samples.length >= count, 30_000);
    return samples;
  } finally {
    await boss.stop({ graceful: false, timeout: 1000 });
  }
}
