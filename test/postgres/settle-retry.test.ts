import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import type { Lease } from '../../src/core/types.js';
import { createRheo } from '../../src/rheo.js';
import { FaultyBackend } from '../support/faulty-backend.js';
import { databaseUrl, makeTestBackend, sharedPool } from '../support/postgres.js';
import { readOne, until } from '../streams/support/wait.js';

describe('postgres settle retries', () => {
  it('an ack that cannot get a connection (backend_unavailable) is sent again and lands once PostgreSQL takes connections', async () => {
    const owner = await makeTestBackend();
    const admin = createRheo({ backend: owner });
    await admin.createStream('s');
    await admin.createGroup('s', 'g');
    await admin.append('s', { payload: 1 });
    // A role whose logins the test switches off and on: a real refused connection, no mock.
    const role = `rheo_login_${randomBytes(5).toString('hex')}`;
    await sharedPool().query(`CREATE ROLE "${role}" LOGIN SUPERUSER`);
    const url = new URL(databaseUrl());
    url.username = role;
    const backend = postgresBackend({ connectionString: url.toString(), poolConfig: { max: 2 } }, { schema: owner.schema, notify: false });
    // Passes every call through unchanged; it only counts the calls and records the answers that came back.
    const recorder = new FaultyBackend(backend);
    const rheo = createRheo({ backend: recorder });
    const producer = rheo.producer({ stream: 's', group: 'g', maxDemand: 1, leaseMs: 120_000, settleRetry: { initialMs: 20, maxMs: 200 } });
    try {
      const lease = await readOne<Lease>(producer);
      await sharedPool().query(`ALTER ROLE "${role}" NOLOGIN`);
      await sharedPool().query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [role]);
      await until(() => backend.pool.totalCount === 0, 'the pool dropped its terminated connections');
      const ack = producer.ack(lease);
      ack.catch(() => undefined); // awaited below; a failure there fails the test
      // A refused login (28000) is backend_unavailable: the only failure the producer sends again.
      await until(() => recorder.calls.settle >= 1 && recorder.active('settle') === 0, 'the first ack was refused');
      expect(recorder.settles).toEqual([]); // the call threw: nothing answered, nothing written
      await sharedPool().query(`ALTER ROLE "${role}" LOGIN`);
      await ack;
      expect(recorder.calls.settle).toBeGreaterThan(1);
      expect(recorder.settles.map((s) => [s.kind, s.ok])).toEqual([['ack', true]]);
      expect((await admin.lag('s', 'g')).lag).toBe(0);
    } finally {
      await producer.close();
      await rheo.close();
      await sharedPool().query(`DROP ROLE "${role}"`);
    }
  });
});
