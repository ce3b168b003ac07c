/**
 * Partition-ownership process scenarios (issue 11), shared by
 * test/postgres/partition-ownership.test.ts and `npm run chaos`: real member
 * processes (test/support/partition-member-child.ts) on a real PostgreSQL,
 * the database clock as the time authority for sessions, waits on
 * conditions (bounded only to fail), and a check of what every member
 * printed: events lost, handled again after a commit covered them, per-key order
 * violations, overlapping tenures and stale commits accepted.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { markdownTable } from './table.js';

const CHILD = fileURLToPath(new URL('../support/partition-member-child.ts', import.meta.url));

export interface Handled {
  member: string;
  t: number;
  partition: number;
  sequence: number;
  key: string;
  generation: number;
}

export interface Committed {
  member: string;
  t: number;
  partition: number;
  upTo: number;
  generation: number;
  status: string;
  /** When the member sent it (`t` is when the answer came back). */
  sentAt: number;
}

/** One member process and what it printed. */
export class Member {
  readonly id: string;
  readonly process: ChildProcessWithoutNullStreams;
  readonly exited: Promise<NodeJS.Signals | number | null>;
  readonly handled: Handled[] = [];
  readonly commits: Committed[] = [];
  stderr = '';
  #partial = '';

  constructor(url: string, id: string, schema: string, sessionMs: number, handlerMs: number) {
    this.id = id;
    this.process = spawn(process.execPath, ['--import', 'tsx', CHILD, url, schema, 's', 'g', id, String(sessionMs), String(handlerMs)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.exited = new Promise((resolve) => this.process.once('exit', (code, signal) => resolve(signal ?? code)));
    this.process.stderr.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.process.stdout.on('data', (chunk: Buffer) => {
      const lines = (this.#partial + chunk.toString()).split('\n');
      this.#partial = lines.pop() ?? '';
      for (const line of lines) this.#parse(line);
    });
  }

  #parse(line: string): void {
    const [kind, ...f] = line.split(' ');
    if (kind === 'handled') {
      this.handled.push({ member: this.id, t: Number(f[0]), partition: Number(f[1]), sequence: Number(f[2]), key: f[3]!, generation: Number(f[4]) });
    } else if (kind === 'commit') {
      this.commits.push({ member: this.id, t: Number(f[0]), partition: Number(f[1]), upTo: Number(f[2]), generation: Number(f[3]), status: f[4]!, sentAt: Number(f[5]) });
    }
  }

  /** SIGTERM: finish, commit, leave. Throws unless the process exits 0. */
  async terminate(): Promise<void> {
    this.process.kill('SIGTERM');
    const exit = await this.exited;
    if (exit !== 0) throw new Error(`member ${this.id} should stop cleanly, exited with ${String(exit)} (stderr: ${this.stderr})`);
  }
}

/** Waits for a condition, polling every 20 ms; throws after `timeoutMs` (a bound to fail, never a measurement). */
export async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Owners per partition as the store sees them. */
export async function owners(rheo: Rheo): Promise<Array<string | null>> {
  return Object.values((await rheo.members('s', 'g')).owners);
}

export async function highWatermarks(rheo: Rheo): Promise<number[]> {
  return Object.values((await rheo.lag('s', 'g')).partitions).map((p) => p.highWatermark);
}

/**
 * Per partition and tenure (generation and member), the sequences handled
 * must be strictly ascending with no gap, which is per-key order and more.
 * One line per violation.
 */
export function orderViolations(handled: Handled[]): string[] {
  const tenures = new Map<string, number[]>();
  for (const h of handled) {
    const key = `${h.partition}/${h.generation}/${h.member}`;
    tenures.set(key, [...(tenures.get(key) ?? []), h.sequence]);
  }
  const out: string[] = [];
  for (const [tenure, sequences] of tenures) {
    for (let i = 1; i < sequences.length; i++) {
      if (sequences[i] !== sequences[i - 1]! + 1) out.push(`tenure ${tenure}: ${sequences[i - 1]} then ${sequences[i]}`);
    }
  }
  return out;
}

/** Appended events (per the high watermarks) never handled by anyone. */
export function lostEvents(handled: Handled[], highWatermarks: number[]): string[] {
  const seen = new Set(handled.map((h) => `${h.partition}:${h.sequence}`));
  const out: string[] = [];
  highWatermarks.forEach((hw, p) => {
    for (let s = 1; s <= hw; s++) if (!seen.has(`${p}:${s}`)) out.push(`${p}:${s}`);
  });
  return out;
}

/**
 * Handlings by an owner that had already been replaced: the partition had
 * been handled or committed under a later generation before this handling
 * ended. A paused owner (SIGSTOP) finishes the handler it was running when
 * it resumes, before a heartbeat or a refused commit tells it the partition
 * moved; at least once allows that run (its commit is refused, which
 * `staleAccepted` checks), so it says nothing about offsets.
 */
export function zombieHandlings(handled: Handled[], commits: Committed[]): Set<Handled> {
  // Per partition, the earliest time each generation was seen at work.
  const firstSeen = new Map<number, Map<number, number>>();
  const see = (partition: number, generation: number, t: number): void => {
    const byGeneration = firstSeen.get(partition) ?? new Map<number, number>();
    firstSeen.set(partition, byGeneration);
    byGeneration.set(generation, Math.min(byGeneration.get(generation) ?? Infinity, t));
  };
  for (const h of handled) see(h.partition, h.generation, h.t);
  for (const c of commits) if (c.status === 'ok') see(c.partition, c.generation, c.t);
  const zombies = new Set<Handled>();
  for (const h of handled) {
    for (const [generation, t] of firstSeen.get(h.partition) ?? []) {
      if (generation > h.generation && t < h.t) {
        zombies.add(h);
        break;
      }
    }
  }
  return zombies;
}

/**
 * Events handled again after an offset commit had covered them: at least
 * once allows an event to be handled again after a crash, a pause or a
 * handover whose owner could not commit it, but never once its offset was
 * committed (a commit that answered ok, in the tenure of the earlier
 * handling, up to or past the event). Fencing makes this exact: a
 * generation's commit can only land before the next generation reads.
 * Handlings of a replaced owner (zombieHandlings) are left out: they are
 * not a reading of the committed offset, and cannot commit.
 */
export function duplicatesBeyond(handled: Handled[], commits: Committed[]): string[] {
  const zombies = zombieHandlings(handled, commits);
  const committedUpTo = new Map<string, number>();
  for (const c of commits) {
    if (c.status !== 'ok') continue;
    const tenure = `${c.partition}/${c.generation}`;
    committedUpTo.set(tenure, Math.max(committedUpTo.get(tenure) ?? 0, c.upTo));
  }
  const byEvent = new Map<string, Handled[]>();
  for (const h of handled) {
    if (zombies.has(h)) continue;
    const event = `${h.partition}:${h.sequence}`;
    const list = byEvent.get(event);
    if (list) list.push(h);
    else byEvent.set(event, [h]);
  }
  const out: string[] = [];
  for (const [event, list] of byEvent) {
    if (list.length < 2) continue;
    list.sort((a, b) => a.t - b.t);
    // Every handling but the last must have been left uncommitted by its tenure.
    const committedBefore = list.slice(0, -1).some((h) => (committedUpTo.get(`${h.partition}/${h.generation}`) ?? 0) >= h.sequence);
    if (committedBefore) out.push(`${event} handled ${list.length} times, again after a commit covered it`);
  }
  return out;
}

/** Per partition, a tenure whose last handling does not precede the next tenure's first. */
export function overlappingTenures(handled: Handled[]): string[] {
  const byPartition = new Map<number, Handled[]>();
  for (const h of handled) byPartition.set(h.partition, [...(byPartition.get(h.partition) ?? []), h]);
  const out: string[] = [];
  for (const [p, list] of byPartition) {
    const tenures = [...new Set(list.map((h) => h.generation))].sort((a, b) => a - b);
    for (let i = 1; i < tenures.length; i++) {
      const lastOfPrevious = Math.max(...list.filter((h) => h.generation === tenures[i - 1]).map((h) => h.t));
      const firstOfNext = Math.min(...list.filter((h) => h.generation === tenures[i]).map((h) => h.t));
      if (lastOfPrevious >= firstOfNext) out.push(`partition ${p}: generation ${tenures[i - 1]} overlaps ${tenures[i]}`);
    }
  }
  return out;
}

export interface PartitionScenarioResult {
  name: string;
  events: number;
  lost: string[];
  duplicates: string[];
  /** Events handled again where a member died or paused: allowed, counted. */
  redeliveries: number;
  /** Handlings a replaced owner finished after the partition moved (zombieHandlings): allowed, counted. */
  zombies: number;
  orderViolations: string[];
  overlaps: string[];
  /** Commits that landed under a generation the member had lost (a paused owner's). */
  staleAccepted: Committed[];
  /** Refused ones (`stale_generation`). */
  staleRefused: number;
  members: Member[];
  /** Per-scenario facts the tests check besides the counts. */
  facts: Record<string, unknown>;
  deadLetters: number;
  passed: boolean;
  seconds: number;
}

export interface PartitionScenarioEnv {
  url: string;
  schema: string;
  /** 1: the events of the process tests; the chaos run may shorten it. */
  scale?: number;
}

export type PartitionScenarioName = 'member SIGKILL and restart' | 'owner SIGSTOP past session' | 'rolling restart';
export const PARTITION_SCENARIOS: PartitionScenarioName[] = ['member SIGKILL and restart', 'owner SIGSTOP past session', 'rolling restart'];

const keyed = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ key: `k${(from + i) % 32}`, payload: { i: from + i } }));

