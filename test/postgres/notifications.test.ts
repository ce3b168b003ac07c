import { describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import type { Lease } from '../../src/core/types.js';
import { createRheo } from '../../src/rheo.js';
import { readOne } from '../streams/support/wait.js';
import { databaseUrl, makeTestBackend, sharedPool } from '../support/postgres.js';

/** Polls (bounded) for this backend's LISTEN connection; returns its pid. */
async function listenerPid(schema: string, not?: number): Promise<number> {
  for (let i = 0; i < 1000; i++) {
    const { rows } = await sharedPool().query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%' AND state = 'idle'`,
      [`rheo-listen:${schema}`],
    );
    const row = rows.find((r) => r.pid !== not);
    if (row) return row.pid;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('no LISTEN connection');
}

describe('postgres notifications', () => {
  it('waitForAppend wakes on an append from another process, and times out with false', async () => {
    const waiter = await makeTestBackend();
    const producer = createRheo({ backend: postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 1 } }, { schema: waiter.schema }) });
    try {
      await producer.createStream('s');
      await producer.createStream('other');
      await waiter.listen();
      expect(await waiter.waitForAppend('s', 50)).toBe(false);
      let sWoken = false;
      const woken = waiter.waitForAppend('s', 20_000).then((result) => (sWoken = result));
      const otherWoken = waiter.waitForAppend('other', 20_000);
      await producer.append('other', { payload: 0 });
      // Both waiters hang on one LISTEN connection, which delivers in order: once
      // the 'other' waiter has woken, a wrong wake-up of 's' would have happened.
      expect(await otherWoken).toBe(true);
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(sWoken).toBe(false);
      await producer.append('s', { payload: 1 });
      expect(await woken).toBe(true);
      const controller = new AbortController();
      const aborted = waiter.waitForAppend('s', 20_000, controller.signal);
      controller.abort();
      expect(await aborted).toBe(false);
    } finally {
      await producer.close();
    }
  });

  it('appends through the same backend wake its waiters without a round trip through LISTEN', async () => {
    const backend = await makeTestBackend(undefined, { notify: false });
    const rheo = createRheo({ backend });
    await rheo.createStream('s');
    const woken = backend.waitForAppend('s', 20_000);
    await rheo.append('s', { payload: 1 });
    expect(await woken).toBe(true);
  });

  it('the LISTEN connection reconnects after it is terminated', async () => {
    const waiter = await makeTestBackend();
    const producer = createRheo({ backend: postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 1 } }, { schema: waiter.schema }) });
    try {
      await producer.createStream('s');
      await waiter.listen();
      const first = await listenerPid(waiter.schema);
      // A waiter pending across the drop is woken by the reconnect (a notification may have been missed).
      const across = waiter.waitForAppend('s', 20_000);
      await sharedPool().query('SELECT pg_terminate_backend($1)', [first]);
      expect(await across).toBe(true);
      const second = await listenerPid(waiter.schema, first);
      expect(second).not.toBe(first);
      await waiter.listen();
      const woken = waiter.waitForAppend('s', 20_000);
      await producer.append('s', { payload: 1 });
      expect(await woken).toBe(true);
    } finally {
      await producer.close();
    }
  });

  it('an idle producer is still woken by an append after its LISTEN connection was terminated twice', async () => {
    const waiter = await makeTestBackend();
    const rheo = createRheo({ backend: waiter });
    const other = createRheo({ backend: postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 1 } }, { schema: waiter.schema }) });
    // A poll far longer than the test: only a notification (or the reconnect's wake-up) can wake it.
    const producer = rheo.producer({ stream: 's', group: 'g', maxDemand: 1, pollMs: 3_600_000 });
    try {
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const first = readOne<Lease>(producer);
      let pid = await listenerPid(waiter.schema);
      for (let kill = 0; kill < 2; kill++) {
        await sharedPool().query('SELECT pg_terminate_backend($1)', [pid]);
        pid = await listenerPid(waiter.schema, pid);
      }
      // Appended by another backend: nothing wakes the producer locally, only the NOTIFY through the new LISTEN.
      await other.append('s', { payload: 'after the kills' });
      const lease = await first;
      expect(lease.event.payload).toBe('after the kills');
      await producer.ack(lease);
    } finally {
      await producer.close();
      await other.close();
    }
  });

  it('NOTIFY is sent once per append call, not per event', async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend });
    await rheo.createStream('s', { partitions: 4 });
    const client = await sharedPool().connect();
    const seen: string[] = [];
    try {
      client.on('notification', (m) => seen.push(m.payload ?? ''));
      await client.query(`LISTEN "rheo_${backend.schema}_append"`);
      await rheo.appendBatch('s', Array.from({ length: 100 }, (_, i) => ({ payload: i, key: `k${i}` })));
      await rheo.append('s', { payload: 'one' });
      // A marker sent after both appends arrives after their notifications (same server, in commit order).
      await sharedPool().query(`SELECT pg_notify($1, 'marker')`, [`rheo_${backend.schema}_append`]);
      for (let i = 0; i < 500 && !seen.includes('marker'); i++) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(seen).toEqual(['s', 's', 'marker']);
    } finally {
      await client.query('UNLISTEN *');
      client.release();
    }
  });
});
