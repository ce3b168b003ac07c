/**
 * `npx tsx bench/segment-count.ts`: what the number of tables in the
 * partitioned log (every segment of every stream in the schema) costs one
 * stream's appends and claims, and what planning per call costs instead.
 *
 * Three databases on one throwaway PostgreSQL 15 (default durability, as the
 * bench), each with the measured stream and group:
 *
 * - `alone`: nothing else, 3 tables in the log; generic plans;
 * - `generic`: `--others` more streams (one segment table each), generic
 *   plans forced (`genericPlanSegments` past the count), as every rheo
 *   before this option ran;
 * - `default`: the same streams, with the default `genericPlanSegments`
 *   (256): past it (the default 1,000 others), the append, the claim and the
 *   owned read are planned per call.
 *
 * Each round runs every case on every database, the databases' order
 * alternating: an idle append of one event, an idle fetch of one and its
 * ack (15 ms of idleness before each, the state a woken consumer's
 * connection is in), then an appendBatch of 100 and a fetch of 100 with
 * its ackMany back to back. Then, per database, how many relation locks one
 * append holds (its transaction kept open). Medians over the rounds.
 *
 *   npx tsx bench/segment-count.ts                    # 1,000 other streams, 60 rounds
 *   npx tsx bench/segment-count.ts --others=200 --rounds=100
 */
import pg from 'pg';

import { createRheo, type Rheo } from '../src/index.js';
import { postgresBackend } from '../src/postgres.js';
import { startThrowawayPostgres } from '../scripts/throwaway-postgres.js';
import { median, sleep } from './lib/stats.js';

const IDLE_MS = 15;

function intArg(name: string, fallback: number): number {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  const value = arg ? Number(arg.slice(name.length + 3)) : fallback;
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer, got ${arg}`);
  return value;
}
const others = intArg('others', 1000);
const rounds = intArg('rounds', 60);

interface Db {
  name: 'alone' | 'generic' | 'default';
  url: string;
  rheo: Rheo;
  appender: Rheo;
}

const cluster = await startThrowawayPostgres({ durable: true, label: 'rheo-segment-count' });
const admin = new pg.Client({ connectionString: cluster.url() });
await admin.connect();
const dbs: Db[] = [];
try {
  for (const name of ['alone', 'generic', 'default'] as const) {
    await admin.query(`CREATE DATABASE seg_${name}`);
    const url = new URL(cluster.url());
    url.pathname = `/seg_${name}`;
    const open = () =>
      createRheo({
        backend: postgresBackend(
          { connectionString: url.toString() },
          { notify: false, ...(name === 'generic' ? { genericPlanSegments: 1_000_000 } : {}) },
        ),
      });
    const db: Db = { name, url: url.toString(), rheo: open(), appender: open() };
    dbs.push(db);
    await db.rheo.migrate();
    for (const stream of ['idle', 'hot']) {
      await db.rheo.createStream(stream);
      await db.rheo.createGroup(stream, 'g');
    }
    if (name !== 'alone') for (let k = 0; k < others; k++) await db.rheo.createStream(`other-${k}`);
  }

  const samples = new Map<string, number[]>();
  const record = (db: Db, what: string, ms: number) => {
    const key = `${what}\t${db.name}`;
    samples.set(key, [...(samples.get(key) ?? []), ms]);
  };
  const timed = async <T>(run: () => Promise<T>): Promise<[T, number]> => {
    const start = performance.now();
    const result = await run();
    return [result, performance.now() - start];
  };
  for (let round = -5; round < rounds; round++) {
    for (const db of round % 2 === 0 ? dbs : [...dbs].reverse()) {
      await sleep(IDLE_MS);
      const [, append] = await timed(() => db.appender.append('idle', { payload: { round } }));
      await sleep(IDLE_MS);
      const [leases, fetch] = await timed(() => db.rheo.fetch('idle', 'g', { limit: 10 }));
      if (leases.length !== 1) throw new Error(`${db.name}: the idle fetch leased ${leases.length} events, expected 1`);
      await sleep(IDLE_MS);
      const [, ack] = await timed(() => db.rheo.ackMany(leases));
      const [, batch] = await timed(() => db.appender.appendBatch('hot', Array.from({ length: 100 }, (_, i) => ({ payload: { i } }))));
      const [hot, drain] = await timed(async () => {
        const got = await db.rheo.fetch('hot', 'g', { limit: 100 });
        await db.rheo.ackMany(got);
        return got;
      });
      if (hot.length !== 100) throw new Error(`${db.name}: the hot fetch leased ${hot.length} events, expected 100`);
      if (round < 0) continue;
      record(db, 'idle append, 1 event', append);
      record(db, 'idle fetch, 1 event', fetch);
      record(db, 'idle ack, 1 event', ack);
      record(db, 'appendBatch(100)', batch);
      record(db, 'fetch(100) + ackMany', drain);
    }
  }

  // Relation locks one append holds, in a transaction kept open.
  const locks = new Map<string, number>();
  for (const db of dbs) {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query('BEGIN');
      const backend = postgresBackend({ connectionString: db.url }, db.name === 'generic' ? { genericPlanSegments: 1_000_000 } : {});
      const rheo = createRheo({ backend });
      try {
        await rheo.transaction(client).append('idle', { payload: 'locks' });
        const { rows } = await client.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'relation'",
        );
        locks.set(db.name, rows[0]!.n);
      } finally {
        await client.query('ROLLBACK');
        await rheo.close();
      }
    } finally {
      await client.end();
    }
  }

  const tables = new Map<string, number>();
  for (const db of dbs) {
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const { rows } = await client.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = 'rheo.events'::regclass");
    tables.set(db.name, rows[0]!.n);
    await client.end();
  }

  console.log(`\nPostgreSQL ${cluster.version}, ${others} other streams, median of ${rounds} rounds (ms; idle cases after ${IDLE_MS} ms idle)`);
  const header = ['case', ...dbs.map((d) => `${d.name} (${tables.get(d.name)} tables)`)];
  console.log(`  ${header[0]!.padEnd(26)} ${header.slice(1).map((h) => h.padStart(24)).join(' ')}`);
  const cases = [...new Set([...samples.keys()].map((k) => k.split('\t')[0]!))];
  for (const what of cases) {
    const cells = dbs.map((d) => median(samples.get(`${what}\t${d.name}`) ?? []).toFixed(2).padStart(24));
    console.log(`  ${what.padEnd(26)} ${cells.join(' ')}`);
  }
  console.log(`  ${'relation locks of 1 append'.padEnd(26)} ${dbs.map((d) => String(locks.get(d.name)).padStart(24)).join(' ')}`);
} finally {
  for (const db of dbs) {
    await db.appender.close().catch(() => undefined);
    await db.rheo.close().catch(() => undefined);
  }
  await admin.end();
  cluster.stop();
}
