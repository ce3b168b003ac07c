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
  growthOf: (variant: string) => `size at the end ÷ size after the first window (with retention; ${variant})`,
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
 * would (batches of 10,000, not forced), three times: with autovacuum as
 * the server has it, with autovacuum off for every table of the schema, and
 * with a REPEATABLE READ snapshot held open for the whole run (RETENTION_VARIANTS).
 * The size of every segment of the events table (heap + indexes + TOAST,
 * `pg_partition_tree`) is sampled after every window; the target is the
 * last ÷ the first ≤ 2 under each. Without trimming the same run grows linearly.
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

/**
 * The storage run under three conditions, each in a schema of its own: autovacuum with the server's
 * settings; autovacuum off for every table of rheo's schema (the log's segments included, as they are
 * opened); and a REPEATABLE READ snapshot held open on another connection for the whole run, which keeps
 * VACUUM from removing any row version deleted after it.
 */
export const RETENTION_VARIANTS = ['autovacuum on', 'autovacuum off for the log tables', 'snapshot held open'] as const;
type RetentionVariant = (typeof RETENTION_VARIANTS)[number];

async function storageRun(ctx: BenchContext, url: string): Promise<void> {
  const keep = ctx.size(50_000, 5_000);
  const windows = ctx.size(24, 6);
  // The contrast: the same appends without retention, in a schema (an events table) of its own.
  const unbounded = createRheo({ backend: postgresBackend({ connectionString: url }, { schema: 'rheo_unbounded' }), retention: { enabled: false } });
  await unbounded.migrate();
  await unbounded.createStream('all');
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    for (const [v, variant] of RETENTION_VARIANTS.entries()) {
      await variantRun(ctx, url, admin, variant, `rheo_kept_${v}`, keep, windows, v === 0 ? unbounded : null);
    }
    ctx.notes.push(
      `Retention storage: ${windows} windows of ${keep} events appended and consumed on a stream keeping ${keep} per partition, ` +
        `trimmed after each window, under each of: ${RETENTION_VARIANTS.join('; ')}. Sizes are every segment of the events table ` +
        'with its indexes and TOAST (pg_partition_tree); every sample is in the log.',
    );
  } finally {
    await admin.end();
    await unbounded.close();
  }
}

async function variantRun(
  ctx: BenchContext,
  url: string,
  admin: pg.Client,
  variant: RetentionVariant,
  schema: string,
  keep: number,
  windows: number,
  unbounded: Rheo | null,
): Promise<void> {
  const rheo = createRheo({ backend: postgresBackend({ connectionString: url }, { schema }), retention: { enabled: false } });
  await rheo.migrate();
  let holder: pg.Client | null = null;
  try {
    await rheo.createStream('kept', { retention: { maxEvents: keep } });
    await rheo.createGroup('kept', 'g');
    if (variant === 'snapshot held open') {
      holder = new pg.Client({ connectionString: url });
      await holder.connect();
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query('SELECT count(*) FROM pg_catalog.pg_class');
    }
    const sizes: number[] = [];
    let grown = 0;
    const t0 = now();
    for (let w = 0; w < windows; w++) {
      if (variant === 'autovacuum off for the log tables') await autovacuumOff(admin, schema);
      await appendAndConsume(rheo, 'kept', 'g', keep, w * keep);
      await rheo.trim('kept');
      sizes.push(await logMb(admin, schema));
      if (unbounded) {
        await appendOnly(unbounded, 'all', keep);
        grown = await logMb(admin, 'rheo_unbounded');
      }
      log(
        `  retention (${variant}) window ${w + 1}/${windows} at ${((now() - t0) / 1000).toFixed(0)} s: events + indexes ` +
          `${sizes[w]!.toFixed(1)} MB with retention${unbounded ? `, ${grown.toFixed(1)} MB without` : ''}`,
      );
    }
    const first = sizes[0]!;
    const last = sizes[sizes.length - 1]!;
    ctx.record(RETENTION, RETENTION_CASES.size(`with retention after window 1 (${keep} events kept; ${variant})`), 'MB', first);
    ctx.record(RETENTION, RETENTION_CASES.size(`with retention, max over ${windows} windows (${variant})`), 'MB', Math.max(...sizes));
    ctx.record(RETENTION, RETENTION_CASES.size(`with retention after window ${windows} (${variant})`), 'MB', last);
    ctx.record(RETENTION, RETENTION_CASES.growthOf(variant), 'x', last / first);
    if (unbounded) ctx.record(RETENTION, RETENTION_CASES.size(`without retention after window ${windows}`), 'MB', grown);
  } finally {
    await holder?.end().catch(() => {});
    await rheo.close();
  }
}

/** Autovacuum off for every table of the schema, the segments opened since the last call included. */
async function autovacuumOff(admin: pg.Client, schema: string): Promise<void> {
  const { rows } = await admin.query<{ name: string }>(
    `SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind = 'r' AND NOT coalesce(c.reloptions @> ARRAY['autovacuum_enabled=false'], false)`,
    [schema],
  );
  for (const { name } of rows) await admin.query(`ALTER TABLE ${name} SET (autovacuum_enabled = false)`);
}

/** Bytes of a schema's events table, every segment with its indexes and TOAST, in MB. */
async function logMb(admin: pg.Client, schema: string): Promise<number> {
  const { rows } = await admin.query<{ total: string }>(
    `SELECT coalesce(sum(pg_total_relation_size(relid)), 0) AS total FROM pg_partition_tree($1::regclass)`,
    [`${schema}.events`],
  );
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
