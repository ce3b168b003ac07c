import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../../scripts/throwaway-postgres.js';
import { Database } from '../../src/backends/postgres/connection.js';
import { GENERIC_PLAN_MAX_SEGMENTS, PlanChoice } from '../../src/backends/postgres/plan-choice.js';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { isRheoError } from '../../src/core/errors.js';
import { createRheo, type Rheo } from '../../src/rheo.js';

/**
 * A schema whose log has more segment tables than PostgreSQL's lock table
 * holds. A generic plan over the partitioned log locks every table in it on
 * each call (and their indexes when it is planned), so these tests run on a
 * cluster of their own whose lock table is as small as PostgreSQL allows:
 * max_locks_per_transaction 10 for 20 connections, about 420 locks (plus
 * some slack) for the whole cluster. Past GENERIC_PLAN_MAX_SEGMENTS tables,
 * the appends, claims and owned reads must still work, which they did not
 * while every call ran the generic routines (out of shared memory, 53200).
 */
let cluster: ThrowawayPostgres;
beforeAll(async () => {
  cluster = await startThrowawayPostgres({
    durable: false,
    label: 'rheo-many-segments',
    settings: ['max_locks_per_transaction=10', 'max_connections=20'],
  });
}, 120_000);
afterAll(() => cluster?.stop());

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

let schemas = 0;
function open(schema: string, options: { genericPlanSegments?: number } = {}): Rheo {
  const rheo = createRheo({ backend: postgresBackend({ connectionString: cluster.url(), poolConfig: { max: 4 } }, { schema, ...options }) });
  closers.push(() => rheo.close());
  return rheo;
}

