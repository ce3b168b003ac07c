import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import {
  appendRoutine,
  appendRoutineReplanned,
  claimRoutine,
  claimRoutineReplanned,
  readOwnedRoutine,
  readOwnedRoutineReplanned,
  ROUTINES,
} from '../../src/backends/postgres/routines.js';
import { SQL_FUNCTIONS } from '../../src/backends/postgres/migrations/007_sql_append.js';
import { SEGMENT_FUNCTIONS } from '../../src/backends/postgres/migrations/009_segments.js';
import { createRheo } from '../../src/rheo.js';
import { databaseUrl, makeTestBackend, sharedPool, uniqueSchema } from '../support/postgres.js';

describe('postgres routines', () => {
  it('every rheo function runs with a fixed search_path', async () => {
    const backend = await makeTestBackend();
    const { rows } = await sharedPool().query<{ proname: string; proconfig: string[] | null }>(
      `SELECT p.proname, p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`,
      [backend.schema],
    );
    expect(rows.map((r) => r.proname).sort()).toEqual([...ROUTINES.map((r) => r.name), ...SQL_FUNCTIONS, ...SEGMENT_FUNCTIONS].sort());
    for (const row of rows) expect(row.proconfig).toContain('search_path=pg_catalog, pg_temp');
  });

  it('every routine runs without JIT; each has a generic and a replanned form', async () => {
    // A generic plan guesses LIMIT $n at a tenth of the rows, so over a large
    // events table the claim's estimate passed jit_above_cost and each call
    // spent ~200 ms compiling (see routines.ts). The replanned form plans per
    // call, for a log with more segment tables than its generic plan may lock.
    const backend = await makeTestBackend();
    const { rows } = await sharedPool().query<{ proname: string; proconfig: string[] | null }>(
      `SELECT p.proname, p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = ANY ($2)`,
      [backend.schema, ROUTINES.map((r) => r.name)],
    );
    expect(rows).toHaveLength(ROUTINES.length);
    const generic = [claimRoutine, appendRoutine, readOwnedRoutine].map((r) => r.name);
    const replanned = [claimRoutineReplanned, appendRoutineReplanned, readOwnedRoutineReplanned].map((r) => r.name);
    expect([...generic, ...replanned].sort()).toEqual(ROUTINES.map((r) => r.name).sort());
    for (const row of rows) {
      const mode = generic.includes(row.proname) ? 'force_generic_plan' : 'force_custom_plan';
      expect(row.proconfig, row.proname).toEqual(expect.arrayContaining(['jit=off', `plan_cache_mode=${mode}`]));
    }
    // The same statements in both forms: only the plan cache mode differs.
    const bodies = await sharedPool().query<{ proname: string; prosrc: string }>(
      `SELECT p.proname, p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = ANY ($2)`,
      [backend.schema, ROUTINES.map((r) => r.name)],
    );
    const source = new Map(bodies.rows.map((r) => [r.proname, r.prosrc]));
    generic.forEach((name, i) => expect(source.get(replanned[i]!), name).toBe(source.get(name)));
  });

  it("a caller's search_path cannot redirect what the claim calls", async () => {
    // A schema that shadows now() and comes before pg_catalog in the pool's search_path.
    const shadow = uniqueSchema('shadow');
    await sharedPool().query(`CREATE SCHEMA "${shadow}"`);
    await sharedPool().query(
      `CREATE FUNCTION "${shadow}".now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT timestamptz '2001-01-01 00:00:00+00' $$`,
    );
    const pool = new pg.Pool({ connectionString: databaseUrl(), max: 2, options: `-c search_path=${shadow},pg_catalog` });
    pool.on('error', () => {});
    const owner = await makeTestBackend();
    const rheo = createRheo({ backend: postgresBackend({ pool }, { schema: owner.schema }) });
    try {
      const { rows } = await pool.query<{ year: number }>('SELECT extract(year FROM now())::int AS year');
      expect(rows[0]?.year).toBe(2001); // the shadow is live for ordinary statements on this pool
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await rheo.append('s', { payload: 1 });
      const before = Date.now();
      const [lease] = await rheo.fetch('s', 'g', { leaseMs: 60_000 });
      // Claimed at the database's real time (the test database runs on this machine), not in 2001.
      expect(Math.abs(lease!.leasedAt.getTime() - before)).toBeLessThan(24 * 3600_000);
      expect(lease!.expiresAt.getTime() - lease!.leasedAt.getTime()).toBe(60_000);
    } finally {
      await rheo.close();
      await pool.end();
    }
  });
});
