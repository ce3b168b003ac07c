import { afterEach, describe, expect, it } from 'vitest';
import { memoryBackend } from '../../src/backends/memory/memory-backend.js';
import type { PartitionConsumer } from '../../src/consumer/partition-consumer.js';
import type { PartitionHandler } from '../../src/consumer/partition-options.js';
import { isRheoError } from '../../src/core/errors.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { waitFor } from '../consumer/harness.js';
import { makeTestBackend, sharedPool } from '../support/postgres.js';

interface Effect {
  event_id: string;
  n: number;
  attempt: number;
}

/**
 * consume({ assignment: 'partitions', transaction: true }) on a real
 * PostgreSQL: the offset commit joins the handler's transaction (issue 13).
 * The user table has no unique constraint and the handlers no ON CONFLICT,
 * so a second effect of one event would show as a second row.
 */
describe('partition ownership with transaction: true (postgres)', () => {
  let rheo: Rheo | null = null;
  let schema = '';
  const consumers: PartitionConsumer[] = [];

  afterEach(async () => {
    for (const c of consumers.splice(0)) await c.stop({ timeoutMs: 0 });
    await rheo?.close();
    rheo = null;
  });

  async function setup(partitions: number, events: number): Promise<Rheo> {
    const backend = await makeTestBackend();
    schema = backend.schema;
    rheo = createRheo({ backend });
    await sharedPool().query(`CREATE TABLE "${schema}".effects (event_id text NOT NULL, n int NOT NULL, attempt int NOT NULL)`);
    await rheo.createStream('s', { partitions });
    await rheo.createGroup('s', 'g');
    await rheo.appendBatch(
      's',
      Array.from({ length: events }, (_, n) => ({ key: `k${n % 7}`, payload: { n } })),
    );
    return rheo;
  }

  function consume(r: Rheo, memberId: string, handler: PartitionHandler<{ n: number }>, extra: Record<string, unknown> = {}): PartitionConsumer<{ n: number }> {
    const c = r.consume<{ n: number }>({
      stream: 's',
      group: 'g',
      assignment: 'partitions',
      transaction: true,
      memberId,
      sessionMs: 60_000,
      heartbeatMs: 30_000,
      rebalanceTimeoutMs: 60_000,
      pollMs: 20,
      batchSize: 10,
      retryBackoff: { initialMs: 1, maxMs: 5 },
      handler,
      ...extra,
    });
    consumers.push(c as unknown as PartitionConsumer);
    return c;
  }

  async function effects(): Promise<Effect[]> {
    return (await sharedPool().query<Effect>(`SELECT event_id, n, attempt FROM "${schema}".effects ORDER BY n, attempt`)).rows;
  }

  const insert = (client: unknown, id: string, n: number, attempt: number): Promise<unknown> =>
    (client as { query(text: string, values: unknown[]): Promise<unknown> }).query(
      `INSERT INTO "${schema}".effects (event_id, n, attempt) VALUES ($1, $2, $3)`,
      [id, n, attempt],
    );

  it('commits each effect with its offset; a throw rolls back and the event runs again; a reject commits with its dead letter; an exhausted event is dead-lettered with nothing written', async () => {
    const r = await setup(2, 40);
    const attempts = new Map<number, number[]>();
    const c = consume(
      r,
      'm1',
      async (event, { client, attempt }) => {
        const n = event.payload.n;
        attempts.set(n, [...(attempts.get(n) ?? []), attempt]);
        await insert(client, event.id, n, attempt);
        if (n === 5 && attempt === 1) throw new Error('first run of 5 fails');
        if (n === 7) return { reject: 'seven is refused' };
        if (n === 9) throw new Error('nine always fails');
        return undefined;
      },
      { maxAttempts: 3 },
    );
    await waitFor(async () => (await r.lag('s', 'g')).lag === 0, 'the group to drain', 60_000);
    await c.stop();

    const rows = await effects();
    // Every event but 9 exactly once; 5 from its second run; 9's three runs all rolled back.
    expect(rows.map((row) => row.n)).toEqual(Array.from({ length: 40 }, (_, n) => n).filter((n) => n !== 9));
    expect(rows.find((row) => row.n === 5)?.attempt).toBe(2);
    expect(attempts.get(5)).toEqual([1, 2]);
    expect(attempts.get(9)).toEqual([1, 2, 3]);
    const dead = await r.deadLetters('s', 'g');
    expect(dead.map((d) => [(d.event.payload as { n: number }).n, d.attempt, d.reason]).sort()).toEqual([
      [7, 1, 'seven is refused'],
      [9, 3, 'handler threw: nine always fails'],
    ]);
    expect(c.stats()).toMatchObject({ deadLettered: 2, retried: 3 });
  }, 90_000);

  it('a stale owner (its partition moved to another member while it handled an event) cannot commit its writes; the next owner handles the event once', async () => {
    const r = await setup(1, 3);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered = false;
    const a = consume(r, 'a', async (event, { client, attempt }) => {
      await insert(client, event.id, event.payload.n, attempt);
      entered = true;
      await gate;
    });
    await waitFor(() => entered, 'member a to be inside its first handler', 30_000);
    const before = (await r.members('s', 'g')).owners[0];
    expect(before).toBe('a');
    // The partition moves: a's session is ended and b is granted it with the next generation.
    await r.leaveGroup('s', 'g', 'a');
    const view = await r.heartbeat('s', 'g', { memberId: 'b', sessionMs: 60_000, rebalanceTimeoutMs: 60_000 });
    expect(view.owned.map((o) => o.partition)).toEqual([0]);
    release();
    // a's handler returns; its offset commit is refused (stale generation)
    // and the transaction rolls back before the call counts as handled (a
    // does not heartbeat meanwhile, so nothing aborts the call first).
    await waitFor(() => a.stats().handled >= 1, "a's handler call to end", 30_000);
    expect(await effects()).toEqual([]);
    expect((await r.lag('s', 'g')).lag).toBe(3);
    await a.stop({ timeoutMs: 0 });
    await r.leaveGroup('s', 'g', 'b');

    const c = consume(r, 'c', async (event, { client, attempt }) => {
      await insert(client, event.id, event.payload.n, attempt);
    });
    await waitFor(async () => (await r.lag('s', 'g')).lag === 0, 'the group to drain', 60_000);
    await c.stop();
    expect((await effects()).map((row) => row.n)).toEqual([0, 1, 2]);
  }, 90_000);

  it('two members and a rebalance in the middle: every effect exactly once, lag 0', async () => {
    const r = await setup(4, 400);
    const handler: PartitionHandler<{ n: number }> = async (event, { client, attempt }) => {
      await insert(client, event.id, event.payload.n, attempt);
    };
    const first = consume(r, 'm1', handler, { heartbeatMs: 50, sessionMs: 5_000, rebalanceTimeoutMs: 5_000 });
    await waitFor(async () => (await effects()).length >= 50, 'm1 to make progress', 30_000);
    const second = consume(r, 'm2', handler, { heartbeatMs: 50, sessionMs: 5_000, rebalanceTimeoutMs: 5_000 });
    await waitFor(async () => Object.values((await r.members('s', 'g')).owners).includes('m2'), 'm2 to get partitions', 30_000);
    await first.stop();
    await waitFor(async () => (await r.lag('s', 'g')).lag === 0, 'the group to drain', 60_000);
    await second.stop();
    const rows = await effects();
    expect(rows.length).toBe(400);
    expect(new Set(rows.map((row) => row.event_id)).size).toBe(400);
  }, 90_000);

  it('refuses orderBy: key with transaction: true, and backends without transactions name the capability', async () => {
    const r = await setup(1, 1);
    expect(() => consume(r, 'k', () => undefined, { orderBy: 'key' })).toThrow(/orderBy: 'partition'/);
    const memory = createRheo({ backend: memoryBackend() });
    await memory.createStream('s', { partitions: 1 });
    await memory.createGroup('s', 'g');
    try {
      memory.consume({ stream: 's', group: 'g', assignment: 'partitions', transaction: true, handler: () => undefined });
      expect.unreachable('consume should have thrown');
    } catch (error) {
      expect(isRheoError(error, 'unsupported')).toBe(true);
      expect((error as Error).message).toContain('"transactions" capability');
    }
    await memory.close();
  });
});
