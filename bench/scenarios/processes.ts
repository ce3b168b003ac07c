/*
 * Longer than the house's 400 lines on purpose: one scenario (scaling with
 * member processes) whose drains, rebalance and duplicate count share the
 * same member plumbing, CPU readings and report; split, each part would
 * import most of the others.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import pg from 'pg';

import { createRheo, partitionForKey, type Rheo } from '../../src/index.js';
import { redisBackend } from '../../src/redis.js';
import { startThrowawayRedis } from '../../scripts/throwaway-redis.js';
import { log, type BenchContext } from '../lib/context.js';
import { machineJiffies, parentPid, postgresServerCpuMs, processCpuMs } from '../lib/cpu.js';
import type { MemberConfig } from '../lib/process-member.js';
import { openRheo } from '../lib/rheo-setup.js';
import { formatNumber, now, rate, sleep, waitUntil } from '../lib/stats.js';
import { EVENT_TYPE, inChunks, payload } from '../lib/workload.js';

export const PROCESSES = '8 processes';

const MEMBER = fileURLToPath(new URL('../lib/process-member.ts', import.meta.url));
const PARTITION_COUNT = 8;
const KEY_COUNT = 64;
/** What every handler awaits (a real timer): the work is I/O-bound, so one process can do at most CONCURRENCY / DELAY_MS handlers per ms. */
const DELAY_MS = 10;
const CONCURRENCY = 10;
/** Competing mode: leases held per process, ten handler rounds' worth (the consume scenario's 100/10 setting). */
const MAX_DEMAND = 100;
/** The most one process can do: CONCURRENCY handlers every DELAY_MS. */
const IDEAL_PER_PROCESS = (CONCURRENCY * 1000) / DELAY_MS;
export const PROCESS_COUNTS = [1, 2, 4] as const;
/**
 * Partition mode's heartbeat in the drains: the clock starts with a
 * resetGroup, which fences the owners, and they restart at their next
 * heartbeat (as in the `partitions` scenario); at the default (a third of
 * the 10 s session) that alone would add up to 3.3 s to a 5 s drain.
 */
const DRAIN_HEARTBEAT_MS = 200;
/** As in the `partitions` scenario: every lag poll costs the server a little. */
const DRAIN_POLL_MS = 25;

export type BackendKind = 'postgres' | 'redis';
export type Mode = 'competing' | 'partitions';
export const BACKENDS: readonly BackendKind[] = ['postgres', 'redis'];
export const MODES: readonly Mode[] = ['competing', 'partitions'];

const MODE_LABEL: Record<Mode, string> = {
  competing: `competing (maxDemand ${MAX_DEMAND}, concurrency ${CONCURRENCY})`,
  partitions: `partition mode (orderBy key, concurrency ${CONCURRENCY})`,
};

/** The rebalance case's heartbeats: the library default and the drains' brisk one. */
const REBALANCE_HEARTBEATS: ReadonlyArray<{ label: string; ms: number | undefined }> = [
  { label: 'default heartbeat (sessionMs 10 s / 3)', ms: undefined },
  { label: `heartbeatMs ${DRAIN_HEARTBEAT_MS}`, ms: DRAIN_HEARTBEAT_MS },
];

export const PROCESS_CASES = {
  rate: (kind: BackendKind, mode: Mode, n: number) => `${kind} ${MODE_LABEL[mode]}, ${n} process${n === 1 ? '' : 'es'}`,
  clientCpu: (kind: BackendKind, mode: Mode, n: number) => `${PROCESS_CASES.rate(kind, mode, n)}: client CPU per event`,
  serverCpu: (kind: BackendKind, mode: Mode, n: number) => `${PROCESS_CASES.rate(kind, mode, n)}: server CPU per event`,
  totalCpu: (kind: BackendKind, mode: Mode, n: number) => `${PROCESS_CASES.rate(kind, mode, n)}: client + server CPU per event`,
  lockWaits: (kind: BackendKind, mode: Mode, n: number) => `${PROCESS_CASES.rate(kind, mode, n)}: active backends waiting on a lock`,
  timer: (kind: BackendKind, mode: Mode, n: number) => `${PROCESS_CASES.rate(kind, mode, n)}: mean time the ${DELAY_MS} ms handler timer took`,
  machineBusy: (kind: BackendKind, mode: Mode, n: number) => `${PROCESS_CASES.rate(kind, mode, n)}: machine CPU busy (all processes, % of all cores)`,
  doubling: (kind: BackendKind, mode: Mode, from: number) => `${kind} ${MODE_LABEL[mode]}: ${from * 2} ÷ ${from} processes`,
  cpuGrowth: (kind: BackendKind, mode: Mode) => `${kind} ${MODE_LABEL[mode]}: CPU per event, 4 ÷ 1 processes`,
  rebalanceMs: (kind: BackendKind, heartbeat: string) => `${kind} partition mode, 4th process joins 3 under load (${heartbeat}): join → balanced`,
  duplicates: (kind: BackendKind, heartbeat: string) => `${kind} partition mode, 4th process joins 3 under load (${heartbeat}): events handled twice`,
};