/** Runs one scenario in a fresh schema of `env.url`, stops every member, and checks what they printed. */
export async function runPartitionScenario(name: PartitionScenarioName, env: PartitionScenarioEnv): Promise<PartitionScenarioResult> {
  const started = Date.now();
  const pool = new pg.Pool({ connectionString: env.url, max: 3 });
  pool.on('error', () => {});
  const rheo = createRheo({ backend: postgresBackend({ pool }, { schema: env.schema }) });
  const members: Member[] = [];
  const start = (id: string, sessionMs: number, handlerMs: number): Member => {
    const m = new Member(env.url, id, env.schema, sessionMs, handlerMs);
    members.push(m);
    return m;
  };
  const n = (count: number): number => Math.max(40, Math.round(count * (env.scale ?? 1)));
  try {
    await rheo.migrate();
    const run = name === 'member SIGKILL and restart' ? sigkill : name === 'owner SIGSTOP past session' ? sigstop : rolling;
    const { facts, staleAccepted, staleRefused } = await run(rheo, start, n);
    const handled = members.flatMap((m) => m.handled);
    const hws = await highWatermarks(rheo);
    const counts = new Map<string, number>();
    for (const h of handled) counts.set(`${h.partition}:${h.sequence}`, (counts.get(`${h.partition}:${h.sequence}`) ?? 0) + 1);
    const result = {
      name,
      events: hws.reduce((a, b) => a + b, 0),
      lost: lostEvents(handled, hws),
      duplicates: duplicatesBeyond(handled, members.flatMap((m) => m.commits)),
      redeliveries: [...counts.values()].filter((c) => c > 1).length,
      zombies: zombieHandlings(handled, members.flatMap((m) => m.commits)).size,
      orderViolations: orderViolations(handled),
      overlaps: overlappingTenures(handled.filter((h) => facts.pausedMember === undefined || h.member !== facts.pausedMember || h.t < (facts.pausedAt as number))),
      staleAccepted,
      staleRefused,
      members,
      facts,
      deadLetters: (await rheo.deadLetters('s', 'g')).length,
      seconds: (Date.now() - started) / 1000,
    };
    return {
      ...result,
      passed:
        result.lost.length + result.duplicates.length + result.orderViolations.length + result.overlaps.length + result.staleAccepted.length + result.deadLetters === 0,
    };
  } finally {
    for (const m of members) m.process.kill('SIGKILL');
    await rheo.close();
    await pool.end();
  }
}