async function segmentTables(schema: string): Promise<number> {
  const client = new pg.Client({ connectionString: cluster.url() });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = $1::regclass`, [`"${schema}".events`]);
    return rows[0]!.n;
  } finally {
    await client.end();
  }
}

describe('a log with more segment tables than the lock table holds', () => {
  it('appends, claims, settles and owned reads keep working, from a process that opened them and from a new one', async () => {
    const schema = `many_${++schemas}`;
    const rheo = open(schema);
    await rheo.migrate();
    await rheo.createStream('s', { partitions: 2 });
    await rheo.createGroup('s', 'g');
    await rheo.append('s', { payload: 'before' });
    expect((await rheo.fetch('s', 'g')).length).toBe(1);

    // Each stream opens its first segment: one table more in the log.
    const extra = GENERIC_PLAN_MAX_SEGMENTS + 20;
    for (let i = 0; i < extra; i++) await rheo.createStream(`o${i}`);
    expect(await segmentTables(schema)).toBeGreaterThan(GENERIC_PLAN_MAX_SEGMENTS);

    // Generic plans forced, as before genericPlanSegments: the lock table
    // fills, the calls fail as backend_unavailable, and they wrote nothing.
    const generic = open(schema, { genericPlanSegments: 1_000_000 });
    const targets = Array.from({ length: 8 }, (_, k) => `o${100 + k}`);
    const settled = await Promise.allSettled(targets.map((stream) => generic.appendBatch(stream, [{ payload: 1 }, { payload: 2 }])));
    const refused = settled.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as Error);
    expect(refused.length).toBeGreaterThan(0);
    for (const error of refused) {
      expect(isRheoError(error, 'backend_unavailable'), error.message).toBe(true);
      expect(error.message).toMatch(/lock table is full/);
    }
    const written = await Promise.all(targets.map((stream) => rheo.read(stream, {})));
    expect(written.map((events) => events.length).filter((n) => n !== 0 && n !== 2)).toEqual([]);
    expect(written.filter((events) => events.length === 0).length).toBe(refused.length);

    // Several calls at once on the pool, each on a stream of its own, through
    // the process that opened the segments and through a new one.
    const fresh = open(schema);
    for (const r of [rheo, fresh]) {
      const streams = Array.from({ length: 8 }, (_, k) => `o${k}`);
      await Promise.all(streams.map((stream) => r.createGroup(stream, `g-${r === rheo ? 'a' : 'b'}`)));
      await Promise.all(streams.map((stream) => r.appendBatch(stream, [{ payload: 1 }, { payload: 2 }])));
      const claimed = await Promise.all(streams.map((stream) => r.fetch(stream, `g-${r === rheo ? 'a' : 'b'}`, { limit: 10 })));
      expect(claimed.map((leases) => leases.length)).toEqual(streams.map(() => (r === rheo ? 2 : 4)));
      await Promise.all(claimed.map((leases) => r.ackMany(leases)));
    }

    // Partition ownership: the owned read is the third routine.
    await fresh.append('s', { partition: 1, payload: 'owned' });
    await fresh.createGroup('s', 'owners');
    const seen: unknown[] = [];
    let bothSeen!: () => void;
    const both = new Promise<void>((resolve) => (bothSeen = resolve));
    const consumer = fresh.consume({
      stream: 's',
      group: 'owners',
      assignment: 'partitions',
      handler: (event) => {
        seen.push(event.payload);
        if (seen.length === 2) bothSeen();
      },
    });
    await both;
    await consumer.stop();
    expect(seen.sort()).toEqual(['before', 'owned']);
  }, 120_000);

  it('a full lock table is backend_unavailable, says so, and the call writes nothing', async () => {
    const schema = `many_${++schemas}`;
    const rheo = open(schema);
    await rheo.migrate();
    await rheo.createStream('s');
    // An application transaction that fills the lock table: temporary tables
    // until PostgreSQL refuses one, each in a savepoint so the transaction
    // survives the refusal and keeps the locks it got.
    const client = new pg.Client({ connectionString: cluster.url() });
    await client.connect();
    closers.push(() => client.end());
    await client.query('BEGIN');
    let full = false;
    for (let i = 0; i < 5_000 && !full; i++) {
      await client.query('SAVEPOINT fill');
      try {
        await client.query(`CREATE TEMP TABLE fill_${i} (c int) ON COMMIT DROP`);
        await client.query('RELEASE SAVEPOINT fill');
      } catch (error) {
        expect((error as { code?: string }).code).toBe('53200');
        await client.query('ROLLBACK TO SAVEPOINT fill');
        full = true;
      }
    }
    expect(full).toBe(true);
    const error = await rheo
      .transaction(client)
      .append('s', { payload: 'x' })
      .then(
        () => null,
        (e: unknown) => e,
      );
    await client.query('ROLLBACK');
    expect(isRheoError(error, 'backend_unavailable')).toBe(true);
    expect((error as Error).message).toMatch(/lock table is full.*max_locks_per_transaction.*nothing was written/);
    // Nothing was written, and with the locks gone the same append goes through.
    expect(await rheo.read('s', {})).toEqual([]);
    await rheo.append('s', { payload: 'y' });
    expect((await rheo.read('s', {})).map((e) => e.payload)).toEqual(['y']);
  }, 120_000);
});

describe('genericPlanSegments', () => {
  it('is an integer from 0 to 1,000,000; anything else is refused before a pool opens', () => {
    for (const bad of [-1, 1.5, 1_000_001, Number.NaN, Number.POSITIVE_INFINITY, '10' as unknown as number]) {
      let error: unknown;
      try {
        postgresBackend({ connectionString: 'postgres://127.0.0.1:1/none' }, { genericPlanSegments: bad });
      } catch (e) {
        error = e;
      }
      expect(isRheoError(error, 'invalid_argument'), String(bad)).toBe(true);
      expect((error as Error).message).toMatch(/genericPlanSegments must be an integer from 0 to 1000000/);
    }
    for (const good of [0, 256, 1_000_000]) expect(() => postgresBackend({ connectionString: 'postgres://127.0.0.1:1/none' }, { genericPlanSegments: good })).not.toThrow();
  });

  it('0 plans every call: a schema of a few tables works the same', async () => {
    const schema = `many_${++schemas}`;
    const rheo = open(schema, { genericPlanSegments: 0 });
    await rheo.migrate();
    await rheo.createStream('s', { partitions: 2 });
    await rheo.createGroup('s', 'g');
    await rheo.appendBatch('s', [{ partition: 0, payload: 'a' }, { partition: 1, payload: 'b' }]);
    const leases = await rheo.fetch('s', 'g', { limit: 10 });
    expect(leases.map((l) => l.event.payload).sort()).toEqual(['a', 'b']);
    await rheo.ackMany(leases);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });
});

describe('PlanChoice', () => {
  it("counts on the application's transaction when that holds the pool's only connection", async () => {
    const schema = `many_${++schemas}`;
    await open(schema).migrate();
    // A borrowed pool of one connection, as PGlite has: the application's
    // transaction holds it while rheo's first call needs its count.
    const pool = new pg.Pool({ connectionString: cluster.url(), max: 1 });
    pool.on('error', () => undefined);
    closers.push(() => pool.end());
    const rheo = createRheo({ backend: postgresBackend({ pool }, { schema }) });
    closers.push(() => rheo.close());
    const setup = open(schema);
    await setup.createStream('s');
    // Schema checked, no routine called yet: the append is this backend's first count.
    expect((await rheo.listStreams()).map((s) => s.name)).toEqual(['s']);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await rheo.transaction(client).append('s', { payload: 'in a transaction' });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect((await rheo.read('s', {})).map((e) => e.payload)).toEqual(['in a transaction']);
  }, 20_000);

  it('runs the generic routines up to the limit, the replanned ones past it, and counts again after a segment opened here', async () => {
    const schema = `many_${++schemas}`;
    const rheo = open(schema);
    await rheo.migrate();
    await rheo.createStream('a');
    const pool = new pg.Pool({ connectionString: cluster.url(), max: 1 });
    closers.push(() => pool.end());
    const db = new Database(pool, false);
    const tables = await segmentTables(schema); // segment 0 and stream a's first segment
    const choice = new PlanChoice(db, schema, tables);
    expect(await choice.pick('generic', 'replanned')).toBe('generic');
    expect(choice.segments).toBe(tables);
    await rheo.createStream('b');
    // Counted a moment ago, and nothing says a segment opened: the last choice stands.
    expect(choice.pick('generic', 'replanned')).toBe('generic');
    choice.opened();
    expect(await choice.pick('generic', 'replanned')).toBe('replanned');
    expect(choice.segments).toBe(tables + 1);
    // A schema that does not exist has no log: nothing to lock, generic.
    const none = new PlanChoice(db, `${schema}_none`, 0);
    expect(await none.pick('generic', 'replanned')).toBe('generic');
  });
});
