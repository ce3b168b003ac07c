import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { createRheo } from '../../src/rheo.js';
import { FaultLoop, type CallReport } from '../support/fault-loop.js';
import { databaseUrl, makeTestBackend, sharedPool } from '../support/postgres.js';

const KILLS = 60;

/** Terminates every backend of `applicationName` (rheo's pooled connections in the child). */
async function terminate(applicationName: string): Promise<number> {
  const { rows } = await sharedPool().query<{ killed: boolean }>(
    'SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = $1',
    [applicationName],
  );
  return rows.filter((r) => r.killed).length;
}

const loops: FaultLoop[] = [];
afterEach(() => {
  for (const loop of loops.splice(0)) loop.kill();
});

/**
 * Runs the child's call loop while its connections are terminated `KILLS`
 * times (each kill waits for the child to finish one more call, so kills land
 * at every point of the loop: mid-statement, between a result and the
 * connection's release, while idle in the pool), then until one call succeeds.
 * Returns the calls that failed.
 */
async function killRepeatedly(mode: 'owned' | 'borrowed', ops: string[]): Promise<CallReport[]> {
  const backend = await makeTestBackend();
  const rheo = createRheo({ backend });
  await rheo.createStream('s');
  await rheo.createGroup('s', 'g');
  await rheo.appendBatch('s', Array.from({ length: 50 }, (_, i) => ({ payload: i })));
  const applicationName = `rheo-fault-${backend.schema}`;
  const loop = new FaultLoop({ url: databaseUrl(), schema: backend.schema, applicationName, mode, ops });
  loops.push(loop);
  await loop.until((calls) => calls.some((c) => c.ok));
  let killed = 0;
  for (let i = 0; i < KILLS; i++) {
    killed += await terminate(applicationName);
    await loop.moreCalls();
  }
  expect(killed).toBeGreaterThan(0);
  const afterKills = loop.calls.length;
  await loop.until((calls) => calls.slice(afterKills).some((c) => c.ok));
  const exit = await loop.stop();
  expect(exit.stderr).toBe('');
  expect(exit.exitCode).toBe(0);
  return loop.calls.filter((c) => !c.ok);
}

describe('postgres connections terminated under load', () => {
  it('lag() in a loop survives repeated pg_terminate_backend, failing only with backend_unavailable', { timeout: 120_000 }, async () => {
    const failed = await killRepeatedly('owned', ['lag']);
    expect(failed.length).toBeGreaterThan(0);
    for (const call of failed) expect(call.code, call.name).toBe('backend_unavailable');
  });

  it('append() and fetch()+ack in a loop survive, failing only with backend_unavailable or ambiguous', { timeout: 120_000 }, async () => {
    const failed = await killRepeatedly('owned', ['append', 'fetch', 'lag']);
    expect(failed.length).toBeGreaterThan(0);
    for (const call of failed) expect(['backend_unavailable', 'ambiguous'], call.name).toContain(call.code);
  });

  it('a borrowed pg.Pool: the clients rheo checks out carry a listener; the pool keeps its owner\'s handler', { timeout: 120_000 }, async () => {
    const failed = await killRepeatedly('borrowed', ['lag', 'append', 'fetch']);
    expect(failed.length).toBeGreaterThan(0);
    for (const call of failed) expect(['backend_unavailable', 'ambiguous'], call.name).toContain(call.code);
  });

  it("rheo adds no 'error' listener to a borrowed pool, and takes its own off the clients it returns", async () => {
    const owner = await makeTestBackend();
    const pool = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
    const mine = (): void => {};
    pool.on('error', mine);
    const rheo = createRheo({ backend: postgresBackend({ pool }, { schema: owner.schema }) });
    try {
      await rheo.createStream('s');
      await rheo.listStreams();
      expect(pool.listeners('error')).toEqual([mine]);
      // The pool's one client, which rheo used and returned: checked out here, pg-pool has
      // taken its own idle listener off, so any listener left would be one rheo forgot.
      const client = await pool.connect();
      expect(client.listenerCount('error')).toBe(0);
      client.release();
    } finally {
      await rheo.close();
      await pool.end();
    }
  });
});
