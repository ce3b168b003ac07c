import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { databaseUrl, sharedPool, uniqueSchema } from '../support/postgres.js';

/** Runs on a client just before it sends a statement, with the client's own (unwatched) query and the statement's text. */
type BeforeQuery = (query: (text: string) => Promise<pg.QueryResult>, text: string) => Promise<void>;

/**
 * A pool that counts every statement its clients send: one statement = one
 * round trip. `before`, when given, runs ahead of each statement (and may
 * send statements of its own, uncounted).
 */
class CountingPool extends pg.Pool {
  statements = 0;
  readonly #wrapped = new WeakSet<pg.PoolClient>();
  readonly #before: BeforeQuery | undefined;

  constructor(config: pg.PoolConfig, before?: BeforeQuery) {
    super(config);
    this.#before = before;
  }

  override async connect(): Promise<pg.PoolClient>;
  override connect(callback: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void): void;
  override connect(
    callback?: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void,
  ): Promise<pg.PoolClient> | void {
    // rheo checks out with the callback form (see connection.ts); both forms count.
    if (callback) return super.connect((err, client, done) => callback(err, client && this.#counted(client), done));
    return super.connect().then((client) => this.#counted(client));
  }

  #counted(client: pg.PoolClient): pg.PoolClient {
    if (!this.#wrapped.has(client)) {
      this.#wrapped.add(client);
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      const before = this.#before;
      client.query = ((...args: unknown[]) => {
        this.statements++;
        if (!before) return query(...args);
        const text = typeof args[0] === 'string' ? args[0] : ((args[0] as { text?: string }).text ?? '');
        return before(query as (text: string) => Promise<pg.QueryResult>, text).then(() => query(...args));
      }) as typeof client.query;
    }
    return client;
  }
}

const pool = new CountingPool({ connectionString: databaseUrl(), max: 4 });
afterAll(() => pool.end());

async function setup(partitions: number, events: number): Promise<{ rheo: Rheo; clock: ManualClock }> {
  const clock = new ManualClock();
  const rheo = createRheo({ backend: postgresBackend({ pool }, { schema: uniqueSchema(), clock }), clock });
  await rheo.migrate();
  await rheo.createStream('s', { partitions });
  await rheo.createGroup('s', 'g');
  for (let i = 0; i < events; i += 5000) {
    await rheo.appendBatch('s', Array.from({ length: Math.min(5000, events - i) }, (_, j) => ({ payload: { n: i + j } })));
  }
  return { rheo, clock };
}

async function count<T>(fn: () => Promise<T>): Promise<{ result: T; statements: number }> {
  const before = pool.statements;
  const result = await fn();
  return { result, statements: pool.statements - before };
}

describe('postgres round trips', () => {
  it('fetch is one statement whatever the limit and partition count (after the name lookups are cached)', async () => {
    const { rheo, clock } = await setup(4, 2000);
    await rheo.fetch('s', 'g', { limit: 1 }); // warms the stream/group cache
    for (const limit of [1, 10, 100, 1000]) {
      const { result, statements } = await count(() => rheo.fetch('s', 'g', { limit }));
      expect(result).toHaveLength(limit);
      expect(statements).toBe(1);
    }
    // Reclaiming expired leases is the same single statement.
    clock.advance(60_000);
    const { result, statements } = await count(() => rheo.fetch('s', 'g', { limit: 500 }));
    expect(result).toHaveLength(500);
    expect(result.every((l) => l.attempt === 2)).toBe(true);
    expect(statements).toBe(1);
    await rheo.close();
  });

  it('ackMany, nackMany-style settle and renewMany are one statement each', async () => {
    const { rheo } = await setup(2, 600);
    const leases = await rheo.fetch('s', 'g', { limit: 600 });
    const renewed = await count(() => rheo.renewMany(leases, { leaseMs: 60_000 }));
    expect(renewed.result.every((r) => r.ok)).toBe(true);
    expect(renewed.statements).toBe(1);
    const acked = await count(() => rheo.ackMany(leases.slice(0, 300)));
    expect(acked.result.every((r) => r.ok)).toBe(true);
    expect(acked.statements).toBe(1);
    const mixed = await count(() =>
      rheo.settleMany(
        leases.slice(300).map((lease, i) =>
          i % 3 === 0 ? { kind: 'nack' as const, lease, reason: 'retry' } : i % 3 === 1 ? { kind: 'reject' as const, lease } : { kind: 'release' as const, lease },
        ),
      ),
    );
    expect(mixed.result.every((r) => r.ok)).toBe(true);
    expect(mixed.statements).toBe(1);
    await rheo.close();
  });

  it('storage stays bounded after acking 20,000 events: no delivery rows left, none per event', async () => {
    const { rheo } = await setup(2, 20_000);
    for (;;) {
      const leases = await rheo.fetch('s', 'g', { limit: 1000 });
      if (leases.length === 0) break;
      expect((await rheo.ackMany(leases)).every((r) => r.ok)).toBe(true);
      const stats = await rheo.backend.storageStats('s', 'g');
      expect(stats.deliveries).toBe(0);
    }
    expect(await rheo.backend.storageStats('s', 'g')).toEqual({ deliveries: 0, deadLetters: 0 });
    const schema = (rheo.backend as unknown as { schema: string }).schema;
    const { rows } = await sharedPool().query<{ n: string }>(`SELECT count(*) AS n FROM "${schema}".deliveries`);
    expect(Number(rows[0]?.n)).toBe(0);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
    await rheo.close();
  });

  it('an empty fetch is one statement while the cached group exists: the claim vouches for its ids; a stale id is looked up again', async () => {
    const { rheo } = await setup(2, 2);
    await rheo.createGroup('s', 'h');
    expect(await rheo.fetch('s', 'h', { limit: 10 })).toHaveLength(2); // caches both names
    for (let i = 0; i < 3; i++) {
      const empty = await count(() => rheo.fetch('s', 'h', { limit: 10 }));
      expect(empty.result).toEqual([]);
      expect(empty.statements).toBe(1); // the claim, which found group h still there
    }
    // Group g deleted and made again by another instance: the empty claim under
    // the old id looks both names up, finds the new id, and claims under it.
    expect(await rheo.fetch('s', 'g', { limit: 10 })).toHaveLength(2);
    const other = createRheo({ backend: postgresBackend({ pool }, { schema: (rheo.backend as unknown as { schema: string }).schema }) });
    await other.deleteGroup('s', 'g', { confirm: true });
    await other.createGroup('s', 'g');
    const stale = await count(() => rheo.fetch('s', 'g', { limit: 10 }));
    expect(stale.result.map((l) => l.event.sequence)).toEqual([1, 2]);
    expect(stale.statements).toBe(4); // claim, lookup of both ids, the group's new id, claim
    await other.close();
    await rheo.close();
  });

  it('a heartbeat that moves no partition takes five round trips, its frontiers read with its write; one that moves some reads them after', async () => {
    const { rheo } = await setup(4, 0);
    await rheo.appendBatch('s', Array.from({ length: 40 }, (_, i) => ({ partition: i % 4, payload: { n: i } })));
    // The first heartbeat takes every partition: its writes move them, so the
    // frontiers are read in a statement of their own, after the ranges exploded.
    const first = await count(() => rheo.heartbeat('s', 'g', { memberId: 'm' }));
    expect(first.result.owned.map((o) => o.frontier)).toEqual([0, 0, 0, 0]);
    const fence = (o: { partition: number; generation: number }) => ({ stream: 's', group: 'g', partition: o.partition, memberId: 'm', generation: o.generation });
    const committed = await rheo.commit(first.result.owned.map((o) => ({ ...fence(o), upTo: o.partition + 2 })));
    expect(committed.every((r) => r.ok)).toBe(true);
    // BEGIN with its lock timeout, the group lock, the membership, the write with the frontiers, COMMIT.
    const steady = await count(() => rheo.heartbeat('s', 'g', { memberId: 'm' }));
    expect(steady.statements).toBe(5);
    expect(steady.result.owned.map((o) => [o.partition, o.frontier])).toEqual([[0, 2], [1, 3], [2, 4], [3, 5]]);
    expect(first.statements).toBeGreaterThan(steady.statements);
    // A second member joining moves partitions: the frontiers come after the write again, and are right.
    const joined = await count(() => rheo.heartbeat('s', 'g', { memberId: 'n' }));
    expect(joined.result.owned).toEqual([]);
    const view = await rheo.heartbeat('s', 'g', { memberId: 'm' });
    expect(view.owned.map((o) => [o.partition, o.frontier])).toEqual([[0, 2], [1, 3], [2, 4], [3, 5]]);
    expect(view.revoking).toHaveLength(2);
  });

  it('heartbeat and leave transactions run with the group lock idle timeout, and pooled connections keep the server default afterwards', async () => {
    // Reads the setting on the heartbeat's own connection, just before its group lock is taken.
    const seen: string[] = [];
    const probe = new CountingPool({ connectionString: databaseUrl(), max: 1 }, async (query, text) => {
      if (text.includes('group_ownership AS o')) seen.push((await query('SHOW idle_in_transaction_session_timeout')).rows[0].idle_in_transaction_session_timeout);
    });
    const rheo = createRheo({ backend: postgresBackend({ pool: probe }, { schema: uniqueSchema() }) });
    try {
      await rheo.migrate();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g');
      await rheo.heartbeat('s', 'g', { memberId: 'm' });
      await rheo.heartbeat('s', 'g', { memberId: 'm' });
      await rheo.leaveGroup('s', 'g', 'm');
      expect(seen).toEqual(['5s', '5s', '5s']);
      // SET LOCAL ended with each transaction: the one pooled connection is back at the default.
      expect((await probe.query('SHOW idle_in_transaction_session_timeout')).rows[0].idle_in_transaction_session_timeout).toBe('0');
    } finally {
      await rheo.close();
      await probe.end();
    }
  });

  it('reads of owned partitions asked for together share one statement; a stale fence fails alone, a call with a signal goes alone', async () => {
    const { rheo } = await setup(8, 0);
    await rheo.appendBatch('s', Array.from({ length: 800 }, (_, i) => ({ partition: i % 8, payload: { n: i } })));
    const view = await rheo.heartbeat('s', 'g', { memberId: 'm' });
    expect(view.owned).toHaveLength(8);
    const fence = (o: { partition: number; generation: number }) => ({ stream: 's', group: 'g', partition: o.partition, memberId: 'm', generation: o.generation });
    await rheo.readOwned(fence(view.owned[0]!), { limit: 1 }); // warms the stream/group cache

    const together = await count(() => Promise.all(view.owned.map((o) => rheo.readOwned(fence(o), { after: 10, limit: 20 }))));
    expect(together.statements).toBe(1);
    together.result.forEach((events, k) => {
      expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: 20 }, (_, i) => 11 + i));
      expect(events.every((e) => e.partition === view.owned[k]!.partition)).toBe(true);
    });

    // One stale fence among them: only that read fails, with stale_generation.
    const stale = { ...view.owned[3]!, generation: view.owned[3]!.generation + 1 };
    const mixed = await count(() =>
      Promise.allSettled(view.owned.map((o, k) => rheo.readOwned(fence(k === 3 ? stale : o), { after: 95, limit: 20 }))),
    );
    expect(mixed.statements).toBe(1);
    mixed.result.forEach((r, k) => {
      if (k === 3) expect(r).toMatchObject({ status: 'rejected', reason: { code: 'stale_generation' } });
      else expect(r).toMatchObject({ status: 'fulfilled', value: [{ sequence: 96 }, { sequence: 97 }, { sequence: 98 }, { sequence: 99 }, { sequence: 100 }] });
    });

    // A read with its own signal is its own statement: aborting it cancels nothing else.
    const controller = new AbortController();
    const alone = await count(() =>
      Promise.all(view.owned.map((o, k) => rheo.readOwned(fence(o), k === 0 ? { after: 0, limit: 5, signal: controller.signal } : { after: 0, limit: 5 }))),
    );
    expect(alone.statements).toBe(2);
    expect(alone.result.map((events) => events.length)).toEqual(Array(8).fill(5));
  });
});
