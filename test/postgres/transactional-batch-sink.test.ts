import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { ManualClock } from '../../src/core/clock.js';
import type { JsonValue } from '../../src/core/types.js';
import { createBatchSink } from '../../src/sinks/batch-sink.js';
import type { SinkLeaseLostInfo } from '../../src/runtime/lease-outcome.js';
import { makeTestBackend, sharedPool } from '../support/postgres.js';

async function setup(clock?: ManualClock): Promise<{ rheo: Rheo; table: string }> {
  const backend = await makeTestBackend(clock);
  const rheo = createRheo({ backend, defaults: { pollMs: 20 }, ...(clock ? { clock } : {}) });
  const table = `"${backend.schema}".effects`;
  await sharedPool().query(`CREATE TABLE ${table} (event_id text NOT NULL, attempt int NOT NULL, PRIMARY KEY (event_id, attempt))`);
  await rheo.createStream('s');
  await rheo.createGroup('s', 'g');
  return { rheo, table };
}

async function effects(table: string): Promise<Array<{ event_id: string; attempt: number }>> {
  return (await sharedPool().query<{ event_id: string; attempt: number }>(`SELECT event_id, attempt FROM ${table} ORDER BY event_id`)).rows;
}

describe('createBatchSink({ transaction: true }) on PostgreSQL', () => {
  it("commits a batch's rows with its acks and per-item rejects", async () => {
    const { rheo, table } = await setup();
    const placed = await rheo.appendBatch('s', Array.from({ length: 6 }, (_, n) => ({ payload: n })));
    const producer = rheo.producer<number>({ stream: 's', group: 'g', maxDemand: 6 });
    let seen = 0;
    const sink = createBatchSink<number>({
      producer,
      transaction: true,
      batchSize: 3,
      batchTimeoutMs: 60_000,
      handler: async (leases, { client }) => {
        for (const lease of leases) {
          await client!.query(`INSERT INTO ${table} (event_id, attempt) VALUES ($1, $2)`, [lease.event.id, lease.attempt]);
        }
        // Not visible outside the batch's transaction before it commits.
        expect(await effects(table)).toHaveLength(seen);
        seen += leases.length;
        if (seen === 6) void producer.drain();
        return leases.map((lease) => (lease.event.payload === 5 ? { reject: 'poison' } : 'ack'));
      },
    });
    await pipeline(producer, sink);
    expect((await effects(table)).map((r) => r.event_id)).toEqual(placed.map((e) => e.id).sort());
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
    expect((await rheo.deadLetters('s', 'g')).map((d) => [d.event.id, d.reason])).toEqual([[placed[5]!.id, 'poison']]);
    expect(producer.inflightCount).toBe(0);
  });

  it('a throw or a retry in the batch leaves no rows and the events come back', async () => {
    const { rheo, table } = await setup();
    const placed = await rheo.appendBatch('s', [{ payload: 'a' }, { payload: 'b' }, { payload: 'c' }]);
    const run = async (outcome: (attempt: number) => JsonValue | void): Promise<string[]> => {
      const producer = rheo.producer<string>({ stream: 's', group: 'g', maxDemand: 3 });
      const errors: string[] = [];
      const sink = createBatchSink<string>({
        producer,
        transaction: true,
        batchSize: 3,
        batchTimeoutMs: 60_000,
        handler: async (leases, { client }) => {
          void producer.drain();
          for (const lease of leases) {
            await client!.query(`INSERT INTO ${table} (event_id, attempt) VALUES ($1, $2)`, [lease.event.id, lease.attempt]);
          }
          return leases.map((lease) => (lease.event.payload === 'b' ? outcome(lease.attempt) : 'ack')) as never;
        },
      });
      sink.on('batch-error', ({ error }) => errors.push((error as Error).message));
      await pipeline(producer, sink);
      return errors;
    };
    expect(
      await run(() => {
        throw new Error('boom after the writes');
      }),
    ).toEqual(['boom after the writes']);
    expect(await effects(table)).toEqual([]);
    expect(await run(() => ({ retry: 'not yet' }))).toEqual([]);
    expect(await effects(table)).toEqual([]);
    expect((await rheo.lag('s', 'g')).lag).toBe(3);
    // Every lease of both batches was nacked: the third delivery commits all three rows at once.
    expect(await run(() => 'ack')).toEqual([]);
    expect(await effects(table)).toEqual(placed.map((e) => ({ event_id: e.id, attempt: 3 })).sort((x, y) => x.event_id.localeCompare(y.event_id)));
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });

  it('a stale lease in the batch commits nothing: the lost lease is reported, the others are nacked', async () => {
    const clock = new ManualClock();
    const { rheo, table } = await setup(clock);
    const [first, second] = await rheo.appendBatch('s', [{ payload: 1 }, { payload: 2 }]);
    const producer = rheo.producer<number>({ stream: 's', group: 'g', maxDemand: 2, leaseMs: 300_000 });
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let release!: () => void;
    const paused = new Promise<void>((resolve) => (release = resolve));
    const lost: Array<SinkLeaseLostInfo<number>> = [];
    const sink = createBatchSink<number>({
      producer,
      transaction: true,
      batchSize: 2,
      batchTimeoutMs: 60_000,
      handler: async (leases, { client }) => {
        void producer.drain();
        for (const lease of leases) {
          await client!.query(`INSERT INTO ${table} (event_id, attempt) VALUES ($1, $2)`, [lease.event.id, lease.attempt]);
        }
        started();
        await paused;
      },
    });
    sink.on('lease-lost', (info) => lost.push(info));
    const piped = pipeline(producer, sink);
    await running;
    // While the batch is paused, the first lease expires and another worker claims and acks it.
    clock.advance(300_001);
    const [stolen] = await rheo.fetch('s', 'g', { limit: 1 });
    expect(stolen?.event.id).toBe(first!.id);
    await rheo.ack(stolen!);
    release();
    await piped;
    expect(await effects(table)).toEqual([]);
    expect(lost.map((l) => [l.lease.event.id, l.error.code])).toEqual([[first!.id, 'stale_lease']]);
    expect(producer.inflightCount).toBe(0);
    const again = await rheo.fetch('s', 'g', { limit: 5 });
    expect(again.map((l) => [l.event.id, l.attempt])).toEqual([[second!.id, 2]]);
  });

  it('is unsupported on a backend without transactions, and checks its option', () => {
    const rheo = createRheo();
    const producer = rheo.producer({ stream: 's', group: 'g' });
    try {
      expect(() => createBatchSink({ producer, transaction: true, handler: () => undefined })).toThrow(
        expect.objectContaining({ code: 'unsupported', message: expect.stringContaining('"transactions"') }),
      );
      expect(() => createBatchSink({ producer, transaction: 'yes' as never, handler: () => undefined })).toThrow(
        expect.objectContaining({ code: 'invalid_argument' }),
      );
      // A settler that is not a RheoProducer has no backend to begin the transaction on.
      const settlerOnly = { ack: () => Promise.resolve(), timers: producer.timers } as never;
      expect(() => createBatchSink({ producer: settlerOnly, transaction: true, handler: () => undefined })).toThrow(
        expect.objectContaining({ code: 'invalid_argument' }),
      );
    } finally {
      producer.destroy();
    }
  });
});
