/**
 * `npm run bench`: measures rheo next to graphile-worker and pg-boss on one
 * PostgreSQL, in one run, and writes bench/results/latest.{json,md,svg}.
 *
 *   npm run bench                      # full run (about an hour on 2 cores: the held-horizon and retention cases are long on purpose)
 *   npm run bench -- --quick           # smoke run with small sizes (or RHEO_BENCH_QUICK=1)
 *   npm run bench -- --only=append,peers --runs=5
 *   npm run bench -- --quick --only=embedded   # memory, PGlite and PostgreSQL side by side
 *   npm run bench -- --quick --only=redis --out=/tmp/rheo-bench   # results elsewhere (partial runs)
 *   npm run bench -- --quick --only=processes   # scaling with member processes, PostgreSQL and Redis (also writes processes-latest.md)
 *
 * Without RHEO_BENCH_DATABASE_URL it starts a throwaway PostgreSQL 15 on
 * 127.0.0.1 (default durability) and removes it afterwards. With it, the URL
 * must allow CREATE DATABASE: every scenario gets its own database, dropped
 * at the end.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, platform, release } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { BenchContext, log, pgAccess, type MetricSummary, type PgAccess } from './lib/context.js';
import { quietMachine } from './lib/cpu.js';
import { BUNDLE_ENV } from './lib/rheo-entry.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../scripts/throwaway-postgres.js';
import { markdownSummary, svgChart, textTable, type Bar, type Environment, type TargetCheck } from './lib/report.js';
import { formatNumber } from './lib/stats.js';
import { APPEND, appendScenario } from './scenarios/append.js';
import { EMBEDDED, embeddedScenario } from './scenarios/embedded.js';
import { CONSUME, CONSUME_SETTINGS, EFFECT_SETTING, consumeCase, consumeScenario, effectCase, fetchLoopCase, producerCase } from './scenarios/consume.js';
import { HORIZON, HORIZON_CASES, horizonScenario } from './scenarios/horizon.js';
import { LATENCY, LATENCY_CASES, idleCase, latencyScenario } from './scenarios/latency.js';
import { PARTITIONS, PARTITION_CASES, partitionsScenario } from './scenarios/partitions.js';
import { PEERS, PEER_CASES, peersScenario } from './scenarios/peers.js';
import {
  BACKENDS as PROCESS_BACKENDS,
  CPU_GROWTH_TARGET,
  MODES as PROCESS_MODES,
  PROCESSES,
  PROCESS_CASES,
  SCALING_TARGET,
  processesLimits,
  processesMarkdown,
  processesScenario,
} from './scenarios/processes.js';
import { REDIS, REDIS_CASES, REDIS_SETTING, redisScenario } from './scenarios/redis.js';
import { RETENTION, RETENTION_CASES, RETENTION_VARIANTS, retentionScenario } from './scenarios/retention.js';
import { SCALING, scalingCase, scalingScenario } from './scenarios/scaling.js';
import { STREAMS, STREAMS_CASES, streamsScenario } from './scenarios/streams.js';

const here = dirname(fileURLToPath(import.meta.url));

const SCENARIOS: Array<{ id: string; run: (ctx: BenchContext) => Promise<void> }> = [
  { id: 'streams', run: streamsScenario },
  { id: 'append', run: appendScenario },
  { id: 'consume', run: consumeScenario },
  { id: 'peers', run: peersScenario },
  { id: 'latency', run: latencyScenario },
  { id: 'scaling', run: scalingScenario },
  { id: 'redis', run: redisScenario },
  { id: 'retention', run: retentionScenario },
  { id: 'horizon', run: horizonScenario },
  { id: 'partitions', run: partitionsScenario },
  { id: 'embedded', run: embeddedScenario },
  { id: 'processes', run: processesScenario },
];

/** The scenarios that start member processes (bench/lib/*-member.ts). */
const MEMBER_SCENARIOS = new Set(['partitions', 'processes']);

