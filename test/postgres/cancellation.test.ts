import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { postgresBackend, type PostgresBackendOptions } from '../../src/backends/postgres/postgres-backend.js';
import { RheoError } from '../../src/core/errors.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { databaseUrl, sharedPool, uniqueSchema } from '../support/postgres.js';
import { until } from '../streams/support/wait.js';

/*
 * Cancellation against a real server: a call blocked on a lock held from
 * another connection is aborted (or times out), and the test checks, while
 * the lock is still held, that the server no longer runs the statement, then
 * releases the lock and counts what was written. No sleeps: every wait is on
 * an observable condition (pg_stat_activity), or on the call itself.
 */

interface Scene {
  rheo: Rheo;
  schema: string;
  /** Connections of this rheo waiting on a lock right now. */
  waiting(): Promise<number>;
}

const open: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of open.splice(0)) await close();
});

async function scene(options: PostgresBackendOptions = {}): Promise<Scene> {
  const app = `rheo-cancel-${randomBytes(4).toString('hex')}`;
  const schema = uniqueSchema('cancel');
  const backend = postgresBackend(
    { connectionString: databaseUrl(), poolConfig: { application_name: app, max: 4 } },
    { schema, ...options },
  );
  const rheo = createRheo({ backend });
  open.push(() => rheo.close());
  await rheo.migrate();
  await rheo.createStream('s');
  await rheo.createGroup('s', 'g');
  const waiting = async (): Promise<number> => {
    const { rows } = await sharedPool().query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
      [app],
    );
    return Number(rows[0]!.n);
  };
  return { rheo, schema, waiting };
}

/** Runs `sql` in a transaction on another connection and keeps it open: its locks stay held until `release()`. */
async function hold(sql: string): Promise<{ release(): Promise<void> }> {
  const client: pg.PoolClient = await sharedPool().connect();
  await client.query('BEGIN');
  await client.query(sql);
  return {
    async release() {
      await client.query('COMMIT');
      client.release();
    },
  };
}

async function failure(promise: Promise<unknown>): Promise<RheoError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(RheoError);
    return error as RheoError;
  }
  throw new Error('expected the call to fail');
}

