import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { classifyError } from '../../src/backends/postgres/errors.js';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { LATEST_VERSION } from '../../src/backends/postgres/migrations/index.js';
import { claimRoutine, ROUTINES } from '../../src/backends/postgres/routines.js';
import { ManualClock } from '../../src/core/clock.js';
import { RheoError, type RheoErrorCode } from '../../src/core/errors.js';
import { createRheo } from '../../src/rheo.js';
import { databaseUrl, makeTestBackend, sharedPool, uniqueSchema } from '../support/postgres.js';

async function failure(promise: Promise<unknown>): Promise<RheoError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(RheoError);
    return error as RheoError;
  }
  throw new Error('expected the call to fail');
}

async function codeOf(promise: Promise<unknown>): Promise<RheoErrorCode> {
  return (await failure(promise)).code;
}

/** Polls (bounded) until a backend of `application_name` waits on a lock; returns its pid. */
async function blockedPid(applicationName: string): Promise<number> {
  for (let i = 0; i < 500; i++) {
    const { rows } = await sharedPool().query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
      [applicationName],
    );
    if (rows[0]) return rows[0].pid;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no blocked connection of ${applicationName}`);
}

describe('postgres error classification', () => {
  it('a connection killed after a write was sent is ambiguous; a killed read is backend_unavailable', async () => {
    const schema = uniqueSchema();
    const app = `rheo-kill-${schema}`;
    const rheo = createRheo({
      backend: postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 2, application_name: app } }, { schema }),
    });
    await rheo.migrate();
    await rheo.createStream('s');
    // Hold the partition counter's row lock so the append blocks mid-statement.
    const blocker = await sharedPool().connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query(`SELECT * FROM "${schema}".stream_partitions FOR UPDATE`);
      const append = codeOf(rheo.append('s', { payload: 1 }));
      await sharedPool().query('SELECT pg_terminate_backend($1)', [await blockedPid(app)]);
      expect(await append).toBe('ambiguous');
      await blocker.query('ROLLBACK');
      // A read blocked by an exclusive table lock, then killed.
      await blocker.query('BEGIN');
      await blocker.query(`LOCK TABLE "${schema}".events IN ACCESS EXCLUSIVE MODE`);
      const read = codeOf(rheo.read('s'));
      await sharedPool().query('SELECT pg_terminate_backend($1)', [await blockedPid(app)]);
      expect(await read).toBe('backend_unavailable');
      await blocker.query('ROLLBACK');
    } finally {
      blocker.release();
    }
    // The pool replaced the dead connections: the backend works again.
    expect((await rheo.append('s', { payload: 2 })).sequence).toBe(1);
    // Idle pooled connections killed under it are replaced transparently.
    await sharedPool().query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app]);
    let after: unknown = null;
    for (let i = 0; i < 3 && after === null; i++) {
      after = await rheo.read('s').catch((error: unknown) => {
        expect((error as RheoError).code).toBe('backend_unavailable');
        return null;
      });
    }
    expect(after).toHaveLength(1);
    await rheo.close();
  });

  it('a write refused by pg because its connection had already failed was never sent: backend_unavailable', async () => {
    const client = new pg.Client({ connectionString: databaseUrl() });
    const failed = new Promise<void>((resolve) => client.once('error', () => resolve()));
    await client.connect();
    const [{ pid }] = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
    await sharedPool().query('SELECT pg_terminate_backend($1)', [pid]);
    await failed;
    const refused = await client.query('SELECT 1').then(
      () => null,
      (error: unknown) => error,
    );
    await client.end().catch(() => undefined);
    expect(String(refused)).toMatch(/not queryable/);
    const error = classifyError(refused, { action: 'ack', sent: true, writes: true });
    expect(error.code).toBe('backend_unavailable');
    expect(error.cause).toBe(refused);
  });

  it('an unreachable server is backend_unavailable', async () => {
    const backend = postgresBackend(
      { connectionString: 'postgres://postgres@127.0.0.1:1/none', poolConfig: { connectionTimeoutMillis: 2000 } },
      { schema: 'nowhere' },
    );
    expect(await codeOf(backend.migrate())).toBe('backend_unavailable');
    expect(await codeOf(backend.listStreams())).toBe('backend_unavailable');
    const error = await failure(backend.createStream('s', 1));
    expect(error.code).toBe('backend_unavailable');
    expect(error.cause).toBeDefined();
    await backend.close();
  });

  it('an unmigrated schema is schema_version, never a raw pg error', async () => {
    const backend = postgresBackend({ pool: sharedPool() }, { schema: uniqueSchema() });
    expect(await codeOf(backend.listStreams())).toBe('schema_version');
    await backend.close();
  });

  it("a schema missing this rheo's routines is schema_version until migrate() installs them", async () => {
    const backend = await makeTestBackend();
    await backend.createStream('s', 1);
    await backend.createGroup('s', 'g', { start: { kind: 'after', after: 0, perPartition: {} }, maxAttempts: 5 });
    const { rows } = await sharedPool().query<{ proname: string; proconfig: string[] }>(
      `SELECT p.proname, p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname LIKE 'rheo\\_%' ORDER BY 1`,
      [backend.schema],
    );
    expect(rows.map((r) => r.proname)).toEqual(ROUTINES.map((r) => r.name).sort());
    expect(rows.every((r) => r.proconfig.includes(r.proname.includes('_replanned_') ? 'plan_cache_mode=force_custom_plan' : 'plan_cache_mode=force_generic_plan'))).toBe(true);

    // As after upgrading rheo without running migrate(): the claim routine of this version is missing.
    await sharedPool().query(`DROP FUNCTION "${backend.schema}".${claimRoutine.name}`);
    const fetch = () => backend.fetch('s', 'g', { limit: 1, consumerId: 'c', leaseMs: 1000, partitions: null, maxBytes: 1 << 24 });
    const error = await failure(fetch());
    expect(error.code).toBe('schema_version');
    expect(error.message).toContain('migrate()');
    await backend.migrate();
    expect(await fetch()).toEqual([]);
  });

  it('a backend that did not migrate refuses a schema at another version before its first statement', async () => {
    const newer = await makeTestBackend();
    await sharedPool().query(`INSERT INTO "${newer.schema}".migrations (version, name) VALUES (999, 'from the future')`);
    const other = postgresBackend({ pool: sharedPool() }, { schema: newer.schema });
    const tooNew = await failure(other.listStreams());
    expect(tooNew.code).toBe('schema_version');
    expect(tooNew.message).toContain('999');
    await other.close();

    const older = await makeTestBackend();
    await sharedPool().query(`DELETE FROM "${older.schema}".migrations WHERE version = $1`, [LATEST_VERSION]);
    const behind = postgresBackend({ pool: sharedPool() }, { schema: older.schema });
    for (const call of [() => behind.listStreams(), () => behind.settle([])]) {
      const error = await failure(call());
      expect(error.code).toBe('schema_version');
      expect(error.message).toContain('call rheo.migrate()');
    }
    // A backend that migrated the schema itself trusts it from then on.
    expect(await older.listStreams()).toEqual([]);
    await behind.close();
  });

  it('refuses a schema migrated by a newer rheo', async () => {
    const backend = await makeTestBackend();
    await sharedPool().query(`INSERT INTO "${backend.schema}".migrations (version, name) VALUES (999, 'from the future')`);
    const error = await failure(backend.migrate());
    expect(error.code).toBe('schema_version');
    expect(error.message).toContain('999');
  });

  it('an appendBatch the database rejects writes nothing (and is invalid_argument)', async () => {
    const backend = await makeTestBackend(new ManualClock());
    await backend.createStream('s', 2);
    const item = (payload: unknown, partition: number) => ({
      id: null,
      type: 'event',
      key: null,
      payload: payload as string,
      metadata: {},
      partition,
      timestamp: new Date(),
      size: 16,
    });
    // Bypasses the facade, which would reject U+0000 itself: the database must too.
    const error = await failure(backend.append('s', [item('ok', 0), item('bad\u0000', 1), item('ok', 1)]));
    expect(error.code).toBe('invalid_argument');
    expect(await backend.read('s', 0, 0, 10, 1 << 24)).toEqual([]);
    expect(await backend.read('s', 1, 0, 10, 1 << 24)).toEqual([]);
    const [outcome] = await backend.append('s', [item('ok', 1)]);
    expect([outcome?.event.sequence, outcome?.existed]).toEqual([1, false]);
  });

  it('injection through stream and group names is rejected before any SQL', async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend });
    await rheo.createStream('s');
    const evil = [`s'; DROP TABLE events; --`, 's" OR 1=1', 'a b', 's\u0000', '$1', 'x'.repeat(201)];
    for (const name of evil) {
      expect(await codeOf(rheo.createStream(name))).toBe('invalid_argument');
      expect(await codeOf(rheo.createGroup('s', name))).toBe('invalid_argument');
      expect(await codeOf(rheo.fetch(name, 'g'))).toBe('invalid_argument');
    }
    // Values are bound parameters: hostile payload text is stored verbatim.
    const hostile = `'); DROP SCHEMA "${backend.schema}" CASCADE; --`;
    const e = await rheo.append('s', { payload: hostile, type: hostile, key: hostile, metadata: { [hostile]: hostile } });
    const [read] = await rheo.read('s');
    expect({ ...read, existed: false }).toEqual(e);
    expect((await rheo.query('s', { key: hostile, type: hostile })).events).toHaveLength(1);
    expect(await rheo.listStreams()).toHaveLength(1);
  });

  it('injection through the schema option is rejected when the backend is built', () => {
    const evil = ['rheo"; DROP SCHEMA public CASCADE; --', 'Rheo', 'a-b', '1abc', 'x'.repeat(64), '', 'public.x'];
    for (const schema of evil) {
      let caught: unknown = null;
      try {
        postgresBackend({ pool: sharedPool() }, { schema });
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(RheoError);
      expect((caught as RheoError).code).toBe('invalid_argument');
    }
  });

  it('reserved schema names (pg_*, information_schema) are rejected when the backend is built', () => {
    for (const schema of ['pg_catalog', 'pg_toast', 'pg_rheo', 'information_schema']) {
      expect(() => postgresBackend({ pool: sharedPool() }, { schema })).toThrow(
        expect.objectContaining({ code: 'invalid_argument', message: expect.stringContaining('reserved') }),
      );
    }
    // Names that merely contain those words are fine.
    expect(postgresBackend({ pool: sharedPool() }, { schema: 'rheo_pg_' }).schema).toBe('rheo_pg_');
    expect(postgresBackend({ pool: sharedPool() }, { schema: 'information_schema2' }).schema).toBe('information_schema2');
  });

  it('a borrowed pool is never ended; close() is idempotent and later calls are closed', async () => {
    const pool = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
    const backend = postgresBackend({ pool }, { schema: uniqueSchema() });
    await backend.migrate();
    await backend.close();
    await backend.close();
    expect(pool.ended).toBe(false);
    expect((await pool.query('SELECT 1 AS one')).rows[0]).toEqual({ one: 1 });
    expect(await codeOf(backend.listStreams())).toBe('closed');
    await pool.end();
  });
});