/** What one drain measured, and what the report shows beside it. */
interface DrainResult {
  rate: number;
  clientUs: number;
  serverUs: number | null;
  /** PostgreSQL only: share of sampled active backends waiting on a heavyweight lock, and the commonest waits. */
  lockShare: number | null;
  waits: string | null;
  /** Mean ms the handlers' timers took (DELAY_MS when no process waited for a core). */
  timerMs: number;
  /** Share of the machine's cores busy over the drain, anybody's work; `null` off Linux. */
  machineBusy: number | null;
}

/** One backend as the scenario uses it: an admin rheo, what members need to reach it, its server CPU. */
interface Target {
  kind: BackendKind;
  rheo: Rheo;
  member: Pick<MemberConfig, 'backend' | 'url' | 'prefix'>;
  /** CPU of the server in ms so far, or `null` when it is not visible. */
  serverCpuMs(): Promise<number | null>;
  /** Samples wait events while a drain runs (PostgreSQL); `null` elsewhere. */
  sampleWaits(): WaitSampler | null;
  close(): Promise<void>;
}

/** Per-run detail the markdown report prints (wait events, key spread), filled as cases run. */
export const PROCESS_DETAIL: { waits: Map<string, string[]>; keySpread: string } = {
  waits: new Map(),
  keySpread: '',
};

/**
 * Scenario 8: scaling with processes on I/O-bound handlers, on PostgreSQL
 * and on Redis, in both consumption modes. Every handler awaits a 10 ms
 * timer with 10 at once per process, so a process can do at most 1,000
 * events/s and the ideal rate doubles with every process: what is measured
 * is how much of that rheo keeps as members are added (claims, commits,
 * notifications, rebalancing), not the CPU the handlers burn.
 *
 * One stream of 8 partitions per run, its backlog spread evenly over 64
 * keys (partition key = key) and sized for about 5 s at 4 processes' ideal
 * rate. For 1, 2 and 4 member processes (bench/lib/process-member.ts), in
 * competing mode and in partition mode (orderBy key), a group starts past
 * the backlog, the members start and settle (competing: started and idle;
 * partition mode: balanced), and the clock runs from a resetGroup to the
 * log's start to lag 0. CPU per event is the member processes' (from /proc)
 * plus the server's: every process of this PostgreSQL cluster (its
 * postmaster's children), or redis-server's own used_cpu_user + used_cpu_sys.
 *
 * Partition mode also times a rebalance under load: 3 members drain a
 * backlog, a 4th starts, and the time from its `joining` line to a group of
 * 4 owning 2 partitions each with nothing revoking is recorded, with the
 * number of events whose handler ran more than once (every member lists the
 * ids its handler ran; the group drains to lag 0 before they stop, so the
 * join is the only change of ownership while events flow).
 */
export async function processesScenario(ctx: BenchContext): Promise<void> {
  const keys = evenKeys();
  PROCESS_DETAIL.keySpread = `${KEY_COUNT} keys, ${KEY_COUNT / PARTITION_COUNT} per partition (key names chosen so; the first 64 of k0, k1, ... hash 11/10/10/4/6/12/11/0 over the 8 partitions, which would cap 4 processes in partition mode at 64/23 of the ideal)`;
  for (const kind of BACKENDS) {
    let target: Target;
    try {
      target = await openTarget(ctx, kind);
    } catch (error) {
      ctx.skip(PROCESSES, `${kind}: ${(error as Error).message}`);
      continue;
    }
    try {
      await runBackend(ctx, target, keys);
    } finally {
      await target.close();
    }
  }
}

