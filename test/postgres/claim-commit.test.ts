import { describe, expect, it } from 'vitest';
import { claimRoutine } from '../../src/backends/postgres/routines.js';
import { nowParam } from '../../src/backends/postgres/rows.js';
import { ManualClock } from '../../src/core/clock.js';
import { createRheo } from '../../src/rheo.js';
import { makeTestBackend, sharedPool } from '../support/postgres.js';

/**
 * A claim commits without waiting for its WAL flush (routines.ts), and only
 * the claim: the setting is local to its transaction, so the settles and
 * every other statement on the same pooled connection still commit durably.
 */
describe('postgres claim commit', () => {
  it('turns synchronous_commit off for the claim transaction only', async () => {
    const clock = new ManualClock();
    const backend = await makeTestBackend(clock);
    const rheo = createRheo({ backend, clock });
    const schema = `"${backend.schema}"`;
    const client = await sharedPool().connect();
    try {
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await rheo.append('s', { payload: 1 });
      const setting = async () => (await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit;
      const before = await setting();
      expect(before).not.toBe('off');
      await client.query('BEGIN');
      // group 1, stream 1, partition 0, limit 1, database clock, 30 s, consumer, 1 MiB, 5 attempts, lock up to 1 partition.
      const { rows } = await client.query<{ leases: unknown[] }>(`SELECT leases FROM (${claimRoutine.call(schema)}) c`, [1, 1, [0], 1, null, 30_000, 'c', 1 << 20, 5, 1]);
      expect(rows[0]!.leases).toHaveLength(1);
      expect(await setting()).toBe('off');
      await client.query('COMMIT');
      expect(await setting()).toBe(before);
      // The claim itself is still a claim: the delivery is leased, nothing else is claimable.
      expect(await rheo.fetch('s', 'g')).toEqual([]);
    } finally {
      client.release();
      await rheo.close();
    }
  });

  it('locks only the cursors of partitions with something claimable, and none when nothing is: an idle poll takes no transaction id', async () => {
    const clock = new ManualClock();
    const backend = await makeTestBackend(clock);
    const rheo = createRheo({ backend, clock });
    const schema = `"${backend.schema}"`;
    const client = await sharedPool().connect();
    const other = await sharedPool().connect();
    try {
      await rheo.createStream('s', { partitions: 3 });
      await rheo.createGroup('s', 'g');
      await rheo.append('s', { payload: 1, partition: 1 });
      /**
       * One claim of every partition in its own transaction, as a poll sends
       * it: the leases, whether it took a transaction id, and which cursors
       * another connection finds locked while it is open.
       */
      const claim = async (): Promise<{ leases: number; xid: boolean; locked: number[] }> => {
        await client.query('BEGIN');
        try {
          const { rows } = await client.query<{ leases: unknown[] }>(`SELECT leases FROM (${claimRoutine.call(schema)}) c`, [
            1, 1, [0, 1, 2], 10, nowParam(clock.now()), 30_000, 'c', 1 << 20, 5, 3,
          ]);
          const xid = (await client.query<{ x: string | null }>('SELECT txid_current_if_assigned()::text AS x')).rows[0]!.x;
          const free = await other.query<{ partition: number }>(
            `SELECT partition FROM ${schema}.group_cursors WHERE group_id = 1 ORDER BY partition FOR UPDATE SKIP LOCKED`,
          );
          const unlocked = new Set(free.rows.map((r) => r.partition));
          return { leases: rows[0]!.leases.length, xid: xid !== null, locked: [0, 1, 2].filter((p) => !unlocked.has(p)) };
        } finally {
          await client.query('COMMIT');
        }
      };
      // A new event in partition 1: only that cursor is locked.
      expect(await claim()).toEqual({ leases: 1, xid: true, locked: [1] });
      // Leased and not expired: nothing is claimable, nothing is locked or written.
      expect(await claim()).toEqual({ leases: 0, xid: false, locked: [] });
      // An expired lease range is claimable again.
      clock.advance(30_001);
      expect(await claim()).toEqual({ leases: 1, xid: true, locked: [1] });
      // A delivery nacked with a delay: idle until the delay has passed, then claimable.
      const [lease] = await rheo.fetch('s', 'g', { partitions: [1] });
      expect(lease).toBeUndefined();
      clock.advance(30_001);
      const [again] = await rheo.fetch('s', 'g');
      expect(again?.attempt).toBe(3);
      await rheo.nack(again!, 'later', { delayMs: 5_000 });
      expect(await claim()).toEqual({ leases: 0, xid: false, locked: [] });
      clock.advance(5_000);
      expect(await claim()).toEqual({ leases: 1, xid: true, locked: [1] });
    } finally {
      client.release();
      other.release();
      await rheo.close();
    }
  });
});
