import pg from 'pg';
import { startThrowawayPgbouncer, type ThrowawayPgbouncer } from '../../scripts/throwaway-pgbouncer.js';
import { startThrowawayPostgres } from '../../scripts/throwaway-postgres.js';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Connection string of the test database (throwaway cluster or RHEO_TEST_DATABASE_URL). */
    rheoDatabaseUrl: string;
    /**
     * The same database through a PgBouncer in transaction pooling mode
     * (throwaway, or RHEO_TEST_PGBOUNCER_URL); empty when an external
     * database is used without one, and the pooler tests are then skipped.
     */
    rheoPgbouncerUrl: string;
  }
}

const DATABASE = 'rheo_test';

/**
 * vitest globalSetup: provides a PostgreSQL database to every test worker.
 * With RHEO_TEST_DATABASE_URL set, that database is used as is. Otherwise a
 * throwaway cluster is initialised in a temp dir (as the `postgres` OS user
 * when running as root), started on a free loopback port with fsync off, and
 * stopped and deleted at teardown. A throwaway PgBouncer in transaction
 * pooling mode runs in front of it (scripts/throwaway-pgbouncer.ts), for
 * the tests of `pooler: 'transaction'`.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const external = process.env.RHEO_TEST_DATABASE_URL;
  if (external) {
    project.provide('rheoDatabaseUrl', external);
    project.provide('rheoPgbouncerUrl', process.env.RHEO_TEST_PGBOUNCER_URL ?? '');
    return async () => {};
  }
  // fsync off: this cluster is thrown away; the benchmarks keep default durability.
  const cluster = await startThrowawayPostgres({
    durable: false,
    settings: ['max_connections=300', 'shared_buffers=64MB'],
  });
  try {
    await createDatabase(cluster.port);
  } catch (error) {
    cluster.stop();
    throw error;
  }
  const url = cluster.url(DATABASE);
  let bouncer: ThrowawayPgbouncer;
  try {
    bouncer = await startThrowawayPgbouncer({ target: { host: '127.0.0.1', port: cluster.port } });
  } catch (error) {
    cluster.stop();
    throw error;
  }
  project.provide('rheoDatabaseUrl', url);
  project.provide('rheoPgbouncerUrl', bouncer.url(DATABASE));
  process.env.RHEO_TEST_DATABASE_URL = url;
  process.env.RHEO_TEST_PGBOUNCER_URL = bouncer.url(DATABASE);
  // A run ended by a signal (`timeout`, Ctrl-C, a CI job cancelled) never
  // reaches the teardown; without this its cluster kept running, orphaned.
  const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;
  const onSignal = (signal: NodeJS.Signals): void => {
    bouncer.stop();
    cluster.stop(); // synchronous: pg_ctl stop, then the directory goes
    process.exit(128 + (signal === 'SIGINT' ? 2 : signal === 'SIGHUP' ? 1 : 15));
  };
  for (const signal of SIGNALS) process.once(signal, onSignal);
  return async () => {
    for (const signal of SIGNALS) process.off(signal, onSignal);
    bouncer.stop();
    cluster.stop();
  };
}

async function createDatabase(port: number): Promise<void> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${DATABASE}`);
  } finally {
    await client.end();
  }
}