/**
 * Builds the bundle (`npm run build`) for the member processes and names it
 * in RHEO_BENCH_BUNDLE, which they inherit (bench/lib/rheo-entry.ts). With
 * RHEO_BENCH_SOURCE=1, or when the build fails, they run the sources
 * through tsx instead. Returns whether they run the bundle.
 */
function buildBundle(): boolean {
  if (process.env.RHEO_BENCH_SOURCE === '1') return false;
  const root = fileURLToPath(new URL('..', import.meta.url));
  try {
    log('building the bundle for member processes (npm run build) ...');
    execFileSync('npx', ['tsup'], { cwd: root, stdio: 'ignore' });
    process.env[BUNDLE_ENV] = join(root, 'dist');
    return true;
  } catch (error) {
    log(`  the build failed, members run the sources: ${(error as Error).message}`);
    return false;
  }
}

function parseArgs(argv: string[]): { quick: boolean; runs: number | null; only: Set<string> | null; out: string } {
  let quick = ['1', 'true', 'yes'].includes((process.env.RHEO_BENCH_QUICK ?? '').toLowerCase());
  let runs: number | null = null;
  let only: Set<string> | null = null;
  let out = join(here, 'results');
  for (const arg of argv) {
    if (arg === '--quick') quick = true;
    else if (arg.startsWith('--runs=')) runs = Number(arg.slice('--runs='.length));
    else if (arg.startsWith('--out=')) out = resolve(arg.slice('--out='.length));
    else if (arg.startsWith('--only=')) only = new Set(arg.slice('--only='.length).split(',').filter(Boolean));
    else if (arg === '--help' || arg === '-h') {
      process.stdout.write('usage: npm run bench -- [--quick] [--runs=N] [--only=streams,append,consume,peers,latency,scaling,redis,retention,horizon,partitions,embedded,processes] [--out=DIR]\n');
      process.exit(0);
    } else throw new Error(`unknown argument ${arg}`);
  }
  if (runs !== null && !(Number.isInteger(runs) && runs >= 1)) throw new Error('--runs must be a positive integer');
  if (only) {
    for (const id of only) {
      if (!SCENARIOS.some((s) => s.id === id)) throw new Error(`unknown scenario ${id}`);
    }
  }
  return { quick, runs, only, out };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const runs = args.runs ?? (args.quick ? 1 : 3);
  const started = Date.now();
  const loadAverage = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

  let cluster: ThrowawayPostgres | null = null;
  const stopCluster = async (): Promise<void> => {
    const c = cluster;
    cluster = null;
    c?.stop();
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    log(`\n${signal}: stopping the throwaway PostgreSQL`);
    void stopCluster().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    let pg: PgAccess | null = null;
    const givenUrl = process.env.RHEO_BENCH_DATABASE_URL;
    if (givenUrl) {
      log('using RHEO_BENCH_DATABASE_URL');
      pg = await pgAccess(givenUrl);
    } else {
      log('starting a throwaway PostgreSQL on 127.0.0.1 ...');
      // Default durability (fsync, synchronous_commit, full_page_writes stay
      // on): the point is to measure what users get. Room for three peers'
      // pools plus rheo's; bigger WAL between checkpoints so loading a
      // million-row log does not measure checkpoint storms.
      cluster = await startThrowawayPostgres({
        durable: true,
        label: 'rheo-bench-pg',
        settings: ['max_connections=200', 'max_wal_size=4GB'],
      });
      pg = await pgAccess(cluster.url());
    }
    log(`${pg.version}; ${runs} run(s) per case${args.quick ? ', quick sizes' : ''}`);

    const ctx = new BenchContext({ quick: args.quick, runs, only: args.only }, pg);
    if (SCENARIOS.some((s) => MEMBER_SCENARIOS.has(s.id) && (!args.only || args.only.has(s.id)))) {
      const bundle = buildBundle();
      if (bundle) ctx.notes.push('Member processes (partitions, processes) run the bundle `npm run build` made, as applications run rheo.');
    }
    for (const scenario of SCENARIOS) {
      if (args.only && !args.only.has(scenario.id)) continue;
      // Start each scenario on a quiet machine: the cluster may still be vacuuming what the last one drained.
      const busy = await quietMachine();
      const t0 = Date.now();
      log(`scenario ${scenario.id} ...${busy === null ? '' : ` (machine ${busy.toFixed(0)} % busy at the start)`}`);
      try {
        await scenario.run(ctx);
        log(`  done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      } catch (error) {
        // One broken scenario must not cost the others' numbers: report it and go on.
        const message = error instanceof Error ? error.message : String(error);
        ctx.skip(scenario.id, `failed after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${message}`);
        process.exitCode = 1;
      }
    }
    derive(ctx);

    const rows = ordered(ctx.summaries());
    const targets = checkTargets(ctx);
    const env: Environment = {
      date: new Date().toISOString(),
      command: `npm run bench${process.argv.length > 2 ? ` -- ${process.argv.slice(2).join(' ')}` : ''}`,
      quick: args.quick,
      runs,
      node: process.versions.node,
      postgres: pg.version,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model.trim() ?? 'unknown CPU',
      platform: `${platform()} ${release()}`,
      loadAverage,
      peers: peerVersions(),
      commit: gitCommit(),
    };
    ctx.notes.push(`Total bench time ${((Date.now() - started) / 1000).toFixed(0)} s.`);

    process.stdout.write(`\n${textTable(rows)}\n\nTargets (issues 6, 11, 12):\n`);
    for (const t of targets) {
      process.stdout.write(`  [${t.met === null ? 'n/a' : t.met ? 'met' : 'MISSED'}] ${t.target}: ${t.measured}\n`);
    }
    const limits = processesLimits(ctx);
    if (limits.length > 0) process.stdout.write(`\nWhat limits the missed process-scaling targets:\n${limits.map((l) => `  ${l}\n`).join('')}`);
    const outDir = args.out;
    mkdirSync(outDir, { recursive: true });
    writeFileSync(
      join(outDir, 'latest.json'),
      `${JSON.stringify({ environment: env, targets, metrics: rows, skipped: ctx.skipped, notes: ctx.notes }, null, 2)}\n`,
    );
    writeFileSync(join(outDir, 'latest.md'), markdownSummary(env, rows, targets, ctx.skipped, ctx.notes));
    writeFileSync(join(outDir, 'latest.svg'), chart(ctx, env));
    if ([...ctx.metrics.values()].some((m) => m.scenario === PROCESSES)) {
      writeFileSync(
        join(outDir, 'processes-latest.md'),
        processesMarkdown(
          ctx,
          `Run ${env.date} on rheo ${env.commit} with \`${env.command}\`${env.quick ? ' (quick: smaller backlogs, one run)' : ''}: ${env.cpus} × ${env.cpuModel}, ` +
            `${env.platform}, Node ${env.node}, ${env.postgres}. Load average at start: ${env.loadAverage}. ` +
            `The machine's ${env.cpus} cores are shared by the member processes, the database server and this process, and were shared with other work ` +
            'during the run: the figures are indicative.',
        ),
      );
    }
    process.stdout.write(`\nwrote ${join(outDir, 'latest.{json,md,svg}')} (${((Date.now() - started) / 1000).toFixed(0)} s)\n`);
  } finally {
    await stopCluster();
  }
}

