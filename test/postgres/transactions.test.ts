import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { postgresBackend, type PostgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { RheoError } from '../../src/core/errors.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { databaseUrl, makeTestBackend, sharedPool } from '../support/postgres.js';

/** A client checked out of the test pool with BEGIN sent; released by the test's cleanup. */
const held: pg.PoolClient[] = [];
async function begin(): Promise<pg.PoolClient> {
  const client = await sharedPool().connect();
  held.push(client);
  await client.query('BEGIN');
  return client;
}

/** Gives a client from `begin()` back to the pool. */
function done(client: pg.PoolClient): void {
  held.splice(held.indexOf(client), 1);
  client.release();
}

afterEach(() => {
  for (const client of held.splice(0)) client.release(true);
});

async function setup(clock?: ManualClock): Promise<{ rheo: Rheo; backend: PostgresBackend; table: string }> {
  const backend = await makeTestBackend(clock);
  const rheo = createRheo({ backend, ...(clock ? { clock } : {}) });
  const table = `"${backend.schema}".orders`;
  await sharedPool().query(`CREATE TABLE ${table} (id text PRIMARY KEY)`);
  return { rheo, backend, table };
}

async function rows(table: string): Promise<string[]> {
  const { rows: found } = await sharedPool().query<{ id: string }>(`SELECT id FROM ${table} ORDER BY id`);
  return found.map((r) => r.id);
}

/** The backend pid a client is connected to. */
async function pidOf(client: pg.PoolClient): Promise<number> {
  const { rows: [row] } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return row!.pid;
}

/** Polls pg_stat_activity (bounded) until `pid` waits on a lock. */
async function waitingOnLock(pid: number): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    const { rows: found } = await sharedPool().query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, [pid]);
    if (found.length > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`backend ${pid} never waited on a lock`);
}

