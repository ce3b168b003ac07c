import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../../scripts/throwaway-postgres.js';
import { postgresBackend, type PostgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import type { Lease } from '../../src/core/types.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { FaultLoop } from '../support/fault-loop.js';
import { readOne } from '../streams/support/wait.js';

/**
 * Restarts take the whole cluster down, so this file runs its own throwaway
 * cluster instead of the suite's shared one.
 */
let cluster: ThrowawayPostgres;
beforeAll(async () => {
  cluster = await startThrowawayPostgres({ durable: false, label: 'rheo-restart', settings: ['max_connections=50'] });
}, 120_000);
afterAll(() => cluster?.stop());

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

let schemas = 0;
function backend(schema: string, applicationName = 'rheo-restart-test'): PostgresBackend {
  const b = postgresBackend({ connectionString: cluster.url(), poolConfig: { max: 3, application_name: applicationName } }, { schema });
  closers.push(() => b.close());
  return b;
}

async function setup(): Promise<{ schema: string; rheo: Rheo; backend: PostgresBackend }> {
  const schema = `restart_${++schemas}`;
  const b = backend(schema);
  const rheo = createRheo({ backend: b });
  await rheo.migrate();
  await rheo.createStream('s');
  await rheo.createGroup('s', 'g');
  return { schema, rheo, backend: b };
}

/** Polls (bounded) until the server has a LISTEN connection of this schema's backend: after a restart, a new one. */
async function listeningAgain(schema: string): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    const client = new pg.Client({ connectionString: cluster.url() });
    client.on('error', () => {});
    try {
      await client.connect();
      const { rows } = await client.query(
        `SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%' AND state = 'idle'`,
        [`rheo-listen:${schema}`],
      );
      if (rows.length > 0) return;
    } catch {
      // Still starting up.
    } finally {
      await client.end().catch(() => {});
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('the LISTEN connection did not come back');
}

describe('postgres server restart (pg_ctl restart -m fast)', () => {
  it('a process calling lag/append/fetch survives two restarts, and its calls succeed again after', { timeout: 180_000 }, async () => {
    const { schema, rheo } = await setup();
    await rheo.appendBatch('s', Array.from({ length: 20 }, (_, i) => ({ payload: i })));
    const loop = new FaultLoop({
      url: cluster.url(),
      schema,
      applicationName: 'rheo-restart-child',
      mode: 'owned',
      ops: ['lag', 'append', 'fetch'],
    });
    closers.push(() => loop.kill());
    for (let restart = 0; restart < 2; restart++) {
      const before = loop.calls.length;
      await loop.until((calls) => calls.slice(before).some((c) => c.ok));
      cluster.restart('fast');
      const after = loop.calls.length;
      await loop.until((calls) => calls.slice(after).some((c) => !c.ok));
      const failedAt = loop.calls.length;
      await loop.until((calls) => calls.slice(failedAt).some((c) => c.ok));
    }
    const exit = await loop.stop();
    expect(exit.stderr).toBe('');
    expect(exit.exitCode).toBe(0);
    const failed = loop.calls.filter((c) => !c.ok);
    expect(failed.length).toBeGreaterThan(0);
    for (const call of failed) expect(['backend_unavailable', 'ambiguous'], call.name).toContain(call.code);
  });

  it('an idle producer is woken by an append after a restart: its LISTEN connection came back', { timeout: 120_000 }, async () => {
    const { schema, rheo, backend: waiter } = await setup();
    // A poll far longer than the test: only a notification can wake the producer.
    const producer = rheo.producer({ stream: 's', group: 'g', maxDemand: 1, pollMs: 3_600_000 });
    closers.push(() => producer.close());
    const first = readOne<Lease>(producer);
    await waiter.listen();
    cluster.restart('fast');
    // Every connection of before the restart is gone: one listening now was reconnected.
    await listeningAgain(schema);
    const appender = createRheo({ backend: backend(schema, 'rheo-restart-appender') });
    await appender.append('s', { payload: 'after the restart' });
    const lease = await first;
    expect(lease.event.payload).toBe('after the restart');
    await producer.ack(lease);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });
});