type Start = (id: string, sessionMs: number, handlerMs: number) => Member;
interface Outcome {
  facts: Record<string, unknown>;
  staleAccepted: Committed[];
  staleRefused: number;
}

async function setup(rheo: Rheo, partitions: number): Promise<void> {
  await rheo.createStream('s', { partitions });
  await rheo.createGroup('s', 'g');
}

/** SIGKILL of one of three members on 8 partitions, then a restart; redeliveries only where it died. */
async function sigkill(rheo: Rheo, start: Start, n: (count: number) => number): Promise<Outcome> {
  const sessionMs = 1500;
  await setup(rheo, 8);
  const batch = n(400);
  await rheo.appendBatch('s', keyed(batch));
  const [m1, m2, m3] = ['m1', 'm2', 'm3'].map((id) => start(id, sessionMs, 5)) as [Member, Member, Member];
  await until(async () => {
    const o = await owners(rheo);
    return ['m1', 'm2', 'm3'].every((m) => o.filter((x) => x === m).length >= 2);
  }, 'three members to share the partitions');
  // Work for everyone, so m2 dies in the middle of it.
  await rheo.appendBatch('s', keyed(batch, batch));
  const before = await rheo.members('s', 'g');
  const m2Owned = Object.entries(before.owners).flatMap(([p, o]) => (o === 'm2' ? [Number(p)] : []));
  const m2Handled = m2.handled.length;
  await until(() => m2.handled.length > m2Handled, 'm2 to handle new events', 30_000);

  m2.process.kill('SIGKILL');
  await m2.exited;
  await until(async () => (await owners(rheo)).every((o) => o === 'm1' || o === 'm3'), "m2's partitions to move", 30_000);
  // What the store says once they moved: m2's session ended (it is no longer
  // a member) and the survivors own its partitions under a later group generation.
  const after = await rheo.members('s', 'g');
  const facts: Record<string, unknown> = {
    m2Owned,
    membersAfterKill: after.members.map((m) => m.memberId).sort(),
    generationBeforeKill: before.groupGeneration,
    generationAfterKill: after.groupGeneration,
  };

  await rheo.appendBatch('s', keyed(batch, 2 * batch));
  const m2b = start('m2b', sessionMs, 5);
  await until(async () => (await owners(rheo)).filter((o) => o === 'm2b').length >= 2, 'the restarted member to get partitions back');
  await until(async () => (await rheo.lag('s', 'g')).lag === 0, 'the group to drain');
  await Promise.all([m1, m3, m2b].map((m) => m.terminate()));
  return { facts, staleAccepted: [], staleRefused: 0 };
}

