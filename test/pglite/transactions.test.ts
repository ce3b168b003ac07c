import { describe, expect, it } from 'vitest';
import { createRheo, type Rheo } from '../../src/rheo.js';
import type { PgliteBackend } from '../../src/backends/pglite/pglite-backend.js';
import { waitFor } from '../consumer/harness.js';
import { makePgliteTestBackend } from '../support/pglite.js';

/**
 * Transactions on PGlite's one session. The PostgreSQL transaction tests
 * (test/postgres/transactions.test.ts and the transactional consume, batch
 * sink and partition files) need several connections: lock waits seen in
 * pg_stat_activity, SKIP LOCKED between sessions, a second process
 * committing. These are their one-session counterparts: the same calls,
 * serialised through the one connection without deadlocking.
 */
async function setup(): Promise<{ rheo: Rheo; backend: PgliteBackend; table: string }> {
  const backend = await makePgliteTestBackend();
  const rheo = createRheo({ backend, defaults: { pollMs: 20 } });
  const table = `"${backend.schema}".effects`;
  await backend.pool.query(`CREATE TABLE IF NOT EXISTS ${table} (event_id text NOT NULL, attempt int NOT NULL)`);
  return { rheo, backend, table };
}

async function effects(backend: PgliteBackend, table: string): Promise<string[]> {
  return (await backend.pool.query<{ event_id: string }>(`SELECT event_id FROM ${table} ORDER BY event_id`)).rows.map((r) => r.event_id);
}

describe('pglite transactions', () => {
  it('an outbox append on a client of the backend pool is invisible until COMMIT, and the commit wakes a waiter through NOTIFY', async () => {
    const { rheo, backend } = await setup();
    await rheo.createStream('orders');
    // LISTEN runs on the one session too: issued before the transaction, not queued behind it.
    await backend.listen();
    const client = await backend.pool.connect();
    try {
      await client.query('BEGIN');
      await rheo.transaction(client).append('orders', { payload: { n: 1 } });
      const woken = backend.waitForAppend('orders', 10_000);
      await client.query('COMMIT');
      expect(await woken).toBe(true);
    } finally {
      client.release();
    }
    expect((await rheo.read('orders')).map((e) => e.payload)).toEqual([{ n: 1 }]);

    const rolledBack = await backend.pool.connect();
    try {
      await rolledBack.query('BEGIN');
      await rheo.transaction(rolledBack).append('orders', { payload: { n: 2 } });
      await rolledBack.query('ROLLBACK');
    } finally {
      rolledBack.release();
    }
    expect((await rheo.read('orders')).map((e) => e.payload)).toEqual([{ n: 1 }]);
  });

  it('consume({ transaction: true }) commits each write with its ack, while fetches, settles and the trimmer queue for the one connection', async () => {
    const { rheo, backend, table } = await setup();
    await rheo.createStream('orders', { partitions: 2, retention: { maxEvents: 5 } });
    await rheo.createGroup('orders', 'billing');
    await rheo.createStream('invoices');
    const placed = await rheo.appendBatch('orders', Array.from({ length: 30 }, (_, i) => ({ key: `c-${i % 7}`, payload: { n: i } })));
    const consumer = rheo.consume<{ n: number }>({
      stream: 'orders',
      group: 'billing',
      concurrency: 4,
      transaction: true,
      handler: async (event, { client, attempt }) => {
        await client!.query(`INSERT INTO ${table} (event_id, attempt) VALUES ($1, $2)`, [event.id, attempt]);
        await rheo.transaction(client!).append('invoices', { payload: { order: event.id }, causedBy: event });
        // A throw after the write: the write rolls back and the retry writes it once.
        if (attempt === 1 && event.payload.n % 10 === 3) throw new Error('boom after the write');
      },
    });
    // The trimmer and plain calls share the connection with the handlers' transactions meanwhile.
    const trims = Promise.all([rheo.trimmer!.runOnce(), rheo.lag('orders', 'billing'), rheo.read('invoices')]);
    await waitFor(async () => (await rheo.lag('orders', 'billing')).lag === 0, 'the group to drain', 60_000);
    await trims;
    await consumer.stop();
    expect(consumer.stats()).toMatchObject({ acked: 30, retried: 3, settleErrors: 0, lost: 0 });
    expect(await effects(backend, table)).toEqual(placed.map((e) => e.id).sort());
    expect((await rheo.read('invoices', { limit: 100 })).length).toBe(30);
  });

  it('beginTransaction while other calls run: both orders of arrival finish', async () => {
    const { rheo, backend } = await setup();
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    await rheo.appendBatch('s', Array.from({ length: 10 }, (_, i) => ({ payload: i })));
    const tx = await backend.beginTransaction();
    // Queued behind the open transaction: they run once it ends, not inside it.
    const queued = Promise.all([rheo.append('s', { payload: 'outside' }), rheo.fetch('s', 'g', { limit: 10 })]);
    await rheo.transaction(tx.client).append('s', { payload: 'inside' });
    await tx.rollback();
    const [, leases] = await queued;
    expect(leases).toHaveLength(10);
    expect((await rheo.read('s', { limit: 100 })).map((e) => e.payload)).not.toContain('inside');
  });

  it('a test schema handed on after close is empty again, with sequences from 1 (support/pglite.ts)', async () => {
    const first = await makePgliteTestBackend();
    const used = createRheo({ backend: first });
    await used.createStream('s', { partitions: 1 });
    await used.appendBatch('s', [{ payload: 1 }, { payload: 2 }]);
    await used.close();
    const second = await makePgliteTestBackend();
    expect(second.schema).toBe(first.schema);
    const again = createRheo({ backend: second });
    expect(await again.listStreams()).toEqual([]);
    await again.createStream('s', { partitions: 1 });
    expect((await again.append('s', { payload: 3 })).sequence).toBe(1);
  });
});
