import { afterAll, describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { ManualClock } from '../../src/core/clock.js';
import type { FetchRequest } from '../../src/core/backend.js';
import { createRheo } from '../../src/rheo.js';
import { cleanupPostgres, databaseUrl, sharedPool, uniqueSchema } from '../support/postgres.js';

afterAll(cleanupPostgres);

const request = (partitions: number[] | null = null): FetchRequest => ({
  limit: 100,
  consumerId: 'c',
  leaseMs: 60_000,
  partitions,
  maxBytes: 1 << 24,
});

/** Polls (bounded) until a connection of `applicationName` waits on a lock. */
async function waitsOnLock(applicationName: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const { rows } = await sharedPool().query(
      `SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
      [applicationName],
    );
    if (rows.length > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`no connection of ${applicationName} waits on a lock`);
}

/**
 * Issue 11: a fetch must not queue behind another transaction that holds one
 * partition's cursor (routines.ts locks cursors with SKIP LOCKED). The
 * fetching pool has `lock_timeout` set, so a fetch that waited for the held
 * cursor would fail with a lock timeout instead of returning.
 */
describe('postgres fetch skips partitions whose cursor another transaction holds', () => {
  it('returns the other partitions\' events while one cursor is locked, then that partition\'s once released', async () => {
    const schema = uniqueSchema();
    const app = `rheo-skip-${schema}`;
    const clock = new ManualClock();
    const backend = postgresBackend(
      { connectionString: databaseUrl(), poolConfig: { max: 2, application_name: app, options: '-c lock_timeout=2000' } },
      { schema, clock },
    );
    const rheo = createRheo({ backend, clock });
    const holder = await sharedPool().connect();
    try {
      await rheo.migrate();
      await rheo.createStream('s', { partitions: 3 });
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', Array.from({ length: 30 }, (_, i) => ({ partition: i % 3, payload: i })));

      await holder.query('BEGIN');
      await holder.query(
        `SELECT c.partition FROM "${schema}".group_cursors c JOIN "${schema}".groups g ON g.id = c.group_id
         WHERE g.name = 'g' AND c.partition = 1 FOR UPDATE OF c`,
      );

      const first = await backend.fetch('s', 'g', request());
      expect(first).toHaveLength(20);
      expect(new Set(first.map((l) => l.event.partition))).toEqual(new Set([0, 2]));
      // Lowest sequence first within each partition it locked, round-robin across them.
      for (const p of [0, 2]) {
        const seqs = first.filter((l) => l.event.partition === p).map((l) => l.event.sequence);
        expect(seqs).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
      }
      // Nothing claimable in the partitions it can lock: empty, without waiting.
      expect(await backend.fetch('s', 'g', request())).toEqual([]);

      // Every requested cursor held elsewhere: the fetch waits for it (so nothing
      // is left behind) and claims once the holder commits.
      const waiting = backend.fetch('s', 'g', request([1]));
      await waitsOnLock(app);
      await holder.query('COMMIT');
      const rest = await waiting;
      expect(rest.map((l) => [l.event.partition, l.event.sequence])).toEqual(Array.from({ length: 10 }, (_, i) => [1, i + 1]));

      expect((await rheo.ackMany([...first, ...rest])).every((r) => r.ok)).toBe(true);
      expect((await rheo.lag('s', 'g')).lag).toBe(0);
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
      await rheo.close();
    }
  });

  it('three backends fetching concurrently over 8 partitions lease every event exactly once and leave nothing behind', async () => {
    const schema = uniqueSchema();
    const clock = new ManualClock();
    const setup = createRheo({ backend: postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 1 } }, { schema, clock }), clock });
    const workers = Array.from({ length: 3 }, () =>
      postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 1 } }, { schema, clock }),
    );
    try {
      await setup.migrate();
      await setup.createStream('s', { partitions: 8 });
      await setup.createGroup('s', 'g');
      const total = 3000;
      await setup.appendBatch('s', Array.from({ length: total }, (_, i) => ({ partition: i % 8, payload: i })));
      const seen = new Set<string>();
      let duplicates = 0;
      await Promise.all(
        workers.map(async (w) => {
          // Stop only after two empty fetches in a row: an empty one may mean
          // the others held every partition that still had events.
          for (let empties = 0; empties < 2; ) {
            const batch = await w.fetch('s', 'g', { ...request(), limit: 40 });
            empties = batch.length === 0 ? empties + 1 : 0;
            for (const lease of batch) {
              if (seen.has(lease.receipt)) duplicates++;
              seen.add(lease.receipt);
            }
            const results = await w.settle(batch.map((l) => ({ kind: 'ack' as const, stream: 's', group: 'g', partition: l.event.partition, sequence: l.event.sequence, leaseId: l.leaseId })));
            expect(results.every((r) => r.ok)).toBe(true);
          }
        }),
      );
      expect(duplicates).toBe(0);
      // Whatever the interleaving, a final fetch finds nothing and the group is fully acknowledged.
      expect(await workers[0]!.fetch('s', 'g', request())).toEqual([]);
      expect((await setup.lag('s', 'g')).lag).toBe(0);
      expect(seen.size).toBe(total);
    } finally {
      await Promise.all(workers.map((w) => w.close()));
      await setup.close();
    }
  });
});