/** A SIGSTOPped owner past its session: its partitions move, and once resumed it commits nothing under its old generations. */
async function sigstop(rheo: Rheo, start: Start, n: (count: number) => number): Promise<Outcome> {
  const sessionMs = 1000;
  await setup(rheo, 4);
  await rheo.appendBatch('s', keyed(n(200)));
  const m1 = start('m1', sessionMs, 40);
  const m2 = start('m2', sessionMs, 40);
  await until(async () => {
    const o = await owners(rheo);
    return o.filter((x) => x === 'm1').length === 2 && o.filter((x) => x === 'm2').length === 2;
  }, 'two members to share the partitions');
  await until(() => m1.handled.length > 0, 'm1 to be working', 30_000);

  m1.process.kill('SIGSTOP');
  const pausedAt = performance.timeOrigin + performance.now();
  await until(async () => (await owners(rheo)).every((o) => o === 'm2'), "m1's partitions to move to m2", 30_000);
  const oldGenerations = new Set(m1.handled.map((h) => `${h.partition}/${h.generation}`));
  const m1Partitions = new Set(m1.handled.map((h) => h.partition));
  await until(() => m2.handled.some((h) => m1Partitions.has(h.partition)), 'm2 to work on a partition of m1', 30_000);
  const resumedAt = performance.timeOrigin + performance.now();
  m1.process.kill('SIGCONT');
  // m1 wakes up with a batch in hand: either its commit is refused, or its
  // next heartbeat tells it first and it drops the batch.
  await until(async () => (await rheo.lag('s', 'g')).lag === 0, 'the group to drain');
  await Promise.all([m1, m2].map((m) => m.terminate()));
  // Commits m1 sent under its old generations once stopped (so, after it
  // resumed: a stopped process sends nothing). One sent before the pause
  // may still answer ok after it: the store checked the fence when it ran it.
  const late = m1.commits.filter((c) => c.sentAt >= pausedAt && oldGenerations.has(`${c.partition}/${c.generation}`));
  // Per partition, the commits that landed come from ever newer generations.
  const landed = [...m1.commits, ...m2.commits].filter((c) => c.status === 'ok').sort((a, b) => a.t - b.t);
  const generationsInOrder = [0, 1, 2, 3].every((p) => {
    const g = landed.filter((c) => c.partition === p).map((c) => c.generation);
    return g.every((x, i) => i === 0 || x >= g[i - 1]!);
  });
  return {
    facts: { pausedMember: 'm1', pausedAt, resumedAt, late, generationsInOrder },
    staleAccepted: late.filter((c) => c.status === 'ok'),
    staleRefused: late.filter((c) => c.status === 'stale_generation').length,
  };
}