async function runBackend(ctx: BenchContext, target: Target, keys: string[]): Promise<void> {
  const { kind, rheo } = target;
  // A multiple of KEY_COUNT so every key, and so every partition, gets the same number of events.
  const events = ctx.size(20_480, 8_192);
  for (let run = 0; run < ctx.runs; run++) {
    const stream = `s${run}`;
    await rheo.createStream(stream, { partitions: PARTITION_COUNT });
    await append(rheo, stream, events, keys);
    // Odd runs go 4, 2, 1: drift over a run (other work on the machine, a growing database) then favours neither direction.
    const counts = run % 2 === 0 ? [...PROCESS_COUNTS] : [...PROCESS_COUNTS].reverse();
    for (const mode of MODES) {
      for (const n of counts) {
        const d = await drain(target, stream, `g-${mode}-${n}`, events, mode, n);
        ctx.record(PROCESSES, PROCESS_CASES.rate(kind, mode, n), 'events/s', d.rate);
        ctx.record(PROCESSES, PROCESS_CASES.clientCpu(kind, mode, n), 'µs', d.clientUs);
        if (d.serverUs !== null) {
          ctx.record(PROCESSES, PROCESS_CASES.serverCpu(kind, mode, n), 'µs', d.serverUs);
          ctx.record(PROCESSES, PROCESS_CASES.totalCpu(kind, mode, n), 'µs', d.clientUs + d.serverUs);
        }
        ctx.record(PROCESSES, PROCESS_CASES.timer(kind, mode, n), 'ms', d.timerMs);
        if (d.machineBusy !== null) ctx.record(PROCESSES, PROCESS_CASES.machineBusy(kind, mode, n), '%', d.machineBusy * 100);
        if (d.lockShare !== null) ctx.record(PROCESSES, PROCESS_CASES.lockWaits(kind, mode, n), '%', d.lockShare * 100);
        if (d.waits !== null) {
          const key = PROCESS_CASES.rate(kind, mode, n);
          PROCESS_DETAIL.waits.set(key, [...(PROCESS_DETAIL.waits.get(key) ?? []), d.waits]);
        }
      }
      const sample = (n: number): number => ctx.get(PROCESSES, PROCESS_CASES.rate(kind, mode, n))!.samples[run]!;
      ctx.record(PROCESSES, PROCESS_CASES.doubling(kind, mode, 1), 'x', sample(2) / sample(1));
      ctx.record(PROCESSES, PROCESS_CASES.doubling(kind, mode, 2), 'x', sample(4) / sample(2));
      const cpu = (n: number): number | undefined => ctx.get(PROCESSES, PROCESS_CASES.totalCpu(kind, mode, n))?.samples[run];
      const c1 = cpu(1);
      const c4 = cpu(4);
      if (c1 !== undefined && c4 !== undefined) ctx.record(PROCESSES, PROCESS_CASES.cpuGrowth(kind, mode), 'x', c4 / c1);
      log(
        `    ${kind} ${mode} run ${run + 1}: ${PROCESS_COUNTS.map((n) => Math.round(sample(n))).join(' / ')} events/s (1 / 2 / 4 processes), ` +
          `CPU per event ${PROCESS_COUNTS.map((n) => formatNumber(cpu(n) ?? Number.NaN)).join(' / ')} µs`,
      );
    }
    for (const heartbeat of REBALANCE_HEARTBEATS) {
      const r = await rebalance(ctx, target, `r${run}-${heartbeat.ms ?? 'default'}`, keys, heartbeat.ms);
      ctx.record(PROCESSES, PROCESS_CASES.rebalanceMs(kind, heartbeat.label), 'ms', r.ms);
      ctx.record(PROCESSES, PROCESS_CASES.duplicates(kind, heartbeat.label), 'events', r.duplicates);
      log(`    ${kind} rebalance (${heartbeat.label}) run ${run + 1}: ${Math.round(r.ms)} ms join → balanced, ${r.duplicates} events handled twice`);
    }
  }
}

