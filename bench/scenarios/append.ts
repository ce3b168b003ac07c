import { randomUUID } from 'node:crypto';

import pg from 'pg';

import type { BenchContext } from '../lib/context.js';
import { openRheo, type BackendKind } from '../lib/rheo-setup.js';
import { now, rate } from '../lib/stats.js';
import { EVENT_TYPE, inChunks, payload } from '../lib/workload.js';

export const APPEND = '1 append';

/** Single appends/INSERTs stop after this long (or after their count), whichever comes first. */
const SINGLE_BUDGET_MS = 3000;

/**
 * Scenario 1: events/s for single `append` and `appendBatch` of 100, on the
 * memory backend and on PostgreSQL, next to the raw PostgreSQL ceiling: the
 * same rows written by a plain multi-row INSERT (and single-row INSERTs)
 * through `pg` into a table created `LIKE rheo.events INCLUDING ALL`, so the
 * ceiling maintains the same indexes rheo's log does.
 */
export async function appendScenario(ctx: BenchContext): Promise<void> {
  const sizes = {
    memorySingle: ctx.size(20_000, 2_000),
    memoryBatch: ctx.size(100_000, 10_000),
    pgSingle: ctx.size(3_000, 300),
    pgBatch: ctx.size(30_000, 3_000),
  };
  await appendRuns(ctx, 'memory', undefined, sizes.memorySingle, sizes.memoryBatch);
  if (!ctx.pg) return ctx.skip(`${APPEND} (PostgreSQL)`, 'no database');

  const url = await ctx.pg.createDatabase('rheo_bench_append');
  try {
    await appendRuns(ctx, 'postgres', url, sizes.pgSingle, sizes.pgBatch);
    await rawCeiling(ctx, url, sizes.pgSingle, sizes.pgBatch);
  } finally {
    await ctx.pg.dropDatabase('rheo_bench_append');
  }
}

async function appendRuns(
  ctx: BenchContext,
  kind: BackendKind,
  url: string | undefined,
  singles: number,
  batched: number,
): Promise<void> {
  const rheo = await openRheo(kind, { url });
  try {
    for (let run = 0; run < ctx.runs; run++) {
      const single = `append-single-${run}`;
      await rheo.createStream(single);
      let t0 = now();
      let written = 0;
      // Time-boxed: single commits wait for WAL flush (fsync stays on), which a busy disk can slow a lot.
      while (written < singles && now() - t0 < SINGLE_BUDGET_MS) {
        await rheo.append(single, { type: EVENT_TYPE, payload: payload(written++) });
      }
      ctx.record(APPEND, `rheo ${kind} append (single)`, 'events/s', rate(written, now() - t0));

      const batch = `append-batch-${run}`;
      await rheo.createStream(batch);
      t0 = now();
      await inChunks(batched, 100, async (start, end) => {
        const inputs = [];
        for (let i = start; i < end; i++) inputs.push({ type: EVENT_TYPE, payload: payload(i) });
        await rheo.appendBatch(batch, inputs);
      });
      ctx.record(APPEND, `rheo ${kind} appendBatch(100)`, 'events/s', rate(batched, now() - t0));
    }
  } finally {
    await rheo.close();
  }
}

/**
 * The same rows rheo writes (text id, type, null key, jsonb payload and
 * metadata, partition, sequence, timestamp) into a copy of rheo's events table
 * with the same indexes, through `pg`, one autocommit statement per batch.
 * rheo's migration has already created `rheo.events` in this database.
 */
async function rawCeiling(ctx: BenchContext, url: string, singles: number, batched: number): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('create table public.raw_events (like rheo.events including all)');
    let sequence = 0;
    const row = (i: number): unknown[] => [
      1,
      0,
      ++sequence,
      randomUUID(),
      EVENT_TYPE,
      null,
      JSON.stringify(payload(i)),
      '{}',
      new Date().toISOString(),
    ];
    const columns = '(stream_id, partition, sequence, id, type, key, payload, metadata, ts)';
    const single = `insert into public.raw_events ${columns} values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`;
    const valuesFor = (rows: number): string => {
      const tuples = [];
      for (let r = 0; r < rows; r++) {
        const b = r * 9;
        tuples.push(`($${b + 1}, $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $${b + 6}, $${b + 7}, $${b + 8}, $${b + 9})`);
      }
      return `insert into public.raw_events ${columns} values ${tuples.join(', ')}`;
    };
    const multi100 = valuesFor(100);
    for (let run = 0; run < ctx.runs; run++) {
      let t0 = now();
      let written = 0;
      while (written < singles && now() - t0 < SINGLE_BUDGET_MS) await client.query(single, row(written++));
      ctx.record(APPEND, 'raw pg single-row INSERT', 'rows/s', rate(written, now() - t0));

      t0 = now();
      await inChunks(batched, 100, async (start, end) => {
        const params: unknown[] = [];
        for (let i = start; i < end; i++) params.push(...row(i));
        await client.query(end - start === 100 ? multi100 : valuesFor(end - start), params);
      });
      ctx.record(APPEND, 'raw pg multi-row INSERT(100)', 'rows/s', rate(batched, now() - t0));
    }
  } finally {
    await client.end();
  }
}
