import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { pgliteBackend } from '../../src/pglite.js';
import { createRheo, type Rheo } from '../../src/index.js';
import type { BenchContext } from '../lib/context.js';
import { caughtUp, fill, openRheo } from '../lib/rheo-setup.js';
import { now, rate, waitUntil } from '../lib/stats.js';
import { EVENT_TYPE, payload } from '../lib/workload.js';
import { drainWithConsume } from './consume.js';
import { rheoLatency } from './redis.js';

export const EMBEDDED = '10 memory, PGlite, PostgreSQL';

const SETTING = { maxDemand: 500, concurrency: 50 } as const;
const PARTITIONS = 4;

export const EMBEDDED_KINDS = ['memory', 'pglite', 'postgres'] as const;
type Kind = (typeof EMBEDDED_KINDS)[number];

export const EMBEDDED_CASES = {
  append: (kind: Kind) => `${kind}: append, one event per call`,
  appendBatch: (kind: Kind) => `${kind}: appendBatch × 1000`,
  consumeLeases: (kind: Kind) => `${kind}: rheo.consume, leases (maxDemand ${SETTING.maxDemand}, concurrency ${SETTING.concurrency})`,
  consumePartitions: (kind: Kind) => `${kind}: rheo.consume, assignment partitions (${PARTITIONS} partitions)`,
  latency: (kind: Kind) => `${kind}: idle append → handler p50`,
} as const;

/**
 * Scenario 10: what durability costs, on the three backends a single
 * process can use, in one run: memory (nothing survives the process),
 * PGlite (PostgreSQL in this process, on a data directory in the temp
 * directory) and a PostgreSQL server. The same cases on each: single
 * appends, appendBatch of 1000, a drain with `rheo.consume` in both modes
 * (competing leases and partition ownership), and the idle latency from an
 * append to its handler.
 */
export async function embeddedScenario(ctx: BenchContext): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'rheo-bench-pglite-'));
  const url = ctx.pg ? await ctx.pg.createDatabase('rheo_bench_embedded') : null;
  if (!url) ctx.skip(`${EMBEDDED} (PostgreSQL)`, 'no database');
  ctx.notes.push('PGlite: @electric-sql/pglite in this process, data directory in the temp directory (PGlite runs PostgreSQL with fsync off).');
  try {
    for (const kind of EMBEDDED_KINDS) {
      if (kind === 'postgres' && !url) continue;
      let rheo: Rheo;
      if (kind === 'pglite') {
        const t0 = now();
        rheo = createRheo({ backend: pgliteBackend({ dataDir: join(dir, 'data') }) });
        await rheo.migrate();
        ctx.record(EMBEDDED, 'pglite: open a new data directory and migrate', 'ms', now() - t0);
      } else {
        rheo = await openRheo(kind, { url: url ?? undefined });
      }
      try {
        await runCases(ctx, rheo, kind);
      } finally {
        await rheo.close();
      }
    }
  } finally {
    if (url) await ctx.pg!.dropDatabase('rheo_bench_embedded');
    rmSync(dir, { recursive: true, force: true });
  }
}

async function runCases(ctx: BenchContext, rheo: Rheo, kind: Kind): Promise<void> {
  const events = ctx.size(20_000, 2_000);
  const singles = ctx.size(2_000, 200);
  for (let run = 0; run < ctx.runs; run++) {
    const stream = `e${run}`;
    await rheo.createStream(stream, { partitions: PARTITIONS });
    await rheo.createGroup(stream, 'leases');
    await rheo.createGroup(stream, 'partitions');

    let t0 = now();
    for (let i = 0; i < singles; i++) await rheo.append(stream, { type: EVENT_TYPE, key: `k${i % 64}`, payload: payload(i) });
    ctx.record(EMBEDDED, EMBEDDED_CASES.append(kind), 'events/s', rate(singles, now() - t0));

    t0 = now();
    await fill(rheo, stream, events - singles, 1000, singles);
    ctx.record(EMBEDDED, EMBEDDED_CASES.appendBatch(kind), 'events/s', rate(events - singles, now() - t0));

    ctx.record(EMBEDDED, EMBEDDED_CASES.consumeLeases(kind), 'events/s', await drainWithConsume(rheo, { stream, group: 'leases' }, events, SETTING));
    ctx.record(EMBEDDED, EMBEDDED_CASES.consumePartitions(kind), 'events/s', await drainPartitions(rheo, stream, events));
    ctx.record(EMBEDDED, EMBEDDED_CASES.latency(kind), 'ms', (await rheoLatency(rheo, `lat${run}`, ctx.size(100, 20))).p50);
  }
}

async function drainPartitions(rheo: Rheo, stream: string, events: number): Promise<number> {
  let handled = 0;
  const t0 = now();
  const consumer = rheo.consume({
    stream,
    group: 'partitions',
    assignment: 'partitions',
    handler: () => {
      handled++;
    },
  });
  await waitUntil('partition handlers', () => handled >= events, 300_000, 1);
  await waitUntil('partition frontier', () => caughtUp(rheo, stream, 'partitions'), 60_000, 1);
  const elapsed = now() - t0;
  await consumer.stop();
  return rate(events, elapsed);
}
