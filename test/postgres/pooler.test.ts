import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { postgresBackend, type PostgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { renderStatements } from '../../src/backends/postgres/statements.js';
import { RheoError } from '../../src/core/errors.js';
import { createRheo } from '../../src/rheo.js';
import { startThrowawayPgbouncer } from '../../scripts/throwaway-pgbouncer.js';
import { databaseUrl, pgbouncerUrl, uniqueSchema } from '../support/postgres.js';

/**
 * `pooler: 'transaction'` against a real PgBouncer in transaction pooling
 * mode (global-setup.ts). Without the option, named prepared statements
 * meet server connections that do not hold them, or already do.
 */
describe.skipIf(pgbouncerUrl() === '')('postgres behind PgBouncer in transaction pooling mode', () => {
  const closers: Array<() => Promise<void>> = [];

  afterEach(async () => {
    for (const close of closers.splice(0)) await close();
  });

  function backend(options: Parameters<typeof postgresBackend>[1] & { poolMax?: number }): PostgresBackend {
    const { poolMax, ...rest } = options;
    const b = postgresBackend({ connectionString: pgbouncerUrl(), poolConfig: { max: poolMax ?? 4 } }, { schema: uniqueSchema('pool'), ...rest });
    closers.push(() => b.close());
    return b;
  }

  it('without the option, a named statement met on another client\'s server connection is unsupported, naming the option', async () => {
    // A PgBouncer of its own with one server connection: the suite's shared
    // one serves other test files at the same time, so which server
    // connection a client meets there is chance. Here every client meets the
    // one server connection, where the first client already prepared the
    // append, so the second client's PREPARE of the same name fails.
    const direct = new URL(databaseUrl());
    const own = await startThrowawayPgbouncer({ target: { host: direct.hostname, port: Number(direct.port || 5432) }, poolSize: 1 });
    closers.push(async () => own.stop());
    const database = decodeURIComponent(direct.pathname.slice(1));
    const b = postgresBackend(
      { connectionString: own.url(database, decodeURIComponent(direct.username) || 'postgres'), poolConfig: { max: 2 } },
      { schema: uniqueSchema('pool'), pooler: 'none' },
    );
    closers.push(() => b.close());
    await b.migrate();
    const rheo = createRheo({ backend: b });
    await rheo.createStream('s', { partitions: 2 });
    // Two appends at once take two pool clients; both reach the one server.
    const settled = await Promise.allSettled([rheo.append('s', { payload: 1 }), rheo.append('s', { payload: 2 })]);
    const errors = settled.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason as unknown] : []));
    expect(errors.length).toBe(1);
    expect(errors[0]).toBeInstanceOf(RheoError);
    expect((errors[0] as RheoError).code).toBe('unsupported');
    expect((errors[0] as RheoError).message).toContain("pooler: 'transaction'");
  });

  it("with pooler: 'transaction', hundreds of appends, fetches and acks from several connections at once all succeed", async () => {
    const b = backend({ pooler: 'transaction', poolMax: 6 });
    await b.migrate();
    const rheo = createRheo({ backend: b });
    await rheo.createStream('s', { partitions: 4 });
    await rheo.createGroup('s', 'g');
    await Promise.all(Array.from({ length: 200 }, (_, n) => rheo.append('s', { key: `k${n % 9}`, payload: { n } })));
    let acked = 0;
    while (acked < 200) {
      const leases = await rheo.fetch('s', 'g', { limit: 50 });
      await Promise.all(leases.map((lease) => rheo.ack(lease)));
      acked += leases.length;
    }
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });

  it('no listenConnectionString: one warning, no LISTEN connection, and waiters poll (woken by local appends)', async () => {
    const warnings: string[] = [];
    const b = backend({ pooler: 'transaction' });
    await b.migrate();
    const ignore = (): void => undefined;
    const rheo = createRheo({ backend: b, logger: { debug: ignore, info: ignore, error: ignore, warn: (_fields, message) => warnings.push(message) } });
    await rheo.createStream('s');
    const waits = await Promise.all([b.waitForAppend('s', 30, undefined), b.waitForAppend('s', 30, undefined)]);
    expect(waits).toEqual([false, false]);
    expect(b.listening).toBe(false);
    await b.listen();
    expect(b.listening).toBe(false);
    expect(warnings.filter((message) => message.includes('listenConnectionString'))).toHaveLength(1);
    const woken = b.waitForAppend('s', 10_000, undefined);
    await rheo.append('s', { payload: 1 });
    expect(await woken).toBe(true);
  });

  it('listenConnectionString: LISTEN on the direct connection, woken by an append from another backend', async () => {
    const schema = uniqueSchema('pool');
    const listener = postgresBackend({ connectionString: pgbouncerUrl(), poolConfig: { max: 2 } }, { schema, pooler: 'transaction', listenConnectionString: databaseUrl() });
    const appender = postgresBackend({ connectionString: pgbouncerUrl(), poolConfig: { max: 2 } }, { schema, pooler: 'transaction' });
    closers.push(() => listener.close(), () => appender.close());
    await listener.migrate();
    await createRheo({ backend: listener }).createStream('s');
    await listener.listen();
    expect(listener.listening).toBe(true);
    const woken = listener.waitForAppend('s', 20_000, undefined);
    await createRheo({ backend: appender }).append('s', { payload: 1 });
    expect(await woken).toBe(true);
  });

  it('sends nothing named, while the claim, append and owned read still call the routines that force their generic plans', () => {
    const named = renderStatements('"x"');
    const unnamed = renderStatements('"x"', false);
    for (const key of ['append', 'claim', 'settle', 'ack', 'renew'] as const) {
      expect(typeof named[key]).toBe('object');
      expect(typeof unnamed[key]).toBe('string');
    }
    expect(typeof unnamed.ownership.commit).toBe('string');
    expect(typeof unnamed.ownership.readOwned).toBe('string');
    expect(unnamed.claim).toMatch(/^SELECT \* FROM "x"\.rheo_claim_[0-9a-f]+\(/);
    expect(unnamed.append).toMatch(/^SELECT \* FROM "x"\.rheo_append_[0-9a-f]+\(/);
    expect(unnamed.ownership.readOwned).toMatch(/^SELECT \* FROM "x"\.rheo_read_owned_[0-9a-f]+\(/);
  });

  it('refuses statementTimeoutMs with the option (pg sends it as a startup parameter PgBouncer rejects) and bad option values', () => {
    expect(() => postgresBackend({ connectionString: pgbouncerUrl(), pooler: 'transaction', statementTimeoutMs: 1000 })).toThrow(/ALTER ROLE/);
    expect(() => postgresBackend({ connectionString: pgbouncerUrl(), pooler: 'session' as 'none' })).toThrow(RheoError);
    expect(() => postgresBackend({ connectionString: pgbouncerUrl(), listenConnectionString: '' })).toThrow(/listenConnectionString/);
  });

  it('migrate() and a second migrate() racing through the pooler: the advisory lock is transaction-scoped, so both end', async () => {
    const schema = uniqueSchema('pool');
    const a = postgresBackend({ connectionString: pgbouncerUrl(), poolConfig: { max: 1 } }, { schema, pooler: 'transaction' });
    const b = postgresBackend({ connectionString: pgbouncerUrl(), poolConfig: { max: 1 } }, { schema, pooler: 'transaction' });
    closers.push(() => a.close(), () => b.close());
    await Promise.all([a.migrate(), b.migrate()]);
    const direct = new pg.Client({ connectionString: databaseUrl() });
    await direct.connect();
    try {
      const { rows } = await direct.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${schema}".migrations`);
      expect(rows[0]!.n).toBeGreaterThan(0);
    } finally {
      await direct.end();
    }
  });
});
