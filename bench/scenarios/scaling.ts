import pg from 'pg';

import type { Rheo } from '../../src/index.js';
import { log, type BenchContext } from '../lib/context.js';
import { fill, openRheo, type BackendKind } from '../lib/rheo-setup.js';
import { now, percentile, rate } from '../lib/stats.js';

export const SCALING = '5 scaling';

export function scalingCase(kind: BackendKind, what: string): string {
  return `rheo ${kind} ${what}`;
}

const FETCH_LIMIT = 100;

/**
 * Scenario 5: does the cost of fetch + ack grow with the log or with the
 * dead-letter set? A fresh group drains `measured` events with fetch(100) +
 * ackMany from:
 *  - small: a stream of 1,000 events (several fresh groups, 1,000 each);
 *  - large: a stream of 1,000,000 events (the first `measured` of them);
 *  - large + dead letters: the same stream, a group that first dead-letters
 *    10,000 events (fetch + rejectMany), then drains the next `measured`.
 * The million is loaded with `appendBatch` in chunks of 10,000 (the public
 * API; fast enough that no bulk SQL path is needed), then VACUUM ANALYZE
 * (what autovacuum would do shortly after such a load).
 */
export async function scalingScenario(ctx: BenchContext): Promise<void> {
  const large = ctx.size(1_000_000, 100_000);
  const deadLetters = ctx.size(10_000, 2_000);
  const measured = ctx.size(10_000, 2_000);
  await scalingRuns(ctx, 'memory', undefined, { large, deadLetters, measured });
  if (!ctx.pg) return ctx.skip(`${SCALING} (PostgreSQL)`, 'no database');
  const url = await ctx.pg.createDatabase('rheo_bench_scaling');
  try {
    await scalingRuns(ctx, 'postgres', url, { large, deadLetters, measured });
  } finally {
    await ctx.pg.dropDatabase('rheo_bench_scaling');
  }
}

interface Sizes {
  large: number;
  deadLetters: number;
  measured: number;
}

async function scalingRuns(ctx: BenchContext, kind: BackendKind, url: string | undefined, sizes: Sizes): Promise<void> {
  const rheo = await openRheo(kind, { url });
  try {
    await rheo.createStream('small');
    await fill(rheo, 'small', 1000);
    await rheo.createStream('large');
    const t0 = now();
    await fill(rheo, 'large', sizes.large, 10_000);
    const loadRate = rate(sizes.large, now() - t0);
    ctx.record(SCALING, scalingCase(kind, `load ${sizes.large.toLocaleString('en-US')} events (appendBatch 10,000)`), 'events/s', loadRate);
    log(`    ${kind}: loaded ${sizes.large} events at ${Math.round(loadRate)} events/s`);
    if (url) await vacuumAnalyze(url);

    const smallName = scalingCase(kind, '1k backlog');
    const largeName = scalingCase(kind, `${sizes.large / 1000}k backlog`);
    const dlName = scalingCase(kind, `${sizes.large / 1000}k backlog + ${sizes.deadLetters.toLocaleString('en-US')} dead letters`);
    let group = 0;
    for (let run = 0; run < ctx.runs; run++) {
      // small: fresh groups over the 1,000-event stream until `measured` events are drained.
      const small: Drain = { events: 0, ms: 0, fetchMs: [] };
      while (small.events < sizes.measured) {
        const g = `g${group++}`;
        await rheo.createGroup('small', g);
        await drain(rheo, 'small', g, Math.min(1000, sizes.measured - small.events), small);
      }
      recordDrain(ctx, smallName, small);

      const g = `g${group++}`;
      await rheo.createGroup('large', g);
      const big: Drain = { events: 0, ms: 0, fetchMs: [] };
      await drain(rheo, 'large', g, sizes.measured, big);
      recordDrain(ctx, largeName, big);

      const d = `g${group++}`;
      await rheo.createGroup('large', d);
      let rejected = 0;
      while (rejected < sizes.deadLetters) {
        const leases = await rheo.fetch('large', d, { limit: Math.min(1000, sizes.deadLetters - rejected) });
        await rheo.rejectMany(leases, 'bench dead letter');
        rejected += leases.length;
      }
      const withDl: Drain = { events: 0, ms: 0, fetchMs: [] };
      await drain(rheo, 'large', d, sizes.measured, withDl);
      recordDrain(ctx, dlName, withDl);
    }
  } finally {
    await rheo.close();
  }
}

interface Drain {
  events: number;
  ms: number;
  fetchMs: number[];
}

async function drain(rheo: Rheo, stream: string, group: string, count: number, into: Drain): Promise<void> {
  let done = 0;
  const t0 = now();
  while (done < count) {
    const f0 = now();
    const leases = await rheo.fetch(stream, group, { limit: Math.min(FETCH_LIMIT, count - done) });
    into.fetchMs.push(now() - f0);
    if (leases.length === 0) throw new Error(`${stream}/${group}: ran out of events after ${done}`);
    await rheo.ackMany(leases);
    done += leases.length;
  }
  into.ms += now() - t0;
  into.events += done;
}

function recordDrain(ctx: BenchContext, name: string, d: Drain): void {
  ctx.record(SCALING, `${name}: fetch(${FETCH_LIMIT})+ackMany`, 'events/s', rate(d.events, d.ms));
  ctx.record(SCALING, `${name}: fetch p99`, 'ms', percentile(d.fetchMs, 99));
}

async function vacuumAnalyze(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('vacuum (analyze) rheo.events');
    await client.query('vacuum (analyze) rheo.deliveries');
  } finally {
    await client.end();
  }
}