describe('postgres cancellation', () => {
  it('an append aborted while it waits on a lock is ambiguous at once; the server cancels it, so nothing lands', async () => {
    const { rheo, schema, waiting } = await scene();
    const lock = await hold(`SELECT 1 FROM "${schema}".stream_partitions FOR UPDATE`);
    const controller = new AbortController();
    const call = rheo.append('s', { payload: 'late' }, { signal: controller.signal });
    await until(async () => (await waiting()) === 1, 'the append waits on the lock');
    const reason = new Error('user navigated away');
    controller.abort(reason);
    const error = await failure(call);
    expect(error.code).toBe('ambiguous');
    expect(error.cause).toBe(reason);
    // Still holding the lock: the statement is gone from the server, not parked behind it.
    await until(async () => (await waiting()) === 0, 'the server cancelled the append');
    await lock.release();
    expect(await rheo.read('s')).toEqual([]);
    // The connection went back to the pool in working order.
    await rheo.append('s', { payload: 'next' });
    expect((await rheo.read('s')).map((e) => e.payload)).toEqual(['next']);
  });

  it('timeoutMs on a read blocked by a table lock rejects with timeout, and the read stops on the server', async () => {
    const { rheo, schema, waiting } = await scene();
    await rheo.append('s', { payload: 1 });
    const lock = await hold(`LOCK TABLE "${schema}".events IN ACCESS EXCLUSIVE MODE`);
    const error = await failure(rheo.read('s', { timeoutMs: 100 }));
    expect(error.code).toBe('timeout');
    await until(async () => (await waiting()) === 0, 'the server cancelled the read');
    await lock.release();
    expect(await rheo.read('s')).toHaveLength(1);
  });

  it('a fetch aborted while it waits for the cursor lock claims nothing', async () => {
    const { rheo, schema, waiting } = await scene();
    await rheo.appendBatch('s', [{ payload: 1 }, { payload: 2 }]);
    const lock = await hold(`SELECT 1 FROM "${schema}".group_cursors FOR UPDATE`);
    const controller = new AbortController();
    const call = rheo.fetch('s', 'g', { limit: 10, signal: controller.signal });
    await until(async () => (await waiting()) === 1, 'the fetch waits on the cursor lock');
    controller.abort(new Error('stop'));
    expect((await failure(call)).code).toBe('ambiguous');
    await until(async () => (await waiting()) === 0, 'the server cancelled the fetch');
    await lock.release();
    expect((await rheo.groupInfo('s', 'g')).inflight).toBe(0);
    expect((await rheo.fetch('s', 'g', { limit: 10 })).map((l) => [l.event.sequence, l.attempt])).toEqual([
      [1, 1],
      [2, 1],
    ]);
  });

  it('a replay (a transaction) aborted while it waits rolls back whole', async () => {
    const { rheo, schema, waiting } = await scene();
    await rheo.appendBatch('s', [{ payload: 1 }, { payload: 2 }]);
    await rheo.ackMany(await rheo.fetch('s', 'g', { limit: 10 }));
    const lock = await hold(`SELECT 1 FROM "${schema}".group_cursors FOR UPDATE`);
    const controller = new AbortController();
    const call = rheo.replay('s', 'g', { fromSequence: 1 }, { signal: controller.signal });
    await until(async () => (await waiting()) === 1, 'the replay waits on the cursor lock');
    controller.abort(new Error('stop'));
    expect((await failure(call)).code).toBe('ambiguous');
    await until(async () => (await waiting()) === 0, 'the server cancelled the replay');
    await lock.release();
    expect((await rheo.lag('s', 'g')).partitions[0]!.frontier).toBe(2);
  });

  describe('statementTimeoutMs', () => {
    it('a write blocked past it fails with timeout, not ambiguous: it was rolled back and wrote nothing', async () => {
      const { rheo, schema } = await scene({ statementTimeoutMs: 150 });
      const lock = await hold(`SELECT 1 FROM "${schema}".stream_partitions FOR UPDATE`);
      const error = await failure(rheo.append('s', { payload: 'late' }));
      expect(error.code).toBe('timeout');
      await lock.release();
      expect(await rheo.read('s')).toEqual([]);
    });

    it('a read or a transaction step blocked past it fails with timeout', async () => {
      const { rheo, schema } = await scene({ statementTimeoutMs: 150 });
      await rheo.append('s', { payload: 1 });
      await rheo.ackMany(await rheo.fetch('s', 'g'));
      const cursors = await hold(`SELECT 1 FROM "${schema}".group_cursors FOR UPDATE`);
      expect((await failure(rheo.replay('s', 'g', { fromSequence: 1 }))).code).toBe('timeout');
      await cursors.release();
      expect((await rheo.lag('s', 'g')).partitions[0]!.frontier).toBe(1);
      const table = await hold(`LOCK TABLE "${schema}".events IN ACCESS EXCLUSIVE MODE`);
      expect((await failure(rheo.read('s'))).code).toBe('timeout');
      await table.release();
      expect(await rheo.read('s')).toHaveLength(1);
    });

    it('is refused for a borrowed pool, and must be a positive integer', () => {
      const bad: Array<() => unknown> = [
        () => postgresBackend({ pool: sharedPool() }, { statementTimeoutMs: 100 }),
        () => postgresBackend({ connectionString: databaseUrl() }, { statementTimeoutMs: 0 }),
        () => postgresBackend({ connectionString: databaseUrl() }, { statementTimeoutMs: 1.5 }),
      ];
      for (const make of bad) expect(make).toThrow(expect.objectContaining({ name: 'RheoError', code: 'invalid_argument' }));
    });
  });
});