/** A rolling restart of all three members under appends: graceful handovers only, so nothing twice and no overlap. */
async function rolling(rheo: Rheo, start: Start, n: (count: number) => number): Promise<Outcome> {
  const sessionMs = 1500;
  await setup(rheo, 8);
  let appended = n(200);
  await rheo.appendBatch('s', keyed(appended));
  let live = ['a1', 'b1', 'c1'].map((id) => start(id, sessionMs, 2));
  await until(async () => {
    const o = await owners(rheo);
    return o.every((x) => x !== null) && new Set(o).size === 3;
  }, 'three members to share the partitions');
  let appending = true;
  const appender = (async () => {
    while (appending) {
      await rheo.appendBatch('s', keyed(20, appended));
      appended += 20;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  try {
    for (const [i, next] of ['a2', 'b2', 'c2'].entries()) {
      await live[i]!.terminate();
      const fresh = start(next, sessionMs, 2);
      live = live.map((m, k) => (k === i ? fresh : m));
      await until(async () => (await owners(rheo)).includes(next), `${next} to get partitions`);
    }
  } finally {
    appending = false;
    await appender;
  }
  await until(async () => (await rheo.lag('s', 'g')).lag === 0, 'the group to drain');
  await Promise.all(live.map((m) => m.terminate()));
  return { facts: {}, staleAccepted: [], staleRefused: 0 };
}

/** The results as one Markdown table, like the chaos table. */
export function formatPartitionTable(results: PartitionScenarioResult[]): string {
  const columns: Array<[string, (r: PartitionScenarioResult) => string]> = [
    ['partition scenario', (r) => r.name],
    ['events', (r) => String(r.events)],
    ['lost', (r) => String(r.lost.length)],
    ['crash redeliveries', (r) => String(r.redeliveries - r.duplicates.length)],
    ['duplicated beyond those', (r) => String(r.duplicates.length)],
    ['handled by a replaced owner', (r) => String(r.zombies)],
    ['order violations', (r) => String(r.orderViolations.length)],
    ['overlapping tenures', (r) => String(r.overlaps.length)],
    ['stale commits accepted', (r) => String(r.staleAccepted.length)],
    ['stale commits refused', (r) => String(r.staleRefused)],
    ['result', (r) => (r.passed ? 'pass' : 'FAIL')],
  ];
  return markdownTable(columns, results);
}

/** Examples of what failed, for a failed run. */
export function formatPartitionFailures(results: PartitionScenarioResult[]): string {
  const lines: string[] = [];
  for (const r of results) {
    if (r.passed) continue;
    lines.push(`${r.name}:`);
    for (const [label, list] of [
      ['lost', r.lost],
      ['duplicated', r.duplicates],
      ['order', r.orderViolations],
      ['overlap', r.overlaps],
      ['stale commit accepted', r.staleAccepted.map((c) => `${c.member} p${c.partition} g${c.generation} upTo ${c.upTo}`)],
    ] as const) {
      for (const text of list.slice(0, 5)) lines.push(`  ${label}: ${text}`);
    }
    if (r.deadLetters > 0) lines.push(`  ${r.deadLetters} dead letter(s)`);
  }
  return lines.join('\n');
}