/** Ratios computed per repetition (sample i with sample i), then summarised like any metric. */
function derive(ctx: BenchContext): void {
  const pair = (scenario: string, name: string, top: string, bottom: string): void => {
    const a = ctx.metrics.get(`${scenario}\u0000${top}`);
    const b = ctx.metrics.get(`${scenario}\u0000${bottom}`);
    if (!a || !b) return;
    const n = Math.min(a.samples.length, b.samples.length);
    for (let i = 0; i < n; i++) ctx.record(scenario, name, 'x', a.samples[i]! / b.samples[i]!);
  };
  pair(APPEND, 'rheo postgres appendBatch(100) ÷ raw multi-row INSERT(100)', 'rheo postgres appendBatch(100)', 'raw pg multi-row INSERT(100)');
  pair(APPEND, 'rheo postgres append ÷ raw single-row INSERT', 'rheo postgres append (single)', 'raw pg single-row INSERT');
  for (const kind of ['memory', 'postgres'] as const) {
    const names = [...ctx.metrics.values()].filter((m) => m.scenario === SCALING && m.name.startsWith(`rheo ${kind} `));
    const find = (part: string, metric: string): string | undefined =>
      names.find((m) => m.name.includes(part) && m.name.endsWith(metric))?.name;
    const small = find('1k backlog:', 'ackMany');
    const large = names.find((m) => m.name.endsWith('ackMany') && !m.name.includes('1k backlog:') && !m.name.includes('dead letters'))?.name;
    const dl = find('dead letters', 'ackMany');
    if (small && large) pair(SCALING, scalingCase(kind, 'large ÷ 1k backlog throughput'), large, small);
    if (large && dl) pair(SCALING, scalingCase(kind, 'with dead letters ÷ without throughput'), dl, large);
  }
  pair(PARTITIONS, PARTITION_DERIVED.oneVsRaw, PARTITION_CASES.one, PARTITION_CASES.raw);
  pair(PARTITIONS, PARTITION_DERIVED.twoVsOne, PARTITION_CASES.two, PARTITION_CASES.one);
  pair(PARTITIONS, PARTITION_DERIVED.competingTwoVsOne, PARTITION_CASES.competingTwo, PARTITION_CASES.competingOne);
  pair(PARTITIONS, PARTITION_DERIVED.oneVsQueue, PARTITION_CASES.one, PARTITION_CASES.rawQueue);
  pair(PARTITIONS, PARTITION_DERIVED.competingVsQueue, PARTITION_CASES.competingOne, PARTITION_CASES.rawQueue);
  // What exactly-once effects cost: the same handler write committed with the ack, over the same write committed apart.
  pair(CONSUME, CONSUME_DERIVED.transactionCost, effectCase(true), effectCase(false));
  pair(CONSUME, CONSUME_DERIVED.transactionVsPlain, effectCase(true), consumeCase('postgres', EFFECT_SETTING));
  // Competing consumers must not lose rate by spreading over partitions.
  for (const kind of ['memory', 'postgres'] as const) {
    for (const s of CONSUME_SETTINGS) {
      pair(CONSUME, CONSUME_DERIVED.spread(kind, s), consumeCase(kind, s, 8), consumeCase(kind, s));
    }
  }
  // Across scenarios: run i of each, both in this run on this server.
  const graphile = ctx.metrics.get(`${PEERS}\u0000${PEER_CASES.graphile}`);
  const one = ctx.metrics.get(`${PARTITIONS}\u0000${PARTITION_CASES.one}`);
  if (graphile && one) {
    const n = Math.min(graphile.samples.length, one.samples.length);
    for (let i = 0; i < n; i++) ctx.record(PARTITIONS, PARTITION_DERIVED.oneVsGraphile, 'x', one.samples[i]! / graphile.samples[i]!);
  }
  const competing = ctx.metrics.get(`${PARTITIONS}\u0000${PARTITION_CASES.competingOne}`);
  if (graphile && competing) {
    const n = Math.min(graphile.samples.length, competing.samples.length);
    for (let i = 0; i < n; i++) ctx.record(PARTITIONS, PARTITION_DERIVED.competingVsGraphile, 'x', competing.samples[i]! / graphile.samples[i]!);
  }
}