/** 64 key names, 8 per partition, so an even backlog gives every partition (and every owner) the same work. */
function evenKeys(): string[] {
  const perPartition = KEY_COUNT / PARTITION_COUNT;
  const taken = new Array<number>(PARTITION_COUNT).fill(0);
  const keys: string[] = [];
  for (let i = 0; keys.length < KEY_COUNT; i++) {
    const key = `k${i}`;
    const p = partitionForKey(key, PARTITION_COUNT);
    if (taken[p]! >= perPartition) continue;
    taken[p]!++;
    keys.push(key);
  }
  return keys;
}

async function append(rheo: Rheo, stream: string, count: number, keys: string[]): Promise<void> {
  await inChunks(count, 2_048, async (start, end) => {
    const inputs = [];
    for (let i = start; i < end; i++) inputs.push({ type: EVENT_TYPE, key: keys[i % keys.length]!, payload: payload(i) });
    await rheo.appendBatch(stream, inputs);
  });
}

async function openTarget(ctx: BenchContext, kind: BackendKind): Promise<Target> {
  if (kind === 'postgres') {
    const access = ctx.pg;
    if (!access) throw new Error('no database');
    const url = await access.createDatabase('rheo_bench_processes');
    const rheo = await openRheo('postgres', { url });
    // This cluster's postmaster: the parent of a backend of ours.
    const probe = new pg.Client({ connectionString: url });
    await probe.connect();
    let postmaster: number | null;
    try {
      const { rows } = await probe.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      // While the backend still runs: once the probe disconnects it exits.
      postmaster = parentPid(rows[0]!.pid);
    } finally {
      await probe.end();
    }
    return {
      kind,
      rheo,
      member: { backend: 'postgres', url },
      serverCpuMs: () => Promise.resolve(postmaster === null ? null : postgresServerCpuMs(postmaster)),
      sampleWaits: () => sampleWaits(url),
      close: async () => {
        await rheo.close();
        await access.dropDatabase('rheo_bench_processes');
      },
    };
  }
  const server = await startThrowawayRedis({ settings: ['--appendonly', 'yes', '--appendfsync', 'everysec'], label: 'rheo-bench-redis' });
  const url = server.urls[0]!;
  const prefix = 'procs';
  const rheo = createRheo({ backend: redisBackend({ url }, { prefix }) });
  const admin = new Redis(url);
  try {
    await rheo.migrate();
  } catch (error) {
    admin.disconnect();
    await rheo.close();
    server.stop();
    throw error;
  }
  ctx.notes.push(`processes scenario on Redis: ${server.version}, appendonly yes, appendfsync everysec, one server on 127.0.0.1.`);
  return {
    kind,
    rheo,
    member: { backend: 'redis', url, prefix },
    serverCpuMs: async () => {
      const info = await admin.info('cpu');
      const field = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
      return (field('used_cpu_user') + field('used_cpu_sys')) * 1000;
    },
    sampleWaits: () => null,
    close: async () => {
      await rheo.close();
      admin.disconnect();
      server.stop();
    },
  };
}

/** A member process and what it has printed. */
interface Member {
  child: ChildProcess;
  joinedAt: number | null;
  ready: boolean;
  idsFile: string | undefined;
  /** From its last line: what its handlers' timers took in all (ms), and how many ran. */
  timer: { ms: number; runs: number } | null;
}

function startMember(target: Target, config: Omit<MemberConfig, 'backend' | 'url' | 'prefix'>): Member {
  const full: MemberConfig = { ...target.member, ...config };
  const child = spawn(process.execPath, ['--import', 'tsx', MEMBER, JSON.stringify(full)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const member: Member = { child, joinedAt: null, ready: false, idsFile: config.idsFile, timer: null };
  let buffered = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (line === 'joining') member.joinedAt = now();
      else if (line === 'ready') member.ready = true;
      else if (line.startsWith('timer ')) {
        const [, ms, runs] = line.split(' ');
        member.timer = { ms: Number(ms), runs: Number(runs) };
      }
    }
  });
  return member;
}

