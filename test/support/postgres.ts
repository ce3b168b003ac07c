import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, inject } from 'vitest';
import type { Backend } from '../../src/core/backend.js';
import type { Clock } from '../../src/core/clock.js';
import {
  postgresBackend,
  type PostgresBackend,
  type PostgresBackendOptions,
} from '../../src/backends/postgres/postgres-backend.js';
import { MIGRATIONS, renderMigration } from '../../src/backends/postgres/migrations/index.js';

/** The test database's connection string (see global-setup.ts). */
export function databaseUrl(): string {
  return inject('rheoDatabaseUrl');
}

/** The test database through a PgBouncer in transaction pooling mode, or '' when there is none (global-setup.ts). */
export function pgbouncerUrl(): string {
  return inject('rheoPgbouncerUrl');
}

let shared: pg.Pool | null = null;
let bouncer: pg.Pool | null = null;
const schemas = new Set<string>();
const backends = new Set<Backend>();

/**
 * One pool per test file, lent to every test backend (so a suite that makes a
 * backend per test never exhausts max_connections) and used for setup,
 * inspection and cleanup. Ended after the file.
 */
export function sharedPool(): pg.Pool {
  if (!shared) {
    shared = new pg.Pool({ connectionString: databaseUrl(), max: 12, application_name: 'rheo-test' });
    shared.on('error', () => {});
  }
  return shared;
}

/** A fresh, unique schema name for this worker (dropped after the file). */
export function uniqueSchema(prefix = 't'): string {
  const name = `${prefix}_${process.pid}_${randomBytes(5).toString('hex')}`;
  schemas.add(name);
  return name;
}

/**
 * A fresh schema as an older rheo left it: migrations 1..`version` applied
 * and recorded, as `migrate()` would have, and nothing else. Returns its
 * name and quoted name.
 */
export async function schemaAtVersion(prefix: string, version: number): Promise<{ schema: string; q: string }> {
  const schema = uniqueSchema(prefix);
  const q = `"${schema}"`;
  const pool = sharedPool();
  await pool.query(`CREATE SCHEMA ${q}`);
  await pool.query(`CREATE TABLE ${q}.migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
  for (const m of MIGRATIONS.filter((m) => m.version <= version)) {
    await pool.query(renderMigration(m, q));
    await pool.query(`INSERT INTO ${q}.migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
  }
  return { schema, q };
}

/**
 * A migrated Postgres backend in a fresh schema, on the file's shared pool.
 * Pass a clock to drive lease expiry (the conformance suite's ManualClock);
 * without one the database clock is the time authority.
 */
export async function makeTestBackend(clock?: Clock, options: PostgresBackendOptions = {}): Promise<PostgresBackend> {
  const backend = postgresBackend({ pool: sharedPool() }, { schema: uniqueSchema(), clock, ...options });
  backends.add(backend);
  await backend.migrate();
  return backend;
}

/** One pool per test file to the PgBouncer (transaction pooling), lent to every pooler test backend. */
export function sharedPgbouncerPool(): pg.Pool {
  if (!bouncer) {
    bouncer = new pg.Pool({ connectionString: pgbouncerUrl(), max: 12, application_name: 'rheo-test-pgbouncer' });
    bouncer.on('error', () => {});
  }
  return bouncer;
}

/**
 * As makeTestBackend, but every statement goes through PgBouncer in
 * transaction pooling mode (`pooler: 'transaction'`), with LISTEN on a
 * direct connection (`listenConnectionString`).
 */
export async function makePgbouncerTestBackend(clock?: Clock, options: PostgresBackendOptions = {}): Promise<PostgresBackend> {
  const backend = postgresBackend(
    { pool: sharedPgbouncerPool() },
    { schema: uniqueSchema('pgb'), clock, pooler: 'transaction', listenConnectionString: databaseUrl(), ...options },
  );
  backends.add(backend);
  await backend.migrate();
  return backend;
}

/** Closes what the helpers created and drops their schemas. Registered for every file that imports this module. */
export async function cleanupPostgres(): Promise<void> {
  for (const backend of backends) await backend.close().catch(() => {});
  backends.clear();
  if (shared) {
    const pool = shared;
    for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
    schemas.clear();
    shared = null;
    await pool.end();
  }
  if (bouncer) {
    const pool = bouncer;
    bouncer = null;
    await pool.end();
  }
}

afterAll(cleanupPostgres);
