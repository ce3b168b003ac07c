import { describe, expect, it } from 'vitest';
import { claimRoutine } from '../../src/backends/postgres/routines.js';
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
});
