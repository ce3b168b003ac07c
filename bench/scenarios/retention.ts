import pg from 'pg';

import type { BenchContext } from '../lib/context.js';
import { log } from '../lib/context.js';
import { openRheo } from '../lib/rheo-setup.js';
import { now, rate, sleep } from '../lib/stats.js';
import { EVENT_TYPE, payload } from '../lib/workload.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { postgresBackend } from '../../src/postgres.js';

export const RETENTION = '7 retention';

export const RETENTION_CASES = {
  size: (what: string) => `events table + indexes ${what}`,
  growth: 'size at the end ÷ size after the first window (with retention)',
  withTrim: 'append + consume while trimming',
  without: 'append + consume without trimming',
  ratio: 'throughput while trimming ÷ without',
} as const;

/**
 * Scenario 7 (issue 14): does trimming keep PostgreSQL storage bounded, and
 * what does it cost the hot paths?
 *
 * Storage: one stream with `retention: { maxEvents }`, appended and consumed
 * window after window (each window appends as many events as retention
 * keeps), trimmed after each window exactly as the background trimmer
 * would (batches of 10,000, not forced). Autovacuum runs with the server's
 * settings (rheo's migration only lowers the events table's scale factors);
 * `pg_total_relation_size` of the events table (heap + indexes + TOAST) is
 * sampled after every window. Without trimming the same run grows linearly.
 *
 * Throughput: an appender (batches of 100) and a consumer (fetch 500 +
 * ackMany) run together over the same number of events, with and without a
 * trimmer that trims the stream every 50 ms (1,200× more often than the
 * default interval: the worst case), interleaved run by run.
 */
export async function retentionScenario(ctx: BenchContext, parts: { storage: boolean } = { storage: true }): Promise<void> {
  if (!ctx.pg) return ctx.skip(RETENTION, 'no database');
  const url = await ctx.pg.createDatabase('rheo_bench_retention');
  try {
    if (parts.storage) await storageRun(ctx, url);
    for (let run = 0; run < ctx.runs; run++) {
      for (const trimming of [true, false]) {
        const eps = await throughputRun(ctx, url, run, trimming);
        ctx.record(RETENTION, trimming ? RETENTION_CASES.withTrim : RETENTION_CASES.without, 'events/s', eps);
      }
    }
    const a = ctx.metrics.get(`${RETENTION}\u0000${RETENTION_CASES.withTrim}`)!;
    const b = ctx.metrics.get(`${RETENTION}\u0000${RETENTION_CASES.without}`)!;
    for (let i = 0; i < Math.min(a.samples.length, b.samples.length); i++) {
      ctx.record(RETENTION, RETENTION_CASES.ratio, 'x', a.samples[i]! / b.samples[i]!);
    }
  } finally {
    await ctx.pg.dropDatabase('rheo_bench_retention');
  }
}

async function storageRun(ctx: BenchContext, url: string): Promise<void> {
  const keep = ctx.size(50_000, 5_000);
  const windows = ctx.size(24, 6);
  const rheo = await openRheo('postgres', { url });
  // The contrast: the same appends without retention, in a schema (an events table) of its own.
  const unbounded = createRheo({ backend: postgresBackend({ connectionString: url }, { schema: 'rheo_unbounded' }), retention: { enabled: false } });
  await unbounded.migrate();
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await rheo.createStream('kept', { retention: { maxEvents: keep } });
    await rheo.createGroup('kept', 'g');
    await unbounded.createStream('all');
    const sizes: number[] = [];
    let grown = 0;
    const t0 = now();
    for (let w = 0; w < windows; w++) {
      await appendAndConsume(rheo, 'kept', 'g', keep, w * keep);
      await rheo.trim('kept');
      await appendOnly(unbounded, 'all', keep);
      sizes.push(await relationMb(admin, 'rheo'));
      grown = await relationMb(admin, 'rheo_unbounded');
      log(
        `  retention window ${w + 1}/${windows} at ${((now() - t0) / 1000).toFixed(0)} s: events table + indexes ` +
          `${sizes[w]!.toFixed(1)} MB with retention, ${grown.toFixed(1)} MB without`,
      );
    }
    const first = sizes[0]!;
    const last = sizes[sizes.length - 1]!;
    ctx.record(RETENTION, RETENTION_CASES.size(`with retention after window 1 (${keep} events kept)`), 'MB', first);
    ctx.record(RETENTION, RETENTION_CASES.size(`with retention, max over ${windows} windows`), 'MB', Math.max(...sizes));
    ctx.record(RETENTION, RETENTION_CASES.size(`with retention after window ${windows}`), 'MB', last);
    ctx.record(RETENTION, RETENTION_CASES.size(`without retention after window ${windows}`), 'MB', grown);
    ctx.record(RETENTION, RETENTION_CASES.growth, 'x', last / first);
    ctx.notes.push(
      `Retention storage: ${windows} windows of ${keep} events appended and consumed on a stream keeping ${keep} per partition, ` +
        `trimmed after each window; autovacuum with the server's settings. Every sample is in the log.`,
    );
  } finally {
    await admin.end();
    await unbounded.close();
    await rheo.close();
  }
}

/** Bytes of a schema's events table with its indexes and TOAST, in MB. */
async function relationMb(admin: pg.Client, schema: string): Promise<number> {
  const { rows } = await admin.query<{ total: string }>(`SELECT pg_total_relation_size($1::regclass) AS total`, [`${schema}.events`]);
  return Number(rows[0]!.total) / 1024 / 1024;
}

async function appendAndConsume(rheo: Rheo, stream: string, group: string, count: number, offset: number): Promise<void> {
  let appended = 0;
  let consumed = 0;
  const appender = (async () => {
    while (appended < count) {
      const n = Math.min(100, count - appended);
      await rheo.appendBatch(stream, Array.from({ length: n }, (_, i) => ({ type: EVENT_TYPE, payload: payload(offset + appended + i) })));
      appended += n;
    }
  })();
  while (consumed < count) {
    const leases = await rheo.fetch(stream, group, { limit: 500, leaseMs: 60_000 });
    if (leases.length === 0) {
      await sleep(1);
      continue;
    }
    await rheo.ackMany(leases);
    consumed += leases.length;
  }
  await appender;
}

async function appendOnly(rheo: Rheo, stream: string, count: number): Promise<void> {
  for (let done = 0; done < count; done += 1000) {
    await rheo.appendBatch(stream, Array.from({ length: 1000 }, (_, i) => ({ type: EVENT_TYPE, payload: payload(done + i) })));
  }
}

async function throughputRun(ctx: BenchContext, url: string, run: number, trimming: boolean): Promise<number> {
  const count = ctx.size(60_000, 6_000);
  const rheo = await openRheo('postgres', { url });
  const stream = `tp-${run}-${trimming ? 'trim' : 'plain'}`;
  try {
    await rheo.createStream(stream, { retention: { maxEvents: 1000 } });
    await rheo.createGroup(stream, 'g');
    let done = false;
    let trims = 0;
    const trimmer = trimming
      ? (async () => {
          while (!done) {
            trims += (await rheo.trim(stream)).deleted > 0 ? 1 : 0;
            await sleep(50);
          }
        })()
      : Promise.resolve();
    const t0 = now();
    await appendAndConsume(rheo, stream, 'g', count, 0);
    const eps = rate(count, now() - t0);
    done = true;
    await trimmer;
    log(`  ${trimming ? 'with' : 'without'} trimming: ${Math.round(eps)} events/s appended and consumed${trimming ? ` (${trims} trims that deleted)` : ''}`);
    return eps;
  } finally {
    await rheo.close();
  }
}
