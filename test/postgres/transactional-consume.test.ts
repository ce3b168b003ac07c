import { describe, expect, it } from 'vitest';
import { postgresBackend, type PostgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { ManualClock } from '../../src/core/clock.js';
import { waitFor } from '../consumer/harness.js';
import { databaseUrl, makeTestBackend, sharedPool } from '../support/postgres.js';

async function setup(clock?: ManualClock): Promise<{ rheo: Rheo; backend: PostgresBackend; table: string }> {
  const backend = await makeTestBackend(clock);
  const rheo = createRheo({ backend, defaults: { pollMs: 20 }, ...(clock ? { clock } : {}) });
  const table = `"${backend.schema}".effects`;
  // No ON CONFLICT anywhere: a second insert of one event id fails the primary key.
  await sharedPool().query(`CREATE TABLE ${table} (event_id text PRIMARY KEY, attempt int NOT NULL)`);
  return { rheo, backend, table };
}

async function effects(table: string): Promise<Array<{ event_id: string; attempt: number }>> {
  return (await sharedPool().query<{ event_id: string; attempt: number }>(`SELECT event_id, attempt FROM ${table} ORDER BY event_id`)).rows;
}

describe('consume({ transaction: true }) on PostgreSQL', () => {
  it('commits each handler\'s writes with its ack, and its outbox appends with both', async () => {
    const { rheo, table } = await setup();
    await rheo.createStream('orders', { partitions: 2 });
    await rheo.createStream('invoices');
    await rheo.createGroup('orders', 'billing');
    await rheo.createGroup('invoices', 'mail');
    const placed = await rheo.appendBatch('orders', Array.from({ length: 40 }, (_, i) => ({ key: `c-${i % 7}`, payload: { n: i } })));
    const consumer = rheo.consume<{ n: number }>({
      stream: 'orders',
      group: 'billing',
      concurrency: 4,
      transaction: true,
      handler: async (event, { client, attempt }) => {
        await client!.query(`INSERT INTO ${table} (event_id, attempt) VALUES ($1, $2)`, [event.id, attempt]);
        await rheo.transaction(client!).append('invoices', { payload: { order: event.id }, causedBy: event });
      },
    });
    await waitFor(async () => (await rheo.lag('orders', 'billing')).lag === 0, 'the group to drain');
    await consumer.stop();
    expect(consumer.stats()).toMatchObject({ acked: 40, retried: 0, settleErrors: 0, lost: 0 });
    expect((await effects(table)).map((r) => r.event_id)).toEqual(placed.map((e) => e.id).sort());
    expect((await rheo.lag('invoices', 'mail')).partitions[0]).toMatchObject({ highWatermark: 40 });
  });

  it('a throw or a retry rolls the writes back and nacks; the redelivery commits them once', async () => {
    const { rheo, table } = await setup();
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    const events = await rheo.appendBatch('s', [{ payload: 'throws' }, { payload: 'retries' }, { payload: 'fine' }]);
    const consumer = rheo.consume<string>({
      stream: 's',
      group: 'g',
      transaction: true,
      handler: async (event, { client, attempt }) => {
        await client!.query(`INSERT INTO ${table} (event_id, attempt) VALUES ($1, $2)`, [event.id, attempt]);
        if (attempt === 1 && event.payload === 'throws') throw new Error('boom after the write');
        if (attempt === 1 && event.payload === 'retries') return { retry: 'not yet' };
        return undefined;
      },
    });
    await waitFor(async () => (await rheo.lag('s', 'g')).lag === 0, 'the group to drain');
    await consumer.stop();
    expect(consumer.stats()).toMatchObject({ acked: 3, retried: 2 });
    expect(await effects(table)).toEqual(
      [
        { event_id: events[0]!.id, attempt: 2 },
        { event_id: events[1]!.id, attempt: 2 },
        { event_id: events[2]!.id, attempt: 1 },
      ].sort((a, b) => a.event_id.localeCompare(b.event_id)),
    );
  });

  it('a reject commits the writes with the dead letter', async () => {
    const { rheo, table } = await setup();
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    const [event] = await rheo.appendBatch('s', [{ payload: 'poison' }]);
    const consumer = rheo.consume({
      stream: 's',
      group: 'g',
      transaction: true,
      handler: async (e, { client, attempt }) => {
        await client!.query(`INSERT INTO ${table} (event_id, attempt) VALUES ($1, $2)`, [e.id, attempt]);
        return { reject: 'unprocessable' };
      },
    });
    await waitFor(async () => (await rheo.lag('s', 'g')).lag === 0, 'the group to drain');
    await consumer.stop();
    expect(consumer.stats()).toMatchObject({ deadLettered: 1, acked: 0 });
    expect((await rheo.deadLetters('s', 'g')).map((d) => [d.event.id, d.reason])).toEqual([[event!.id, 'unprocessable']]);
    expect((await effects(table)).map((r) => r.event_id)).toEqual([event!.id]);
  });

  it('a handler whose lease was taken over cannot commit: its writes roll back and the new holder\'s commit', async () => {
    const clock = new ManualClock();
    const { rheo, table } = await setup(clock);
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    const [event] = await rheo.appendBatch('s', [{ payload: 'slow' }]);
    // Keyed by attempt too, so the second worker's insert does not wait on the first one's uncommitted row.
    await sharedPool().query(`ALTER TABLE ${table} DROP CONSTRAINT effects_pkey, ADD PRIMARY KEY (event_id, attempt)`);
    let release!: () => void;
    const paused = new Promise<void>((resolve) => (release = resolve));
    const consumer = rheo.consume({
      stream: 's',
      group: 'g',
      transaction: true,
      leaseMs: 300_000,
      handler: async (e, { client, attempt }) => {
        await client!.query(`INSERT INTO ${table} (event_id, attempt) VALUES ($1, $2)`, [e.id, attempt]);
        await paused;
      },
    });
    // While the first handler is paused, its lease is reclaimed (as after expiry) and settled by another worker.
    await waitFor(async () => consumer.stats().inflight === 1, 'the handler to start');
    const pool = sharedPool();
    clock.advance(300_001);
    const [stolen] = await rheo.fetch('s', 'g', { limit: 1 });
    expect(stolen?.event.id).toBe(event!.id);
    const other = await pool.connect();
    try {
      await other.query('BEGIN');
      await other.query(`INSERT INTO ${table} (event_id, attempt) VALUES ($1, $2)`, [event!.id, stolen!.attempt]);
      await rheo.transaction(other).ack(stolen!);
      await other.query('COMMIT');
    } finally {
      other.release();
    }
    release();
    await waitFor(() => consumer.stats().lost === 1, 'the first handler to lose its lease').finally(release);
    await consumer.stop();
    expect(consumer.stats()).toMatchObject({ acked: 0, lost: 1 });
    expect(await effects(table)).toEqual([{ event_id: event!.id, attempt: 2 }]);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });

  it('handlers holding every pooled connection still append to a stream rheo has not looked up yet', async () => {
    const { rheo: setupRheo, backend } = await setup();
    await setupRheo.createStream('orders');
    await setupRheo.createStream('invoices');
    await setupRheo.createGroup('orders', 'billing');
    await setupRheo.appendBatch('orders', [{ payload: 1 }, { payload: 2 }, { payload: 3 }, { payload: 4 }]);
    // A process whose pool is exactly as large as its concurrency: the
    // outbox append's stream lookup must not need a second connection.
    const rheo = createRheo({
      backend: postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 2 } }, { schema: backend.schema }),
      defaults: { pollMs: 20 },
    });
    try {
      let started = 0;
      let bothRunning!: () => void;
      const gate = new Promise<void>((resolve) => (bothRunning = resolve));
      const consumer = rheo.consume({
        stream: 'orders',
        group: 'billing',
        concurrency: 2,
        maxDemand: 2,
        transaction: true,
        handler: async (event, { client }) => {
          if (++started === 2) bothRunning();
          await gate;
          await rheo.transaction(client!).append('invoices', { payload: { order: event.id } });
        },
      });
      await waitFor(async () => (await setupRheo.lag('orders', 'billing')).lag === 0, 'the group to drain');
      await consumer.stop();
      expect(consumer.stats()).toMatchObject({ acked: 4, retried: 0 });
      expect(await setupRheo.read('invoices')).toHaveLength(4);
    } finally {
      await rheo.close();
    }
  });

  it('is unsupported on the memory backend, naming the capability', () => {
    const rheo = createRheo();
    expect(() => rheo.consume({ stream: 's', group: 'g', transaction: true, handler: () => undefined })).toThrow(
      expect.objectContaining({ code: 'unsupported', message: expect.stringContaining('"transactions"') }),
    );
    expect(() => rheo.consume({ stream: 's', group: 'g', transaction: 'yes' as never, handler: () => undefined })).toThrow(
      expect.objectContaining({ code: 'invalid_argument' }),
    );
  });
});
