/**
 * `npx tsx bench/processes.ts [--quick] [--runs=N]`: issue 11's scaling with
 * processes on PostgreSQL, both consumption modes, in one run on one server:
 *  - competing consumers (`rheo.consume` without `assignment`): 1 and 2
 *    member processes drain the same 8-partition backlog (a group started
 *    past the backlog, members started and idle, then `resetGroup` to the
 *    start; the clock stops at lag 0);
 *  - partition mode next to the raw log ceiling: scenario 7 (`partitions`).
 * Prints every metric and the same-run ratios; writes no results file.
 * `--competing-only` / `--partitions-only` run one half.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

import type { Rheo } from '../src/index.js';
import { BenchContext, log, pgAccess, summarize } from './lib/context.js';
import { openRheo } from './lib/rheo-setup.js';
import { formatNumber, median, now, rate, sleep, waitUntil } from './lib/stats.js';
import { inChunks, payload, EVENT_TYPE } from './lib/workload.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../scripts/throwaway-postgres.js';
import { PARTITIONS, PARTITION_CASES, partitionsScenario } from './scenarios/partitions.js';

const COMPETING = 'competing consumers';
const PARTITION_COUNT = 8;
const DEMAND = 100;
const MEMBER = fileURLToPath(new URL('./lib/competing-member.ts', import.meta.url));
const caseOf = (processes: number) => `rheo competing consumers, ${processes} process(es) (maxDemand ${DEMAND}, concurrency 16)`;

const quick = process.argv.includes('--quick');
const runsArg = process.argv.find((a) => a.startsWith('--runs='));
const runs = runsArg ? Number(runsArg.slice('--runs='.length)) : quick ? 1 : 3;
const skipPartitions = process.argv.includes('--competing-only');
const skipCompeting = process.argv.includes('--partitions-only');

/**
 * Samples pg_stat_activity every 10 ms while a drain runs: the share of the
 * database's active backends waiting on a heavyweight lock (issue 11 saw
 * fetches queue on `transactionid`/`tuple` locks of the cursor rows).
 */
function sampleWaits(url: string): { stop(): Promise<number> } {
  const client = new pg.Client({ connectionString: url });
  let running = true;
  let locked = 0;
  let active = 0;
  const loop = (async () => {
    await client.connect();
    while (running) {
      const { rows } = await client.query<{ locked: number; active: number }>(
        `SELECT count(*) FILTER (WHERE wait_event_type = 'Lock')::int AS locked, count(*)::int AS active
         FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()`,
      );
      locked += rows[0]!.locked;
      active += rows[0]!.active;
      await sleep(10);
    }
    await client.end();
  })();
  let result: Promise<number> | null = null;
  return {
    stop() {
      running = false;
      result ??= loop.then(() => (active === 0 ? 0 : locked / active));
      return result;
    },
  };
}

async function drainCompeting(
  rheo: Rheo,
  url: string,
  stream: string,
  group: string,
  events: number,
  processes: number,
): Promise<{ rate: number; lockShare: number }> {
  await rheo.createGroup(stream, group, { startAfter: events / PARTITION_COUNT });
  const children: ChildProcess[] = [];
  try {
    for (let i = 0; i < processes; i++) {
      children.push(spawn(process.execPath, ['--import', 'tsx', MEMBER, url, stream, group, String(DEMAND)], { stdio: ['ignore', 'ignore', 'inherit'] }));
    }
    // Let the members start and go idle (nothing to fetch past the backlog).
    await sleep(3_000);
    const sampler = sampleWaits(url);
    const t0 = now();
    try {
      await rheo.resetGroup(stream, group, { confirm: true, startAfter: 0 });
      await waitUntil('the members to drain', async () => (await rheo.lag(stream, group)).lag === 0, 300_000, 2);
      return { rate: rate(events, now() - t0), lockShare: await sampler.stop() };
    } finally {
      await sampler.stop();
    }
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve(null) : c.once('exit', resolve)))));
  }
}

let cluster: ThrowawayPostgres | null = null;
try {
  const given = process.env.RHEO_BENCH_DATABASE_URL;
  if (!given) {
    log('starting a throwaway PostgreSQL on 127.0.0.1 ...');
    cluster = await startThrowawayPostgres({ durable: true, label: 'rheo-bench-pg', settings: ['max_connections=200', 'max_wal_size=4GB'] });
  }
  const pg = await pgAccess(given ?? cluster!.url());
  log(`${pg.version}; ${runs} run(s)${quick ? ', quick sizes' : ''}`);
  const ctx = new BenchContext({ quick, runs, only: null }, pg);

  const events = ctx.size(100_000, 20_000);
  const url = await pg.createDatabase('rheo_bench_processes');
  const rheo = await openRheo('postgres', { url });
  try {
    for (let run = 0; run < (skipCompeting ? 0 : runs); run++) {
      const stream = `c${run}`;
      await rheo.createStream(stream, { partitions: PARTITION_COUNT });
      await inChunks(events, 5_000, async (start, end) => {
        const inputs = [];
        for (let i = start; i < end; i++) inputs.push({ type: EVENT_TYPE, partition: i % PARTITION_COUNT, payload: payload(i) });
        await rheo.appendBatch(stream, inputs);
      });
      for (const processes of [1, 2]) {
        const r = await drainCompeting(rheo, url, stream, `g${run}p${processes}`, events, processes);
        ctx.record(COMPETING, caseOf(processes), 'events/s', r.rate);
        ctx.record(COMPETING, `${caseOf(processes)}: active backends waiting on a lock`, 'x', r.lockShare);
      }
      log(`    run ${run + 1}: ${[1, 2].map((p) => Math.round(ctx.get(COMPETING, caseOf(p))!.samples[run]!)).join(' / ')} events/s (1 / 2 processes)`);
    }
  } finally {
    await rheo.close();
    await pg.dropDatabase('rheo_bench_processes');
  }
  if (!skipPartitions) await partitionsScenario(ctx);

  for (const m of [...ctx.metrics.values()].map(summarize)) {
    process.stdout.write(`${m.name}: median ${formatNumber(m.median)} ${m.unit} (min ${formatNumber(m.min)}, max ${formatNumber(m.max)}, n=${m.samples.length})\n`);
  }
  const ratio = (label: string, scenario: string, top: string, bottom: string): void => {
    const a = ctx.get(scenario, top);
    const b = ctx.get(scenario, bottom);
    if (!a || !b) return;
    const ratios = a.samples.map((x, i) => x / b.samples[i]!);
    process.stdout.write(`${label}: ${median(ratios).toFixed(2)}× (per run ${ratios.map((r) => r.toFixed(2)).join(', ')})\n`);
  };
  ratio('competing: 2 processes / 1 process', COMPETING, caseOf(2), caseOf(1));
  ratio('partitions: 2 processes / 1 process', PARTITIONS, PARTITION_CASES.two, PARTITION_CASES.one);
  ratio('partitions: 1 process / raw ceiling', PARTITIONS, PARTITION_CASES.one, PARTITION_CASES.raw);
} finally {
  cluster?.stop();
}
