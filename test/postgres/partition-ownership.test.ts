import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { waitFor } from '../consumer/harness.js';
import { databaseUrl, makeTestBackend } from '../support/postgres.js';

const CHILD = fileURLToPath(new URL('../support/partition-member-child.ts', import.meta.url));

interface Handled {
  member: string;
  t: number;
  partition: number;
  sequence: number;
  key: string;
  generation: number;
}

interface Committed {
  member: string;
  t: number;
  partition: number;
  upTo: number;
  generation: number;
  status: string;
}

/** One member process and what it printed (test/support/partition-member-child.ts). */
class Member {
  readonly id: string;
  readonly process: ChildProcessWithoutNullStreams;
  readonly exited: Promise<NodeJS.Signals | number | null>;
  readonly handled: Handled[] = [];
  readonly commits: Committed[] = [];
  stderr = '';
  #partial = '';

  constructor(id: string, schema: string, sessionMs: number, handlerMs: number) {
    this.id = id;
    this.process = spawn(
      process.execPath,
      ['--import', 'tsx', CHILD, databaseUrl(), schema, 's', 'g', id, String(sessionMs), String(handlerMs)],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
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
      this.commits.push({ member: this.id, t: Number(f[0]), partition: Number(f[1]), upTo: Number(f[2]), generation: Number(f[3]), status: f[4]! });
    }
  }

  async terminate(): Promise<void> {
    this.process.kill('SIGTERM');
    expect(await this.exited, `member ${this.id} should stop cleanly (stderr: ${this.stderr})`).toBe(0);
  }
}

/** Owners per partition as the store sees them. */
async function owners(rheo: Rheo): Promise<Array<string | null>> {
  return Object.values((await rheo.members('s', 'g')).owners);
}

/**
 * Per partition and generation (one owner's tenure), the sequences handled
 * in the order that owner printed them: strictly ascending, no gap.
 */
function checkOrder(handled: Handled[]): void {
  const tenures = new Map<string, number[]>();
  for (const h of handled) {
    const key = `${h.partition}/${h.generation}/${h.member}`;
    const list = tenures.get(key) ?? [];
    list.push(h.sequence);
    tenures.set(key, list);
  }
  for (const [tenure, sequences] of tenures) {
    for (let i = 1; i < sequences.length; i++) {
      expect(sequences[i], `tenure ${tenure} handled ${sequences.join(',')}`).toBe(sequences[i - 1]! + 1);
    }
  }
}

/** Every appended event handled at least once; returns how many were handled more than once. */
function checkAtLeastOnce(handled: Handled[], highWatermarks: number[]): number {
  const seen = new Map<string, number>();
  for (const h of handled) seen.set(`${h.partition}:${h.sequence}`, (seen.get(`${h.partition}:${h.sequence}`) ?? 0) + 1);
  highWatermarks.forEach((hw, p) => {
    for (let s = 1; s <= hw; s++) expect(seen.has(`${p}:${s}`), `event ${p}:${s} was never handled`).toBe(true);
  });
  return [...seen.values()].filter((n) => n > 1).length;
}

async function highWatermarks(rheo: Rheo): Promise<number[]> {
  return Object.values((await rheo.lag('s', 'g')).partitions).map((p) => p.highWatermark);
}

