import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

import type { Rheo } from '../../src/index.js';
import { log, type BenchContext } from '../lib/context.js';
import { CpuSpan } from '../lib/cpu.js';
import { openRheo } from '../lib/rheo-setup.js';
import { now, rate, sleep, waitUntil } from '../lib/stats.js';
import { inChunks, payload, EVENT_TYPE } from '../lib/workload.js';

export const PARTITIONS = '7 partition ownership';
const PARTITION_COUNT = 8;
const BATCH = 100;
const MEMBER = fileURLToPath(new URL('../lib/partition-member.ts', import.meta.url));

const COMPETING_DEMAND = 500;
/**
 * The drains are timed by polling `lag` from this process. Every poll is two
 * statements on the server under test (0.5 ms of it per poll over a 200k
 * backlog), so polling every 2 ms took a quarter of a core from the members
 * on a 2-core machine, which the raw ceilings never paid. Every 25 ms costs
 * about 2 % and adds at most 25 ms to a drain of several seconds.
 */
const DRAIN_POLL_MS = 25;

export const PARTITION_CASES = {
  raw: `raw log ceiling: ${PARTITION_COUNT} loops of read ${BATCH} + cursor UPDATE`,
  rawQueue: `raw queue ceiling: ${PARTITION_COUNT} loops of BEGIN, SELECT ${BATCH} FOR UPDATE SKIP LOCKED, DELETE, COMMIT`,
  competingOne: `rheo competing mode (leases), 1 process (maxDemand ${COMPETING_DEMAND}, concurrency 50)`,
  competingTwo: `rheo competing mode (leases), 2 processes (maxDemand ${COMPETING_DEMAND}, concurrency 50 each)`,
  one: `rheo partition mode, 1 process (batch ${BATCH})`,
  two: `rheo partition mode, 2 processes (batch ${BATCH})`,
} as const;

/**
 * Scenario 7: draining a partitioned backlog by ownership (docs/design.md#two-ways-to-consume-a-group) on
 * PostgreSQL, next to the hand-written ceiling of the same model measured
 * on the same server: per partition, read the next `BATCH` events in
 * sequence order and UPDATE a cursor row, one loop per partition in
 * parallel. rheo runs in member processes, started on a group that begins
 * past the backlog and balanced before the clock starts; the clock runs
 * from a `resetGroup` to the log's start (which fences the owners, so their
 * next heartbeat restarts them at frontier 0) to lag 0, over the same
 * pre-filled backlog as the ceiling.
 *
 * The per-event queue ceiling, same server, same payloads: the backlog
 * copied into a plain table, drained by loops that each claim `BATCH` rows
 * with `FOR UPDATE SKIP LOCKED` and delete them in one transaction (what a
 * hand-written job queue does). Competing mode (leases, no ownership) drains
 * the same backlog with one and with two member processes, timed the same
 * way (group past the backlog, members started, reset to the start).
 *
 * Each case also records the CPU it cost per event: the client side (the
 * raw loops in this process, or the member processes) and PostgreSQL (every
 * `postgres` process on this machine, from /proc), since two member
 * processes and the server share the machine's cores.
 */
export async function partitionsScenario(ctx: BenchContext): Promise<void> {
  if (!ctx.pg) return ctx.skip(PARTITIONS, 'no database');
  const events = ctx.size(200_000, 20_000);
  const url = await ctx.pg.createDatabase('rheo_bench_partitions');
  const rheo = await openRheo('postgres', { url });
  try {
    for (let run = 0; run < ctx.runs; run++) {
      const stream = `p${run}`;
      await rheo.createStream(stream, { partitions: PARTITION_COUNT });
      await append(rheo, stream, events);
      recordDrain(ctx, PARTITION_CASES.raw, await rawLogCeiling(url, stream, events));
      recordDrain(ctx, PARTITION_CASES.rawQueue, await rawQueueCeiling(url, stream, events));
      recordDrain(ctx, PARTITION_CASES.one, await drainWithMembers(rheo, url, stream, `g${run}a`, events, 1));
      recordDrain(ctx, PARTITION_CASES.two, await drainWithMembers(rheo, url, stream, `g${run}b`, events, 2));
      recordDrain(ctx, PARTITION_CASES.competingOne, await drainCompeting(rheo, url, stream, `g${run}c`, events, 1));
      recordDrain(ctx, PARTITION_CASES.competingTwo, await drainCompeting(rheo, url, stream, `g${run}d`, events, 2));
      log(`    run ${run + 1}: ${Object.values(PARTITION_CASES).map((c) => Math.round(ctx.get(PARTITIONS, c)!.samples[run]!)).join(' / ')} events/s`);
    }
  } finally {
    await rheo.close();
    await ctx.pg.dropDatabase('rheo_bench_partitions');
  }
}