/** The consume setting the spread target reads (the widest one). */
const WIDE_SETTING = CONSUME_SETTINGS[CONSUME_SETTINGS.length - 1]!;

const CONSUME_DERIVED = {
  transactionCost: 'rheo postgres consume transaction: true ÷ the same insert committed apart (what the transaction costs)',
  transactionVsPlain: 'rheo postgres consume transaction: true (insert per event) ÷ plain no-op consume (maxDemand 100, concurrency 10)',
  spread: (kind: string, s: { maxDemand: number; concurrency: number }): string =>
    `rheo ${kind} rheo.consume on 8 partitions ÷ on 1 (maxDemand ${s.maxDemand}, concurrency ${s.concurrency})`,
};

const PARTITION_DERIVED = {
  oneVsRaw: 'partition mode, 1 process ÷ raw log ceiling',
  oneVsQueue: 'partition mode, 1 process ÷ raw SKIP LOCKED queue ceiling',
  competingVsQueue: 'competing mode, 1 process ÷ raw SKIP LOCKED queue ceiling',
  competingTwoVsOne: 'competing mode, 2 processes ÷ 1 process',
  twoVsOne: 'partition mode, 2 processes ÷ 1 process',
  oneVsGraphile: 'partition mode, 1 process ÷ graphile-worker',
  competingVsGraphile: 'competing mode, 1 process, 8 partitions ÷ graphile-worker',
};