// Real processes on a real PostgreSQL, with the database clock as the time
// authority for sessions; waits are on conditions, bounded only to fail.
describe('partition ownership across processes (postgres)', () => {
  let members: Member[] = [];
  let rheo: Rheo | null = null;

  afterEach(async () => {
    for (const m of members) m.process.kill('SIGKILL');
    members = [];
    await rheo?.close();
    rheo = null;
  });

  async function setup(partitions: number): Promise<{ rheo: Rheo; schema: string }> {
    const backend = await makeTestBackend();
    rheo = createRheo({ backend });
    await rheo.createStream('s', { partitions });
    await rheo.createGroup('s', 'g');
    return { rheo, schema: backend.schema };
  }

  function start(id: string, schema: string, sessionMs: number, handlerMs: number): Member {
    const m = new Member(id, schema, sessionMs, handlerMs);
    members.push(m);
    return m;
  }

  const keyed = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ key: `k${(from + i) % 32}`, payload: { i: from + i } }));

  it('SIGKILL of one of three members: its partitions move within the session, come back on restart, nothing is lost', async () => {
    const sessionMs = 1500;
    const { rheo, schema } = await setup(8);
    await rheo.appendBatch('s', keyed(400));
    const [m1, m2, m3] = ['m1', 'm2', 'm3'].map((id) => start(id, schema, sessionMs, 5)) as [Member, Member, Member];
    await waitFor(async () => {
      const o = await owners(rheo);
      return ['m1', 'm2', 'm3'].every((m) => o.filter((x) => x === m).length >= 2);
    }, 'three members to share the partitions', 60_000);
    // Work for everyone, so m2 dies in the middle of it.
    await rheo.appendBatch('s', keyed(400, 400));
    const m2Owned = (await owners(rheo)).flatMap((o, p) => (o === 'm2' ? [p] : []));
    await waitFor(() => m2.handled.some((h) => h.sequence > 50), 'm2 to handle new events', 30_000);

    m2.process.kill('SIGKILL');
    const killedAt = Date.now();
    expect(await m2.exited).toBe('SIGKILL');
    await waitFor(async () => (await owners(rheo)).every((o) => o === 'm1' || o === 'm3'), "m2's partitions to move", 30_000);
    const movedAfterMs = Date.now() - killedAt;
    // Free at the session's end, granted at the next heartbeat of a survivor (sessionMs / 5).
    expect(movedAfterMs).toBeLessThan(sessionMs + 1_500);

    await rheo.appendBatch('s', keyed(400, 800));
    const m2b = start('m2b', schema, sessionMs, 5);
    await waitFor(async () => (await owners(rheo)).filter((o) => o === 'm2b').length >= 2, 'the restarted member to get partitions back', 60_000);
    await waitFor(async () => (await rheo.lag('s', 'g')).lag === 0, 'the group to drain', 60_000);
    await Promise.all([m1, m3, m2b].map((m) => m.terminate()));

    const handled = [m1, m2, m3, m2b].flatMap((m) => m.handled);
    checkOrder(handled);
    checkAtLeastOnce(handled, await highWatermarks(rheo));
    // Redeliveries only where m2 died: every duplicate is of a partition m2 owned.
    const m2Partitions = new Set([...m2Owned, ...m2.handled.map((h) => h.partition)]);
    const counts = new Map<string, Handled[]>();
    for (const h of handled) counts.set(`${h.partition}:${h.sequence}`, [...(counts.get(`${h.partition}:${h.sequence}`) ?? []), h]);
    for (const [, runs] of counts) if (runs.length > 1) expect(m2Partitions.has(runs[0]!.partition)).toBe(true);
    expect(await rheo.deadLetters('s', 'g')).toEqual([]);
  }, 180_000);

  it('a SIGSTOPped owner past its session cannot commit after the rebalance; its work is redone', async () => {
    const sessionMs = 1000;
    const { rheo, schema } = await setup(4);
    await rheo.appendBatch('s', keyed(200));
    const m1 = start('m1', schema, sessionMs, 40);
    const m2 = start('m2', schema, sessionMs, 40);
    await waitFor(async () => {
      const o = await owners(rheo);
      return o.filter((x) => x === 'm1').length === 2 && o.filter((x) => x === 'm2').length === 2;
    }, 'two members to share the partitions', 60_000);
    await waitFor(() => m1.handled.length > 0, 'm1 to be working', 30_000);

    m1.process.kill('SIGSTOP');
    await waitFor(async () => (await owners(rheo)).every((o) => o === 'm2'), "m1's partitions to move to m2", 30_000);
    const oldGenerations = new Set(m1.handled.map((h) => `${h.partition}/${h.generation}`));
    const committedBefore = m1.commits.length;
    await waitFor(() => m2.handled.some((h) => oldGenerations.has(`${h.partition}/${h.generation - 1}`) || m1.handled.some((x) => x.partition === h.partition)), 'm2 to work on a partition of m1', 30_000);
    const resumedAt = performance.timeOrigin + performance.now();
    m1.process.kill('SIGCONT');
    // m1 wakes up with a batch in hand: either its commit is refused, or its
    // next heartbeat tells it first and it drops the batch. Either way it
    // never commits under a generation it held before the pause.
    await waitFor(async () => (await rheo.lag('s', 'g')).lag === 0, 'the group to drain', 60_000);
    const late = m1.commits.slice(committedBefore).filter((c) => oldGenerations.has(`${c.partition}/${c.generation}`));
    expect(late.filter((c) => c.status === 'ok')).toEqual([]);
    expect(late.every((c) => c.status === 'stale_generation' && c.t > resumedAt)).toBe(true);
    // Per partition, the commits that landed come from ever newer generations.
    const landed = [...m1.commits, ...m2.commits].filter((c) => c.status === 'ok').sort((a, b) => a.t - b.t);
    for (let p = 0; p < 4; p++) {
      const generations = landed.filter((c) => c.partition === p).map((c) => c.generation);
      expect(generations, `partition ${p}`).toEqual([...generations].sort((a, b) => a - b));
    }
    await waitFor(async () => (await rheo.lag('s', 'g')).lag === 0, 'the group to drain', 60_000);
    await Promise.all([m1, m2].map((m) => m.terminate()));
    checkAtLeastOnce([...m1.handled, ...m2.handled], await highWatermarks(rheo));
    checkOrder([...m1.handled, ...m2.handled]);
  }, 180_000);

  it('a rolling restart of every member loses nothing, and no two members ever handle one partition at once', async () => {
    const sessionMs = 1500;
    const { rheo, schema } = await setup(8);
    await rheo.appendBatch('s', keyed(200));
    let live = ['a1', 'b1', 'c1'].map((id) => start(id, schema, sessionMs, 2));
    await waitFor(async () => (await owners(rheo)).every((o) => o !== null) && new Set(await owners(rheo)).size === 3, 'three members to share the partitions', 60_000);
    let appended = 200;
    let appending = true;
    const appender = (async () => {
      while (appending) {
        await rheo.appendBatch('s', keyed(20, appended));
        appended += 20;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    for (const [i, next] of ['a2', 'b2', 'c2'].entries()) {
      await live[i]!.terminate();
      const fresh = start(next, schema, sessionMs, 2);
      live = live.map((m, k) => (k === i ? fresh : m));
      await waitFor(async () => (await owners(rheo)).includes(next), `${next} to get partitions`, 60_000);
    }
    appending = false;
    await appender;
    await waitFor(async () => (await rheo.lag('s', 'g')).lag === 0, 'the group to drain', 60_000);
    await Promise.all(live.map((m) => m.terminate()));

    const handled = members.flatMap((m) => m.handled);
    checkOrder(handled);
    const duplicates = checkAtLeastOnce(handled, await highWatermarks(rheo));
    // Every handover was graceful (finish, commit, release): nothing twice.
    expect(duplicates).toBe(0);
    // One owner at a time: per partition, a tenure's last handling precedes the next tenure's first.
    const byPartition = new Map<number, Handled[]>();
    for (const h of handled) byPartition.set(h.partition, [...(byPartition.get(h.partition) ?? []), h]);
    for (const [p, list] of byPartition) {
      const tenures = [...new Set(list.map((h) => h.generation))].sort((a, b) => a - b);
      for (let i = 1; i < tenures.length; i++) {
        const lastOfPrevious = Math.max(...list.filter((h) => h.generation === tenures[i - 1]).map((h) => h.t));
        const firstOfNext = Math.min(...list.filter((h) => h.generation === tenures[i]).map((h) => h.t));
        expect(lastOfPrevious, `partition ${p}: generation ${tenures[i - 1]} overlaps ${tenures[i]}`).toBeLessThan(firstOfNext);
      }
    }
  }, 240_000);
});
