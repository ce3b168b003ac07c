import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import type { ConsumerHandler } from '../../src/consumer/consumer-types.js';
import type { PartitionHandler } from '../../src/consumer/partition-options.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { createBatchSink } from '../../src/sinks/batch-sink.js';
import { waitFor } from '../consumer/harness.js';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.js';
import { databaseUrl, sharedPool, uniqueSchema } from '../support/postgres.js';

/**
 * Exactly-once when the answer to a handler transaction's COMMIT is lost
 * after PostgreSQL committed it (a loopback proxy forwards the COMMIT, lets
 * the server finish it, then drops the answer and resets the connection).
 * The worker sees `ambiguous` and runs the event again; that run must roll
 * back instead of committing a second effect. The effects table has no
 * unique constraint, so a second effect shows as a second row.
 */
describe('a lost answer to COMMIT (postgres, through a fault proxy)', () => {
  let proxy: FaultProxy | null = null;
  let rheo: Rheo | null = null;
  let schema = '';
  const stops: Array<() => Promise<void>> = [];

  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop();
    await rheo?.close();
    rheo = null;
    await proxy?.close();
    proxy = null;
  });

  async function setup(partitions: number, events: number): Promise<Rheo> {
    const target = new URL(databaseUrl());
    proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
    schema = uniqueSchema('lc');
    const backend = postgresBackend({ connectionString: proxy.url(databaseUrl()), poolConfig: { max: 6 } }, { schema });
    rheo = createRheo({ backend });
    await rheo.migrate();
    await sharedPool().query(`CREATE TABLE "${schema}".effects (event_id text NOT NULL, n int NOT NULL)`);
    await rheo.createStream('s', { partitions });
    await rheo.createGroup('s', 'g');
    await rheo.appendBatch('s', Array.from({ length: events }, (_, n) => ({ key: `k${n % 5}`, payload: { n } })));
    return rheo;
  }

  const insert = (client: unknown, id: string, n: number): Promise<unknown> =>
    (client as pg.ClientBase).query(`INSERT INTO "${schema}".effects (event_id, n) VALUES ($1, $2)`, [id, n]);

  /** A COMMIT whose transaction wrote an effect: the handler's. */
  const handlerCommit = (query: string, transaction: readonly string[]): boolean =>
    /^COMMIT/i.test(query) && transaction.some((q) => q.includes('.effects'));

  async function effects(): Promise<Array<{ event_id: string; n: number }>> {
    return (await sharedPool().query<{ event_id: string; n: number }>(`SELECT event_id, n FROM "${schema}".effects ORDER BY n`)).rows;
  }

  it("assignment: 'partitions', transaction: true: three handler COMMITs answered by nobody, still one effect per event", async () => {
    const r = await setup(2, 20);
    proxy!.dropAnswer(handlerCommit, 3);
    const handler: PartitionHandler<{ n: number }> = async (event, { client }) => {
      await insert(client, event.id, event.payload.n);
    };
    const c = r.consume<{ n: number }>({
      stream: 's',
      group: 'g',
      assignment: 'partitions',
      transaction: true,
      memberId: 'm',
      sessionMs: 60_000,
      heartbeatMs: 30_000,
      rebalanceTimeoutMs: 60_000,
      pollMs: 20,
      retryBackoff: { initialMs: 1, maxMs: 5 },
      handler,
    });
    stops.push(() => c.stop({ timeoutMs: 0 }));
    await waitFor(async () => (await r.lag('s', 'g')).lag === 0 && (await effects()).length >= 20, 'the group to drain', 60_000);
    await c.stop();
    expect(proxy!.stats.droppedCommits).toBe(3);
    const rows = await effects();
    expect(rows.map((row) => row.n)).toEqual(Array.from({ length: 20 }, (_, n) => n));
    expect(new Set(rows.map((row) => row.event_id)).size).toBe(20);
  }, 90_000);

  it('competing consumer with transaction: true: three handler COMMITs answered by nobody, still one effect per event', async () => {
    const r = await setup(2, 20);
    proxy!.dropAnswer(handlerCommit, 3);
    const handler: ConsumerHandler<{ n: number }> = async (event, { client }) => {
      await insert(client, event.id, event.payload.n);
    };
    const c = r.consume<{ n: number }>({ stream: 's', group: 'g', transaction: true, leaseMs: 1_000, pollMs: 20, handler });
    stops.push(() => c.stop({ timeoutMs: 0 }));
    await waitFor(async () => (await r.lag('s', 'g')).lag === 0, 'the group to drain', 60_000);
    await c.stop();
    expect(proxy!.stats.droppedCommits).toBe(3);
    const rows = await effects();
    expect(rows.map((row) => row.n)).toEqual(Array.from({ length: 20 }, (_, n) => n));
  }, 90_000);

  it('createBatchSink({ transaction: true }): two batch COMMITs answered by nobody are settle-errors, and still one effect per event', async () => {
    const r = await setup(1, 30);
    proxy!.dropAnswer(handlerCommit, 2);
    const producer = r.producer<{ n: number }>({ stream: 's', group: 'g', maxDemand: 5, leaseMs: 1_000 });
    const sink = createBatchSink<{ n: number }>({
      producer,
      transaction: true,
      batchSize: 5,
      batchTimeoutMs: 20,
      handler: async (leases, { client }) => {
        for (const lease of leases) await insert(client, lease.event.id, lease.event.payload.n);
        return leases.map(() => 'ack' as const);
      },
    });
    const settleErrors: string[] = [];
    sink.on('settle-error', ({ error }: { error: { code?: string } }) => settleErrors.push(error.code ?? '?'));
    const done = pipeline(producer, sink);
    await waitFor(async () => (await r.lag('s', 'g')).lag === 0 && (await effects()).length >= 30, 'the group to drain', 60_000);
    await producer.drain();
    await done;
    expect(proxy!.stats.droppedCommits).toBe(2);
    // Every lease of each of the two batches whose answer was lost.
    expect(settleErrors.length).toBeGreaterThan(0);
    expect(new Set(settleErrors)).toEqual(new Set(['ambiguous']));
    expect((await effects()).map((row) => row.n)).toEqual(Array.from({ length: 30 }, (_, n) => n));
  }, 60_000);

  it('rheo.transaction: an append whose COMMIT answer was lost, retried with the same id, is stored once', async () => {
    const r = await setup(1, 0);
    proxy!.dropAnswer((query, transaction) => /^COMMIT/i.test(query) && transaction.some((q) => q.includes('.effects')), 1);
    const run = async (): Promise<boolean> => {
      const client = new pg.Client({ connectionString: proxy!.url(databaseUrl()) });
      client.on('error', () => {});
      await client.connect();
      try {
        await client.query('BEGIN');
        await insert(client, 'order-1', 1);
        const outcome = await r.transaction(client).append('s', { id: 'order-1', payload: { n: 1 } });
        await client.query('COMMIT');
        return outcome.existed;
      } finally {
        await client.end().catch(() => {});
      }
    };
    // The answer is lost: the caller cannot know whether it committed.
    await expect(run()).rejects.toThrow();
    // Its retry finds the event stored (so the caller rolls its own writes back, here by not writing them again).
    const client = new pg.Client({ connectionString: proxy!.url(databaseUrl()) });
    await client.connect();
    try {
      await client.query('BEGIN');
      const outcome = await r.transaction(client).append('s', { id: 'order-1', payload: { n: 1 } });
      expect(outcome.existed).toBe(true);
      await client.query('ROLLBACK');
    } finally {
      await client.end();
    }
    expect((await r.read('s', { partition: 0 })).length).toBe(1);
    expect((await effects()).length).toBe(1);
  }, 60_000);
});