const SCENARIO_ORDER = [APPEND, CONSUME, PEERS, LATENCY, SCALING, STREAMS, RETENTION, HORIZON, PARTITIONS, REDIS, EMBEDDED, PROCESSES];

function ordered(rows: MetricSummary[]): MetricSummary[] {
  return [...rows].sort((a, b) => SCENARIO_ORDER.indexOf(a.scenario) - SCENARIO_ORDER.indexOf(b.scenario));
}

function checkTargets(ctx: BenchContext): TargetCheck[] {
  const out: TargetCheck[] = [];
  const ratio = (target: string, scenario: string, name: string, atLeast: number): void => {
    const m = ctx.get(scenario, name);
    out.push({
      target,
      measured: m ? `${formatNumber(m.median)}× (min ${formatNumber(m.min)}×, max ${formatNumber(m.max)}×)` : 'not measured',
      met: m ? m.median >= atLeast : null,
    });
  };
  /** A median that must stay at or below a bound (µs, %). */
  const atMost = (target: string, scenario: string, name: string, bound: number, unit: string): void => {
    const m = ctx.get(scenario, name);
    out.push({
      target,
      measured: m ? `${formatNumber(m.median)} ${unit} (min ${formatNumber(m.min)}, max ${formatNumber(m.max)})` : 'not measured',
      met: m ? m.median <= bound : null,
    });
  };
  /** Both medians in ms from this run; met when the first is below the second. */
  const below = (target: string, scenario: string, mine: string, theirs: string): void => {
    const a = ctx.get(scenario, mine);
    const b = ctx.get(scenario, theirs);
    out.push({
      target,
      measured: a && b ? `${formatNumber(a.median)} ms vs ${formatNumber(b.median)} ms` : 'not measured',
      met: a && b ? a.median < b.median : null,
    });
  };
  ratio('PostgreSQL consume ≥ 3× graphile-worker', PEERS, PEER_CASES.vsGraphile, 3);
  ratio('PostgreSQL consume ≥ 10× pg-boss', PEERS, PEER_CASES.vsPgBoss, 10);
  ratio('Redis consume ≥ 0.5× the raw Lua-fenced XREADGROUP + XACK drain', REDIS, REDIS_CASES.consumeRatio, 0.5);
  ratio('Redis appendBatch ≥ 0.5× raw pipelined XADD', REDIS, REDIS_CASES.appendRatio, 0.5);
  ratio('Redis consume ≥ 3× BullMQ (its best concurrency)', REDIS, REDIS_CASES.vsBullmq, 3);
  ratio('Redis consume on 8 partitions ≥ 0.5× the raw Lua-fenced drain', REDIS, REDIS_CASES.consume8Ratio, 0.5);
  ratio('Redis consume on 8 partitions ≥ 3× BullMQ (its best concurrency)', REDIS, REDIS_CASES.vsBullmq8, 3);
  // Measured in turns with BullMQ (lib/rheo-setup.ts modesInTurnsWith), not one after the other.
  below('Redis idle latency p50 below BullMQ’s (competing, in turns)', REDIS, REDIS_CASES.latencyTurns, REDIS_CASES.bullmqLatencyTurns);
  below('Redis idle latency p50 below BullMQ’s (partition mode, in turns)', REDIS, REDIS_CASES.latencyPartitionsTurns, REDIS_CASES.bullmqLatencyTurns);
  ratio('appendBatch ≥ 0.5× raw multi-row INSERT', APPEND, 'rheo postgres appendBatch(100) ÷ raw multi-row INSERT(100)', 0.5);
  const p50 = ctx.get(LATENCY, `${LATENCY_CASES.notify} p50`);
  const p99 = ctx.get(LATENCY, `${LATENCY_CASES.notify} p99`);
  out.push({
    target: 'notify latency p50 < 5 ms',
    measured: p50 ? `${formatNumber(p50.median)} ms` : 'not measured',
    met: p50 ? p50.median < 5 : null,
  });
  out.push({
    target: 'notify latency p99 < 25 ms',
    measured: p99 ? `${formatNumber(p99.median)} ms` : 'not measured',
    met: p99 ? p99.median < 25 : null,
  });
  ratio('1M backlog throughput ≥ 0.75× 1k backlog (PostgreSQL)', SCALING, scalingCase('postgres', 'large ÷ 1k backlog throughput'), 0.75);
  ratio('dead letters do not slow fetch: ≥ 0.75× (PostgreSQL)', SCALING, scalingCase('postgres', 'with dead letters ÷ without throughput'), 0.75);
  ratio('memory end to end ≥ 0.4× bare streams', STREAMS, STREAMS_CASES.ratio, 0.4);
  ratio('append + consume while trimming ≥ 0.8× without (PostgreSQL)', RETENTION, RETENTION_CASES.ratio, 0.8);
  for (const variant of RETENTION_VARIANTS) {
    const m = ctx.get(RETENTION, RETENTION_CASES.growthOf(variant));
    out.push({
      target: `retention keeping one window: size after the last window ≤ 2× after the first (${variant})`,
      measured: m ? `${formatNumber(m.median)}× (min ${formatNumber(m.min)}×, max ${formatNumber(m.max)}×)` : 'not measured',
      met: m ? m.max <= 2 : null,
    });
  }
  ratio('competing mode, last drain with a held snapshot ≥ 0.8× without', HORIZON, HORIZON_CASES.ratio('competing'), 0.8);
  ratio('partition mode, last drain with a held snapshot ≥ 0.8× without', HORIZON, HORIZON_CASES.ratio('partitions'), 0.8);
  ratio('partition mode, 1 process ≥ 3× graphile-worker', PARTITIONS, PARTITION_DERIVED.oneVsGraphile, 3);
  ratio('partition mode, 1 process ≥ 0.7× raw log ceiling', PARTITIONS, PARTITION_DERIVED.oneVsRaw, 0.7);
  ratio('partition mode, 2 processes ≥ 1.6× 1 process', PARTITIONS, PARTITION_DERIVED.twoVsOne, 1.6);
  ratio('competing mode, 2 processes ≥ 1.6× 1 process', PARTITIONS, PARTITION_DERIVED.competingTwoVsOne, 1.6);
  // Measured in turns with graphile-worker (lib/rheo-setup.ts modesInTurnsWith).
  below('idle latency append → handler p50 below graphile-worker’s (PostgreSQL, competing, in turns)', LATENCY, `${LATENCY_CASES.notifyTurns} p50`, `${LATENCY_CASES.graphileTurns} p50`);
  below('idle latency append → handler p50 below graphile-worker’s (PostgreSQL, partition mode, in turns)', LATENCY, `${LATENCY_CASES.partitionsTurns} p50`, `${LATENCY_CASES.graphileTurns} p50`);
  ratio('competing mode on an 8-partition backlog ≥ 2× graphile-worker', PARTITIONS, PARTITION_DERIVED.competingVsGraphile, 2);
  ratio('competing mode on 8 partitions ≥ 0.9× on 1 (PostgreSQL, maxDemand 500)', CONSUME, CONSUME_DERIVED.spread('postgres', WIDE_SETTING), 0.9);
  ratio('competing mode on 8 partitions ≥ 0.9× on 1 (Redis)', REDIS, REDIS_CASES.spread, 0.9);
  atMost('competing mode client CPU per event ≤ 12 µs (8-partition drain, 1 process)', PARTITIONS, `${PARTITION_CASES.competingOne}: client CPU per event`, 12, 'µs');
  atMost('idle consumer < 1 % of a core (PostgreSQL, notifications)', LATENCY, idleCase(LATENCY_CASES.notify), 1, '%');
  atMost('idle consumer < 1 % of a core (PostgreSQL, partition mode)', LATENCY, idleCase(LATENCY_CASES.partitions), 1, '%');
  atMost('idle consumer < 1 % of a core (Redis)', REDIS, REDIS_CASES.idleCpu, 1, '%');
  atMost('idle consumer < 1 % of a core (Redis, partition mode)', REDIS, REDIS_CASES.idleCpuPartitions, 1, '%');
  // Scaling with member processes on I/O-bound handlers (10 ms timer, concurrency 10 per process).
  for (const kind of PROCESS_BACKENDS) {
    for (const mode of PROCESS_MODES) {
      const label = `${kind}, ${mode === 'competing' ? 'competing mode' : 'partition mode'}, 10 ms handlers`;
      ratio(`${label}: 2 processes ≥ ${SCALING_TARGET}× 1`, PROCESSES, PROCESS_CASES.doubling(kind, mode, 1), SCALING_TARGET);
      ratio(`${label}: 4 processes ≥ ${SCALING_TARGET}× 2`, PROCESSES, PROCESS_CASES.doubling(kind, mode, 2), SCALING_TARGET);
      atMost(`${label}: CPU per event (client + server) at 4 processes ≤ ${CPU_GROWTH_TARGET}× at 1`, PROCESSES, PROCESS_CASES.cpuGrowth(kind, mode), CPU_GROWTH_TARGET, '×');
    }
  }
  return out;
}