/** A drain's rate, and the CPU it cost per event on each side (clients: the loop or the member processes). */
interface DrainResult {
  rate: number;
  clientUs: number;
  postgresUs: number | null;
}

/** Where two processes and PostgreSQL share two vCPUs, CPU per event is what bounds a drain. */
function recordDrain(ctx: BenchContext, name: string, d: DrainResult): void {
  ctx.record(PARTITIONS, name, 'events/s', d.rate);
  ctx.record(PARTITIONS, `${name}: client CPU per event`, 'µs', d.clientUs);
  if (d.postgresUs !== null) ctx.record(PARTITIONS, `${name}: PostgreSQL CPU per event`, 'µs', d.postgresUs);
}

async function append(rheo: Rheo, stream: string, count: number): Promise<void> {
  await inChunks(count, 5_000, async (start, end) => {
    const inputs = [];
    for (let i = start; i < end; i++) inputs.push({ type: EVENT_TYPE, partition: i % PARTITION_COUNT, payload: payload(i) });
    await rheo.appendBatch(stream, inputs);
  });
}

/** The ceiling: per partition, SELECT the next BATCH events and UPDATE a cursor, all partitions in parallel. */
async function rawLogCeiling(url: string, stream: string, events: number): Promise<DrainResult> {
  const pool = new pg.Pool({ connectionString: url, max: PARTITION_COUNT });
  try {
    const [{ id }] = (await pool.query<{ id: number }>('SELECT id FROM rheo.streams WHERE name = $1', [stream])).rows as [{ id: number }];
    await pool.query('CREATE TABLE IF NOT EXISTS bench_cursors (stream text, partition int, cursor bigint, PRIMARY KEY (stream, partition))');
    await pool.query(
      'INSERT INTO bench_cursors SELECT $1, p, 0 FROM generate_series(0, $2::int - 1) p ON CONFLICT DO NOTHING',
      [stream, PARTITION_COUNT],
    );
    let done = 0;
    const cpu = new CpuSpan([], true);
    cpu.start();
    const t0 = now();
    await Promise.all(
      Array.from({ length: PARTITION_COUNT }, async (_, partition) => {
        let cursor = 0;
        for (;;) {
          const { rows } = await pool.query<{ sequence: string }>(
            'SELECT sequence, id, type, key, payload, metadata, ts FROM rheo.events WHERE stream_id = $1 AND partition = $2 AND sequence > $3 ORDER BY sequence LIMIT $4',
            [id, partition, cursor, BATCH],
          );
          if (rows.length === 0) return;
          cursor = Number(rows[rows.length - 1]!.sequence);
          await pool.query('UPDATE bench_cursors SET cursor = $3 WHERE stream = $1 AND partition = $2', [stream, partition, cursor]);
          done += rows.length;
        }
      }),
    );
    const elapsed = now() - t0;
    if (done !== events) throw new Error(`raw log loop read ${done} of ${events}`);
    return { rate: rate(events, elapsed), ...spent(cpu, events) };
  } finally {
    await pool.end();
  }
}