describe('postgres transactions: outbox append', () => {
  it('capabilities say transactions', async () => {
    const { rheo } = await setup();
    expect(rheo.capabilities.transactions).toBe(true);
  });

  it('appends are invisible until commit, then visible, and the commit wakes an idle waiter', async () => {
    const { rheo, backend, table } = await setup();
    // A second process (its own backend) commits the transactions, so wakeups can only come through LISTEN.
    const other = createRheo({ backend: postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 2 } }, { schema: backend.schema }) });
    try {
      await rheo.createStream('orders', { partitions: 2 });
      await rheo.createStream('marker');
      await rheo.createGroup('orders', 'billing');
      await backend.listen();
      let woken = false;
      const wake = backend.waitForAppend('orders', 3_600_000).then((result) => (woken = result));
      const client = await begin();
      await client.query(`INSERT INTO ${table} (id) VALUES ('o-1')`);
      const tx = other.transaction(client);
      const [event] = await tx.appendBatch('orders', [
        { type: 'order.placed', key: 'o-1', payload: { id: 'o-1' } },
        { type: 'order.placed', key: 'o-2', payload: { id: 'o-2' } },
      ]);
      expect(event).toMatchObject({ type: 'order.placed', sequence: 1, existed: false });
      expect(await rheo.read('orders', { partition: event!.partition })).toEqual([]);
      expect(await rheo.fetch('orders', 'billing', { limit: 10 })).toEqual([]);
      expect((await rheo.lag('orders', 'billing')).lag).toBe(0);
      // Notifications reach one LISTEN connection in commit order: once a later
      // commit's wakeup is in, an uncommitted append's would have been too.
      const marker = backend.waitForAppend('marker', 3_600_000);
      await other.append('marker', { payload: 0 });
      expect(await marker).toBe(true);
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(woken).toBe(false);
      await client.query('COMMIT');
      expect(await wake).toBe(true);
      expect(await rows(table)).toEqual(['o-1']);
      const leases = await rheo.fetch('orders', 'billing', { limit: 10 });
      expect(leases.map((l) => l.event.payload).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))).toEqual([
        { id: 'o-1' },
        { id: 'o-2' },
      ]);
    } finally {
      await other.close();
    }
  });

  it('a rollback leaves no event, no gap and no wakeup; the next append takes the next sequence', async () => {
    const { rheo, backend, table } = await setup();
    const other = createRheo({ backend: postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 2 } }, { schema: backend.schema }) });
    try {
      await rheo.createStream('orders');
      await rheo.createStream('marker');
      await rheo.createGroup('orders', 'billing');
      await rheo.append('orders', { payload: 'before' });
      await backend.listen();
      let woken = false;
      void backend.waitForAppend('orders', 3_600_000).then((result) => (woken = result));
      const client = await begin();
      await client.query(`INSERT INTO ${table} (id) VALUES ('o-1')`);
      const appended = await other.transaction(client).appendBatch('orders', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
      expect(appended.map((e) => e.sequence)).toEqual([2, 3, 4]);
      await client.query('ROLLBACK');
      const marker = backend.waitForAppend('marker', 3_600_000);
      await other.append('marker', { payload: 0 });
      expect(await marker).toBe(true);
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(woken).toBe(false);
      expect(await rows(table)).toEqual([]);
      expect((await rheo.read('orders')).map((e) => e.payload)).toEqual(['before']);
      const next = await rheo.append('orders', { payload: 'after' });
      expect(next.sequence).toBe(2);
      const leases = await rheo.fetch('orders', 'billing', { limit: 10 });
      expect(leases.map((l) => [l.event.sequence, l.event.payload])).toEqual([
        [1, 'before'],
        [2, 'after'],
      ]);
      await rheo.ackMany(leases);
      expect(await rheo.lag('orders', 'billing')).toMatchObject({ lag: 0, partitions: { 0: { frontier: 2, highWatermark: 2 } } });
    } finally {
      await other.close();
    }
  });

  it('a second transaction appending to the same partition waits for the first, so sequences commit in order', async () => {
    const { rheo } = await setup();
    await rheo.createStream('s', { partitions: 2 });
    await rheo.createGroup('s', 'g');
    const first = await begin();
    const second = await begin();
    const third = await begin();
    expect((await rheo.transaction(first).append('s', { partition: 0, payload: 'first' })).sequence).toBe(1);
    // Another partition is not held up.
    expect((await rheo.transaction(third).append('s', { partition: 1, payload: 'third' })).sequence).toBe(1);
    const secondPid = await pidOf(second);
    const secondAppend = rheo.transaction(second).append('s', { partition: 0, payload: 'second' });
    await waitingOnLock(secondPid);
    await third.query('COMMIT');
    expect((await rheo.fetch('s', 'g', { limit: 10 })).map((l) => l.event.payload)).toEqual(['third']);
    await first.query('COMMIT');
    const appended = await secondAppend;
    expect(appended.sequence).toBe(2);
    // The first committed, the second has not: a consumer sees 1 and nothing past it.
    const leases = await rheo.fetch('s', 'g', { limit: 10 });
    expect(leases.map((l) => l.event.payload)).toEqual(['first']);
    await second.query('COMMIT');
    expect((await rheo.fetch('s', 'g', { limit: 10 })).map((l) => l.event.payload)).toEqual(['second']);
  });

  it('many concurrent transactions committing and rolling back in random order never let a consumer skip an event', async () => {
    const { rheo } = await setup();
    await rheo.createStream('s', { partitions: 3 });
    await rheo.createGroup('s', 'g');
    const seen: number[][] = [[], [], []];
    const committed = new Set<string>();
    let running = true;
    const consumer = (async () => {
      while (running || seen.flat().length < committed.size) {
        const leases = await rheo.fetch('s', 'g', { limit: 50 });
        for (const lease of leases) seen[lease.event.partition]!.push(lease.event.sequence);
        await rheo.ackMany(leases);
        if (leases.length === 0) await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    const workers = Array.from({ length: 5 }, async (_, w) => {
      for (let round = 0; round < 8; round++) {
        const client = await begin();
        const tx = rheo.transaction(client);
        const events = await tx.appendBatch(
          's',
          Array.from({ length: 1 + ((w + round) % 3) }, (_, i) => ({ key: `k-${w}-${round}-${i}`, payload: { w, round, i } })),
        );
        // Other work inside the transaction, of varying length, so commits come in a shuffled order.
        for (let i = 0; i < (w * 7 + round * 3) % 4; i++) await client.query('SELECT 1');
        if ((w + round) % 4 === 0) {
          await client.query('ROLLBACK');
        } else {
          await client.query('COMMIT');
          for (const e of events) committed.add(e.id);
        }
        done(client);
      }
    });
    await Promise.all(workers);
    running = false;
    await consumer;
    // Every partition was consumed as 1..n without a skip, n being what committed.
    const lag = await rheo.lag('s', 'g');
    for (let p = 0; p < 3; p++) {
      const sequences = seen[p]!;
      expect(sequences).toEqual(Array.from({ length: sequences.length }, (_, i) => i + 1));
      expect(lag.partitions[p]).toMatchObject({ frontier: sequences.length, highWatermark: sequences.length });
    }
    expect(seen.flat().length).toBe(committed.size);
    expect(lag.lag).toBe(0);
  }, 120_000);

  it('an explicit id racing a concurrent transaction with the same id comes back existed, and the transaction lives on', async () => {
    const { rheo, table } = await setup();
    await rheo.createStream('s');
    const first = await begin();
    const second = await begin();
    await rheo.transaction(first).append('s', { id: 'order-1', payload: 'first' });
    const secondPid = await pidOf(second);
    const racing = rheo.transaction(second).append('s', { id: 'order-1', payload: 'second' });
    await waitingOnLock(secondPid);
    await first.query('COMMIT');
    const outcome = await racing;
    expect(outcome).toMatchObject({ id: 'order-1', payload: 'first', existed: true, sequence: 1 });
    await second.query(`INSERT INTO ${table} (id) VALUES ('still-usable')`);
    await second.query('COMMIT');
    expect(await rows(table)).toEqual(['still-usable']);
    expect((await rheo.read('s')).map((e) => e.sequence)).toEqual([1]);
    expect((await rheo.append('s', { payload: 'next' })).sequence).toBe(2);
  });

  it('validates like the plain calls and writes nothing on bad input', async () => {
    const { rheo } = await setup();
    await rheo.createStream('s', { partitions: 2 });
    const client = await begin();
    const tx = rheo.transaction(client);
    await expect(tx.append('bad name!', { payload: 1 })).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(tx.append('s', { payload: undefined as never })).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(tx.append('s', { payload: 1, partition: 2 })).rejects.toMatchObject({ code: 'invalid_partition' });
    await expect(tx.appendBatch('s', [{ payload: 'x' }, { payload: 'x'.repeat(2 * 1024 * 1024) }])).rejects.toMatchObject({ code: 'event_too_large' });
    await expect(tx.append('missing', { payload: 1 })).rejects.toMatchObject({ code: 'stream_not_found' });
    await expect(tx.ack({} as never)).rejects.toMatchObject({ code: 'invalid_argument' });
    const results = await tx.ackMany([{} as never]);
    expect(results[0]).toMatchObject({ ok: false, error: { code: 'invalid_argument' } });
    expect(() => rheo.transaction(null as never)).toThrow(RheoError);
    await client.query('COMMIT');
    expect(await rheo.read('s')).toEqual([]);
  });
});

describe('postgres transactions: settles with the application\'s writes', () => {
  it('ack commits with the writes; a rollback undoes both and the lease is still held', async () => {
    const clock = new ManualClock();
    const { rheo, table } = await setup(clock);
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    await rheo.appendBatch('s', [{ payload: 1 }, { payload: 2 }]);
    const [a, b] = await rheo.fetch('s', 'g', { limit: 2, leaseMs: 10_000 });
    const rolled = await begin();
    await rolled.query(`INSERT INTO ${table} (id) VALUES ($1)`, [a!.event.id]);
    await rheo.transaction(rolled).ack(a!);
    await rolled.query('ROLLBACK');
    await rheo.renew(a!); // still held under its lease id
    const client = await begin();
    await client.query(`INSERT INTO ${table} (id) VALUES ($1)`, [a!.event.id]);
    await rheo.transaction(client).ackMany([a!, b!]);
    await client.query('COMMIT');
    expect(await rows(table)).toEqual([a!.event.id]);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });

  it('a settle holds its delivery until commit: an expired lease acked in an open transaction is not reclaimed', async () => {
    const clock = new ManualClock();
    const { rheo } = await setup(clock);
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    await rheo.appendBatch('s', [{ payload: 1 }, { payload: 2 }]);
    const leases = await rheo.fetch('s', 'g', { limit: 2, leaseMs: 1_000 });
    const client = await begin();
    await rheo.transaction(client).ack(leases[0]!);
    clock.advance(5_000);
    // Both leases were claimed as one lease range, which the open transaction
    // holds locked: neither member is reclaimed until it ends.
    expect(await rheo.fetch('s', 'g', { limit: 10, leaseMs: 1_000 })).toEqual([]);
    await client.query('COMMIT');
    const reclaimed = await rheo.fetch('s', 'g', { limit: 10, leaseMs: 1_000 });
    expect(reclaimed.map((l) => [l.event.sequence, l.attempt])).toEqual([[2, 2]]);
    await rheo.ack(reclaimed[0]!);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
    expect(await rheo.fetch('s', 'g')).toEqual([]);
  });

  it('a stale holder cannot commit its writes: paused past its lease, resumed after another worker acked', async () => {
    const clock = new ManualClock();
    const { rheo, table } = await setup(clock);
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    await rheo.append('s', { payload: 'charge' });
    const [stale] = await rheo.fetch('s', 'g', { limit: 1, leaseMs: 1_000 });
    // Worker A starts its transaction and its effect, then pauses past its lease.
    const client = await begin();
    await client.query(`INSERT INTO ${table} (id) VALUES ('effect-of-A')`);
    clock.advance(2_000);
    // Worker B reclaims the event and acks it with its own effect.
    const [fresh] = await rheo.fetch('s', 'g', { limit: 1, leaseMs: 1_000 });
    expect(fresh!.attempt).toBe(2);
    const other = await begin();
    await other.query(`INSERT INTO ${table} (id) VALUES ('effect-of-B')`);
    await rheo.transaction(other).ack(fresh!);
    await other.query('COMMIT');
    // A resumes: its settle is refused, and its transaction can no longer commit.
    const error = await rheo.transaction(client).ack(stale!).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'stale_lease' });
    await expect(client.query(`INSERT INTO ${table} (id) VALUES ('more-of-A')`)).rejects.toThrow();
    const commit = await client.query('COMMIT');
    expect(commit.command).toBe('ROLLBACK');
    expect(await rows(table)).toEqual(['effect-of-B']);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });

  it('a stale holder whose lease was reclaimed but not yet settled fails too, and the new holder keeps it', async () => {
    const clock = new ManualClock();
    const { rheo, table } = await setup(clock);
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    await rheo.append('s', { payload: 'charge' });
    const [stale] = await rheo.fetch('s', 'g', { limit: 1, leaseMs: 1_000 });
    clock.advance(2_000);
    const [fresh] = await rheo.fetch('s', 'g', { limit: 1, leaseMs: 10_000 });
    const client = await begin();
    await client.query(`INSERT INTO ${table} (id) VALUES ('effect-of-A')`);
    await expect(rheo.transaction(client).nack(stale!, 'x')).rejects.toMatchObject({ code: 'stale_lease' });
    await client.query('COMMIT');
    expect(await rows(table)).toEqual([]);
    await rheo.ack(fresh!);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });

  it('nack, reject and release in a transaction apply at commit only', async () => {
    const clock = new ManualClock();
    const { rheo } = await setup(clock);
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g', { maxAttempts: 5 });
    await rheo.appendBatch('s', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
    const [a, b, c] = await rheo.fetch('s', 'g', { limit: 3 });
    const client = await begin();
    const tx = rheo.transaction(client);
    await tx.nack(a!, 'later', { delayMs: 0 });
    await tx.reject(b!, 'bad');
    await tx.release(c!);
    expect(await rheo.deadLetters('s', 'g')).toEqual([]);
    await client.query('COMMIT');
    expect((await rheo.deadLetters('s', 'g')).map((d) => d.event.sequence)).toEqual([2]);
    const again = await rheo.fetch('s', 'g', { limit: 3 });
    expect(again.map((l) => [l.event.sequence, l.attempt])).toEqual([
      [1, 2],
      [3, 1],
    ]);
  });
});

describe('transactions on a backend without the capability', () => {
  it('memory answers unsupported, naming the capability', () => {
    const rheo = createRheo();
    expect(() => rheo.transaction({ query: async () => ({}) })).toThrow(/"transactions" capability/);
    try {
      rheo.transaction({ query: async () => ({}) });
    } catch (error) {
      expect(error).toMatchObject({ code: 'unsupported' });
    }
  });
});