async function stopMembers(members: Member[]): Promise<void> {
  for (const m of members) m.child.kill('SIGTERM');
  // 'close', not 'exit': the member's last line is read by then.
  await Promise.all(
    members.map((m) => new Promise((resolve) => (m.child.exitCode !== null && m.child.stdout?.closed !== false ? resolve(null) : m.child.once('close', resolve)))),
  );
}

/** Every member present, the partitions spread as evenly as they go, nothing being handed over. */
async function balanced(rheo: Rheo, stream: string, group: string, processes: number): Promise<boolean> {
  const m = await rheo.members(stream, group);
  const low = Math.floor(PARTITION_COUNT / processes);
  return (
    m.members.length === processes &&
    m.members.every((x) => x.revoking.length === 0 && x.partitions.length >= low && x.partitions.length <= low + 1) &&
    m.members.reduce((sum, x) => sum + x.partitions.length, 0) === PARTITION_COUNT
  );
}

/** `processes` members on a group past the backlog, settled, then reset to the start and timed to lag 0. */
async function drain(target: Target, stream: string, group: string, events: number, mode: Mode, processes: number): Promise<DrainResult> {
  const { rheo } = target;
  await rheo.createGroup(stream, group, { startAfter: events / PARTITION_COUNT });
  const members: Member[] = [];
  try {
    for (let i = 0; i < processes; i++) {
      members.push(
        startMember(target, {
          stream,
          group,
          mode,
          delayMs: DELAY_MS,
          concurrency: CONCURRENCY,
          maxDemand: MAX_DEMAND,
          heartbeatMs: DRAIN_HEARTBEAT_MS,
        }),
      );
    }
    if (mode === 'competing') {
      await waitUntil('competing members to start', () => members.every((m) => m.ready), 60_000, 20);
      // Let each consumer make its first (empty) fetch and go idle.
      await sleep(500);
    } else {
      await waitUntil('a balanced group', () => balanced(rheo, stream, group, processes), 60_000, 20);
    }
    const pids = members.map((m) => m.child.pid!);
    const client0 = pids.reduce((sum, pid) => sum + processCpuMs(pid), 0);
    const server0 = await target.serverCpuMs();
    const waits = target.sampleWaits();
    const machine0 = machineJiffies();
    const t0 = now();
    try {
      await rheo.resetGroup(stream, group, { confirm: true, startAfter: 0 });
      await waitUntil('the members to drain', async () => (await rheo.lag(stream, group)).lag === 0, 300_000, DRAIN_POLL_MS);
    } finally {
      await waits?.stop();
    }
    const elapsed = now() - t0;
    const machine1 = machineJiffies();
    const clientMs = pids.reduce((sum, pid) => sum + processCpuMs(pid), 0) - client0;
    const server1 = await target.serverCpuMs();
    const sampled = waits ? await waits.stop() : null;
    await stopMembers(members);
    const timer = members.reduce((sum, m) => ({ ms: sum.ms + (m.timer?.ms ?? 0), runs: sum.runs + (m.timer?.runs ?? 0) }), { ms: 0, runs: 0 });
    return {
      timerMs: timer.runs > 0 ? timer.ms / timer.runs : Number.NaN,
      machineBusy: machine0 && machine1 && machine1.total > machine0.total ? (machine1.busy - machine0.busy) / (machine1.total - machine0.total) : null,
      rate: rate(events, elapsed),
      clientUs: (clientMs * 1000) / events,
      serverUs: server0 === null || server1 === null ? null : ((server1 - server0) * 1000) / events,
      lockShare: sampled?.lockShare ?? null,
      waits: sampled?.top ?? null,
    };
  } finally {
    await stopMembers(members);
  }
}

/**
 * Partition mode: 3 members drain a backlog; once it flows a 4th starts.
 * Returns the time from its `joining` line to a balanced group of 4, and how
 * many events ran more than once over the whole drain.
 */
