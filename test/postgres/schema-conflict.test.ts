import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { RheoError } from '../../src/core/errors.js';
import { databaseUrl, sharedPool } from '../support/postgres.js';

/**
 * A schema that already holds objects of the names rheo's migrations create
 * (`schema: 'public'` in an application's database) is refused with
 * `schema_conflict`, naming the objects, and nothing is written. Each case
 * runs in a database of its own so that `public` is really `public`.
 */
describe('schema name collisions (postgres)', () => {
  const database = `rheo_conflict_${process.pid}`;
  let url = '';

  beforeAll(async () => {
    await sharedPool().query(`CREATE DATABASE ${database}`);
    const u = new URL(databaseUrl());
    u.pathname = `/${database}`;
    url = u.toString();
  });

  afterAll(async () => {
    await sharedPool().query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  });

  /** Runs `sql` in a fresh schema `public` of the test database, then migrates rheo into it. */
  async function migrateBeside(sql: string): Promise<{ error: unknown; tables: string[] }> {
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query('DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public');
      if (sql) await admin.query(sql);
      const backend = postgresBackend({ connectionString: url, poolConfig: { max: 2 } }, { schema: 'public' });
      const error = await backend.migrate().then(
        () => null,
        (e: unknown) => e,
      );
      await backend.close();
      const { rows } = await admin.query<{ relname: string }>(
        `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY c.relname`,
      );
      return { error, tables: rows.map((r) => r.relname) };
    } finally {
      await admin.end();
    }
  }

  function expectConflict(error: unknown, ...named: string[]): void {
    expect(error).toBeInstanceOf(RheoError);
    expect((error as RheoError).code).toBe('schema_conflict');
    for (const name of named) expect((error as RheoError).message).toContain(name);
  }

  it("an application's own events table: schema_conflict naming it, and nothing of rheo's is created", async () => {
    const { error, tables } = await migrateBeside('CREATE TABLE public.events (id serial PRIMARY KEY, body text)');
    expectConflict(error, 'table "events"', 'schema "public"');
    expect(tables).toEqual(['events']);
  });

  it('every taken name is listed at once: tables and an index of the same name as one rheo creates', async () => {
    const { error, tables } = await migrateBeside(`
      CREATE TABLE public.groups (id int);
      CREATE TABLE public.orders (id int, ts timestamptz);
      CREATE INDEX events_stream_ts_idx ON public.orders (ts);
      CREATE TABLE public.low_watermarks (x int)`);
    expectConflict(error, 'table "groups"', 'index "events_stream_ts_idx"', 'table "low_watermarks"');
    expect(tables).toEqual(['groups', 'low_watermarks', 'orders']);
  });

  it("another tool's migrations table is not read as rheo's ledger", async () => {
    const { error, tables } = await migrateBeside(
      "CREATE TABLE public.migrations (id serial PRIMARY KEY, name text, run_on timestamp); INSERT INTO public.migrations (name, run_on) VALUES ('init', now())",
    );
    expectConflict(error, 'table "migrations"');
    expect(tables).toEqual(['migrations']);
  });

  it('a function of the same name and arguments as one rheo creates', async () => {
    const { error, tables } = await migrateBeside(
      'CREATE FUNCTION public.murmur2(data bytea) RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 0 $$',
    );
    expectConflict(error, 'murmur2');
    expect(tables).toEqual([]);
  });

  it('unrelated tables do not stand in the way, and a second migrate is a no-op', async () => {
    const { error, tables } = await migrateBeside('CREATE TABLE public.orders (id int); CREATE TABLE public.customers (id int)');
    expect(error).toBeNull();
    expect(tables).toContain('orders');
    expect(tables).toContain('events');
    const again = postgresBackend({ connectionString: url, poolConfig: { max: 1 } }, { schema: 'public' });
    await again.migrate();
    await again.close();
  });
});