function chart(ctx: BenchContext, env: Environment): string {
  const bar = (scenario: string, name: string, label: string, kind: Bar['kind']): Bar[] => {
    const m = ctx.get(scenario, name);
    return m ? [{ label, value: m.median, min: m.min, max: m.max, kind }] : [];
  };
  const best = (kind: 'memory' | 'postgres', make: (k: 'memory' | 'postgres', s: (typeof CONSUME_SETTINGS)[number]) => string): string => {
    let name = make(kind, CONSUME_SETTINGS[0]);
    let value = -1;
    for (const s of CONSUME_SETTINGS) {
      const m = ctx.get(CONSUME, make(kind, s));
      if (m && m.median > value) {
        value = m.median;
        name = make(kind, s);
      }
    }
    return name;
  };
  const groups = [
    {
      title: 'Consume 20,000 events/jobs end to end on PostgreSQL (same database, same run)',
      bars: [
        ...bar(PEERS, PEER_CASES.rheo, 'rheo.consume (500/50)', 'rheo'),
        ...bar(PEERS, PEER_CASES.rheoTwo, '2 × rheo.consume (500/50 each)', 'rheo'),
        ...bar(CONSUME, best('postgres', producerCase), 'RheoProducer → lease sink (best)', 'rheo'),
        ...bar(CONSUME, fetchLoopCase('postgres', 500), 'rheo fetch(500) + ackMany loop', 'rheo'),
        ...bar(PEERS, PEER_CASES.graphile, 'graphile-worker (fast settings)', 'peer'),
        ...bar(PEERS, PEER_CASES.pgBoss, 'pg-boss (tuned batches)', 'peer'),
      ],
    },
    {
      title: 'Enqueue / append on PostgreSQL',
      bars: [
        ...bar(APPEND, 'rheo postgres appendBatch(100)', 'rheo appendBatch(100)', 'rheo'),
        ...bar(APPEND, 'raw pg multi-row INSERT(100)', 'raw multi-row INSERT(100) ceiling', 'ceiling'),
        ...bar(PEERS, PEER_CASES.rheoEnqueue, 'rheo appendBatch(1000)', 'rheo'),
        ...bar(PEERS, PEER_CASES.graphileEnqueue, 'graphile-worker addJobs(1000)', 'peer'),
        ...bar(PEERS, PEER_CASES.pgBossEnqueue, 'pg-boss insert(1000)', 'peer'),
        ...bar(APPEND, 'rheo postgres append (single)', 'rheo append (single)', 'rheo'),
        ...bar(APPEND, 'raw pg single-row INSERT', 'raw single-row INSERT', 'ceiling'),
      ],
    },
    {
      title: `Redis: drain and enqueue (${REDIS_SETTING.maxDemand}/${REDIS_SETTING.concurrency} for rheo; same server, same run)`,
      bars: [
        ...bar(REDIS, REDIS_CASES.consume, 'rheo.consume', 'rheo'),
        ...bar(REDIS, REDIS_CASES.rawDrain, 'raw Lua-fenced XREADGROUP + XACK ceiling', 'ceiling'),
        ...bar(REDIS, REDIS_CASES.bullmqBest, 'BullMQ Worker (best concurrency)', 'peer'),
        ...bar(REDIS, REDIS_CASES.append, 'rheo appendBatch(1000)', 'rheo'),
        ...bar(REDIS, REDIS_CASES.rawXadd, 'raw pipelined XADD ceiling', 'ceiling'),
        ...bar(REDIS, REDIS_CASES.bullmqEnqueue, 'BullMQ addBulk(1000)', 'peer'),
      ],
    },
    {
      title: 'Memory backend',
      bars: [
        ...bar(STREAMS, STREAMS_CASES.bare, 'bare Readable → Writable ceiling', 'ceiling'),
        ...bar(STREAMS, STREAMS_CASES.rheo, 'RheoProducer → lease sink (500/50)', 'rheo'),
        ...bar(CONSUME, best('memory', consumeCase), 'rheo.consume (best)', 'rheo'),
      ],
    },
  ].filter((g) => g.bars.length > 0);
  return svgChart(
    'rheo vs graphile-worker, pg-boss and BullMQ: events/s (median, whiskers min–max)',
    `${env.cpus} vCPU, Node ${env.node}, ${env.postgres}, ${env.date.slice(0, 10)}, ${env.runs} run(s)${env.quick ? ', quick' : ''}`,
    groups,
  );
}

/** The commit measured, marked when the work tree had changes. */
function gitCommit(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: here, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', '../src'], { cwd: here, encoding: 'utf8' }).trim();
    return dirty ? `${head} + uncommitted src changes` : head;
  } catch {
    return 'unknown';
  }
}

function peerVersions(): Record<string, string> {
  const version = (name: string): string => {
    try {
      const pkg = JSON.parse(readFileSync(join(here, 'node_modules', name, 'package.json'), 'utf8')) as { version?: string };
      return pkg.version ?? '?';
    } catch {
      return 'not installed';
    }
  };
  return { 'graphile-worker': version('graphile-worker'), 'pg-boss': version('pg-boss'), bullmq: version('bullmq') };
}

main().then(
  // A scenario that failed half-way may leave a consumer's timers behind; the cluster is already gone.
  () => process.exit(),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