async function rebalance(
  ctx: BenchContext,
  target: Target,
  name: string,
  keys: string[],
  heartbeatMs: number | undefined,
): Promise<{ ms: number; duplicates: number }> {
  const { rheo } = target;
  // Enough to flow through the join: up to two heartbeats plus a member's start at 3 processes' ideal rate, twice over.
  const beat = heartbeatMs ?? 10_000 / 3;
  const events = Math.ceil(((3 * IDEAL_PER_PROCESS * 2 * (2 * beat + 2_000)) / 1000) / KEY_COUNT) * KEY_COUNT;
  const stream = name;
  const group = 'g';
  await rheo.createStream(stream, { partitions: PARTITION_COUNT });
  await append(rheo, stream, events, keys);
  await rheo.createGroup(stream, group, { startAfter: events / PARTITION_COUNT });
  const dir = mkdtempSync(join(tmpdir(), 'rheo-bench-rebalance-'));
  const members: Member[] = [];
  const config = (i: number): Omit<MemberConfig, 'backend' | 'url' | 'prefix'> => ({
    stream,
    group,
    mode: 'partitions',
    delayMs: DELAY_MS,
    concurrency: CONCURRENCY,
    maxDemand: MAX_DEMAND,
    heartbeatMs,
    idsFile: join(dir, `member-${i}.ids`),
  });
  try {
    for (let i = 0; i < 3; i++) members.push(startMember(target, config(i)));
    await waitUntil('a balanced group of 3', () => balanced(rheo, stream, group, 3), 60_000, 20);
    await rheo.resetGroup(stream, group, { confirm: true, startAfter: 0 });
    // Flowing: a tenth of the backlog handled.
    await waitUntil('events to flow', async () => (await rheo.lag(stream, group)).lag <= events * 0.9, 60_000, DRAIN_POLL_MS);
    const fourth = startMember(target, config(3));
    members.push(fourth);
    await waitUntil('the 4th member to join', () => fourth.joinedAt !== null, 60_000, 5);
    await waitUntil('a balanced group of 4', () => balanced(rheo, stream, group, 4), 60_000, 20);
    const ms = now() - fourth.joinedAt!;
    const { lag } = await rheo.lag(stream, group);
    if (lag === 0) ctx.notes.push(`processes rebalance ${name}: the backlog ran out before the group was balanced; duplicates undercounted`);
    await waitUntil('the group to drain', async () => (await rheo.lag(stream, group)).lag === 0, 300_000, DRAIN_POLL_MS);
    await stopMembers(members);
    const seen = new Map<string, number>();
    let runs = 0;
    for (const m of members) {
      const text = readFileSync(m.idsFile!, 'utf8');
      for (const id of text.split('\n')) {
        if (!id) continue;
        runs++;
        seen.set(id, (seen.get(id) ?? 0) + 1);
      }
    }
    if (seen.size !== events) throw new Error(`rebalance ${name}: handlers ran ${seen.size} distinct events of ${events}`);
    let duplicates = 0;
    for (const count of seen.values()) if (count > 1) duplicates++;
    if (runs - seen.size !== duplicates) ctx.notes.push(`processes rebalance ${name}: some events ran three times or more (${runs - seen.size} extra runs)`);
    return { ms, duplicates };
  } finally {
    await stopMembers(members);
    rmSync(dir, { recursive: true, force: true });
  }
}

interface WaitSampler {
  /** Share of sampled active backends waiting on a heavyweight lock, and the five commonest wait events. */
  stop(): Promise<{ lockShare: number; top: string }>;
}

/**
 * Samples pg_stat_activity every 50 ms while a drain runs (bench/processes.ts
 * did so every 10 ms; at 50 ms the sampler costs the server about one query
 * per 200 events at 4,000 events/s).
 */
function sampleWaits(url: string): WaitSampler {
  const client = new pg.Client({ connectionString: url });
  let running = true;
  let locked = 0;
  let active = 0;
  const counts = new Map<string, number>();
  const loop = (async () => {
    await client.connect();
    try {
      while (running) {
        const { rows } = await client.query<{ wait: string | null; n: number }>(
          `SELECT wait_event_type || ':' || wait_event AS wait, count(*)::int AS n
           FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()
           GROUP BY 1`,
        );
        for (const r of rows) {
          active += r.n;
          const wait = r.wait ?? 'running (CPU)';
          counts.set(wait, (counts.get(wait) ?? 0) + r.n);
          if (wait.startsWith('Lock:')) locked += r.n;
        }
        await sleep(50);
      }
    } finally {
      await client.end();
    }
  })();
  let result: Promise<{ lockShare: number; top: string }> | null = null;
  return {
    stop() {
      running = false;
      result ??= loop.then(() => {
        const top = [...counts.entries()]
          .sort((a, b) => b[1] - a[1])
          .slice(0, 5)
          .map(([wait, n]) => `${wait} ${((n / Math.max(1, active)) * 100).toFixed(0)} %`)
          .join(', ');
        return { lockShare: active === 0 ? 0 : locked / active, top: top || 'no active backend sampled' };
      });
      return result;
    },
  };
}