/** The queue ceiling: the backlog copied into a table, then claimed with SKIP LOCKED and deleted, BATCH rows per transaction. */
async function rawQueueCeiling(url: string, stream: string, events: number): Promise<DrainResult> {
  const pool = new pg.Pool({ connectionString: url, max: PARTITION_COUNT });
  try {
    await pool.query('DROP TABLE IF EXISTS bench_queue');
    await pool.query('CREATE TABLE bench_queue (id bigserial PRIMARY KEY, type text NOT NULL, payload jsonb NOT NULL)');
    await pool.query(
      'INSERT INTO bench_queue (type, payload) SELECT e.type, e.payload FROM rheo.events e JOIN rheo.streams s ON s.id = e.stream_id WHERE s.name = $1 ORDER BY e.stream_id, e.partition, e.sequence',
      [stream],
    );
    await pool.query('VACUUM ANALYZE bench_queue');
    let done = 0;
    const cpu = new CpuSpan([], true);
    cpu.start();
    const t0 = now();
    await Promise.all(
      Array.from({ length: PARTITION_COUNT }, async () => {
        const client = await pool.connect();
        try {
          for (;;) {
            await client.query('BEGIN');
            const { rows } = await client.query<{ id: string }>(
              'SELECT id, type, payload FROM bench_queue ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED',
              [BATCH],
            );
            if (rows.length > 0) {
              await client.query('DELETE FROM bench_queue WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
            }
            await client.query('COMMIT');
            if (rows.length === 0) return;
            done += rows.length;
          }
        } catch (error) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw error;
        } finally {
          client.release();
        }
      }),
    );
    const elapsed = now() - t0;
    if (done !== events) throw new Error(`raw queue loop claimed ${done} of ${events}`);
    return { rate: rate(events, elapsed), ...spent(cpu, events) };
  } finally {
    await pool.query('DROP TABLE IF EXISTS bench_queue').catch(() => undefined);
    await pool.end();
  }
}

/** Competing mode: `processes` lease consumers on a group past the backlog, started, then reset to the start and timed to lag 0. */
async function drainCompeting(rheo: Rheo, url: string, stream: string, group: string, events: number, processes: number): Promise<DrainResult> {
  await rheo.createGroup(stream, group, { startAfter: events / PARTITION_COUNT });
  const children: ChildProcess[] = [];
  let ready = 0;
  try {
    for (let i = 0; i < processes; i++) {
      const child = spawn(process.execPath, ['--import', 'tsx', MEMBER, url, stream, group, String(COMPETING_DEMAND), 'competing'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      child.stdout?.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('ready')) ready++;
      });
      children.push(child);
    }
    await waitUntil('competing members to start', () => ready === processes, 60_000, 20);
    // Let each consumer make its first (empty) fetch and go idle.
    await sleep(500);
    const cpu = new CpuSpan(children.map((c) => c.pid!));
    cpu.start();
    const t0 = now();
    await rheo.resetGroup(stream, group, { confirm: true, startAfter: 0 });
    await waitUntil('the competing members to drain', async () => (await rheo.lag(stream, group)).lag === 0, 300_000, DRAIN_POLL_MS);
    return { rate: rate(events, now() - t0), ...spent(cpu, events) };
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve(null) : c.once('exit', resolve)))));
  }
}

/** Starts `processes` members on a group past the backlog, waits for balance, resets it to the start and times the drain. */
async function drainWithMembers(rheo: Rheo, url: string, stream: string, group: string, events: number, processes: number): Promise<DrainResult> {
  await rheo.createGroup(stream, group, { startAfter: events / PARTITION_COUNT });
  const children: ChildProcess[] = [];
  try {
    for (let i = 0; i < processes; i++) {
      children.push(spawn(process.execPath, ['--import', 'tsx', MEMBER, url, stream, group, String(BATCH), 'partitions'], { stdio: ['ignore', 'ignore', 'inherit'] }));
    }
    const share = PARTITION_COUNT / processes;
    await waitUntil(
      'a balanced group',
      async () => {
        const m = await rheo.members(stream, group);
        return m.members.length === processes && m.members.every((x) => x.partitions.length === share && x.revoking.length === 0);
      },
      60_000,
      20,
    );
    const cpu = new CpuSpan(children.map((c) => c.pid!));
    cpu.start();
    const t0 = now();
    await rheo.resetGroup(stream, group, { confirm: true, startAfter: 0 });
    await waitUntil('the members to drain', async () => (await rheo.lag(stream, group)).lag === 0, 300_000, DRAIN_POLL_MS);
    return { rate: rate(events, now() - t0), ...spent(cpu, events) };
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve(null) : c.once('exit', resolve)))));
  }
}

function spent(cpu: CpuSpan, events: number): { clientUs: number; postgresUs: number | null } {
  const { processUs, postgresUs } = cpu.stop(events);
  return { clientUs: processUs, postgresUs };
}