/** The scenario's own report (bench/results/processes-latest.md), from this run's samples. */
export function processesMarkdown(ctx: BenchContext, header: string): string {
  const out: string[] = ['# Scaling with processes (I/O-bound handlers)', '', header, ''];
  const cell = (name: string, unit = '', format: (n: number) => string = formatNumber): string => {
    const m = ctx.get(PROCESSES, name);
    if (!m) return '–';
    return `${format(m.median)}${unit} (${m.samples.map((s) => format(s)).join(', ')})`;
  };
  out.push(
    `Workload: a stream of ${PARTITION_COUNT} partitions, events spread evenly over ${KEY_COUNT} keys (partition key = key); every handler awaits a ${DELAY_MS} ms timer, ` +
      `${CONCURRENCY} at once per process, so one process can do at most ${formatNumber(IDEAL_PER_PROCESS)} events/s. ` +
      `Competing mode: \`rheo.consume\` without assignment, maxDemand ${MAX_DEMAND}, pollMs 50. Partition mode: \`assignment: 'partitions'\`, \`orderBy: 'key'\`, heartbeatMs ${DRAIN_HEARTBEAT_MS} in the drains. ` +
      'Each cell: median (the samples, one per run). Clock: resetGroup to the start → lag 0, members started and settled first. ' +
      'CPU per event: member processes (/proc) + the server (every process of this PostgreSQL cluster; redis-server\'s used_cpu_user + used_cpu_sys). ' +
      `Timer: the mean time the handlers' ${DELAY_MS} ms timer really took (late when a member waits for a core). Machine CPU busy: /proc/stat over the drain, every process on the machine, as a share of all its cores.`,
    '',
    `Keys: ${PROCESS_DETAIL.keySpread}.`,
    '',
  );
  for (const kind of BACKENDS) {
    for (const mode of MODES) {
      if (!ctx.get(PROCESSES, PROCESS_CASES.rate(kind, mode, 1))) continue;
      out.push(`## ${kind}, ${MODE_LABEL[mode]}`, '');
      const lockColumn = kind === 'postgres';
      out.push(
        `| processes | events/s | of ideal | client CPU/event µs | server CPU/event µs | total CPU/event µs | ${DELAY_MS} ms timer took, ms | machine CPU busy %${lockColumn ? ' | backends waiting on a lock % | commonest waits (per run)' : ''} |`,
        `|---|---|---|---|---|---|---|---|${lockColumn ? '---|---|' : ''}`,
      );
      for (const n of PROCESS_COUNTS) {
        const r = ctx.get(PROCESSES, PROCESS_CASES.rate(kind, mode, n));
        const ofIdeal = r ? `${((r.median / (n * IDEAL_PER_PROCESS)) * 100).toFixed(0)} %` : '–';
        const row = [
          String(n),
          cell(PROCESS_CASES.rate(kind, mode, n)),
          ofIdeal,
          cell(PROCESS_CASES.clientCpu(kind, mode, n)),
          cell(PROCESS_CASES.serverCpu(kind, mode, n)),
          cell(PROCESS_CASES.totalCpu(kind, mode, n)),
          cell(PROCESS_CASES.timer(kind, mode, n)),
          cell(PROCESS_CASES.machineBusy(kind, mode, n)),
        ];
        if (lockColumn) {
          row.push(cell(PROCESS_CASES.lockWaits(kind, mode, n)), (PROCESS_DETAIL.waits.get(PROCESS_CASES.rate(kind, mode, n)) ?? []).join('; '));
        }
        out.push(`| ${row.join(' | ')} |`);
      }
      out.push(
        '',
        `Per run: 2 ÷ 1 processes ${cell(PROCESS_CASES.doubling(kind, mode, 1), '×')}; 4 ÷ 2 processes ${cell(PROCESS_CASES.doubling(kind, mode, 2), '×')}; ` +
          `CPU per event 4 ÷ 1 processes ${cell(PROCESS_CASES.cpuGrowth(kind, mode), '×')}.`,
        '',
      );
    }
  }
  out.push('## Rebalance under load (partition mode)', '');
  out.push(
    'Three members drain a backlog; once a tenth of it is handled a fourth starts. Time: from its `joining` line (printed right before `rheo.consume`) ' +
      'to a group of 4 members owning 2 partitions each with nothing being revoked (polled every 20 ms). Twice: the number of events whose handler ' +
      'ran more than once over the whole drain (every member lists the ids its handler ran; the group drains to lag 0 before the members stop).',
    '',
    '| backend | heartbeat | join → balanced ms | events handled twice |',
    '|---|---|---|---|',
  );
  for (const kind of BACKENDS) {
    for (const h of REBALANCE_HEARTBEATS) {
      if (!ctx.get(PROCESSES, PROCESS_CASES.rebalanceMs(kind, h.label))) continue;
      out.push(`| ${kind} | ${h.label} | ${cell(PROCESS_CASES.rebalanceMs(kind, h.label))} | ${cell(PROCESS_CASES.duplicates(kind, h.label), '', String)} |`);
    }
  }
  const limits = processesLimits(ctx);
  if (limits.length > 0) out.push('', '## What limits the cases that missed a target', '', ...limits.map((l) => `- ${l}`));
  return `${out.join('\n')}\n`;
}

/**
 * Per backend and mode that missed a target, what the samples say limits
 * it: the share of the ideal rate reached, how CPU per event moved on each
 * side, how many cores the case kept busy (rate × CPU per event, of the
 * machine's two, shared), and on PostgreSQL the share of backends waiting
 * on a lock.
 */
export function processesLimits(ctx: BenchContext): string[] {
  const out: string[] = [];
  const med = (name: string): number | undefined => ctx.get(PROCESSES, name)?.median;
  for (const kind of BACKENDS) {
    for (const mode of MODES) {
      const up1 = med(PROCESS_CASES.doubling(kind, mode, 1));
      const up2 = med(PROCESS_CASES.doubling(kind, mode, 2));
      const growth = med(PROCESS_CASES.cpuGrowth(kind, mode));
      if (up1 === undefined || up2 === undefined) continue;
      if (up1 >= SCALING_TARGET && up2 >= SCALING_TARGET && (growth === undefined || growth <= CPU_GROWTH_TARGET)) continue;
      const parts = PROCESS_COUNTS.map((n) => {
        const r = med(PROCESS_CASES.rate(kind, mode, n)) ?? Number.NaN;
        const client = med(PROCESS_CASES.clientCpu(kind, mode, n)) ?? Number.NaN;
        const server = med(PROCESS_CASES.serverCpu(kind, mode, n));
        const cores = (r * (client + (server ?? 0))) / 1e6;
        const locks = med(PROCESS_CASES.lockWaits(kind, mode, n));
        const timer = med(PROCESS_CASES.timer(kind, mode, n));
        const busy = med(PROCESS_CASES.machineBusy(kind, mode, n));
        return (
          `${n}: ${((r / (n * IDEAL_PER_PROCESS)) * 100).toFixed(0)} % of ideal, client ${formatNumber(client)} µs + server ${server === undefined ? '?' : formatNumber(server)} µs per event ` +
          `(${cores.toFixed(2)} cores for this case), the ${DELAY_MS} ms timer took ${timer === undefined ? '?' : formatNumber(timer)} ms, ` +
          `machine ${busy === undefined ? '?' : formatNumber(busy)} % busy${locks === undefined ? '' : `, ${formatNumber(locks)} % of active backends waiting on a lock`}`
        );
      });
      out.push(
        `${kind} ${mode}: 2 ÷ 1 = ${formatNumber(up1)}×, 4 ÷ 2 = ${formatNumber(up2)}×, CPU per event 4 ÷ 1 = ${growth === undefined ? '?' : `${formatNumber(growth)}×`}. ` +
          `By process count: ${parts.join('; ')}.`,
      );
    }
  }
  return out;
}

export const SCALING_TARGET = 1.8;
export const CPU_GROWTH_TARGET = 1.2;
