import { describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { createRheo } from '../../src/rheo.js';
import { databaseUrl, makeTestBackend } from '../support/postgres.js';

describe('postgres time authority', () => {
  it('by default the database clock decides expiry: a worker whose clock runs an hour ahead cannot steal a live lease', async () => {
    const honest = await makeTestBackend(); // no clock: database time
    const owner = createRheo({ backend: honest });
    await owner.createStream('s');
    await owner.createGroup('s', 'g');
    await owner.append('s', { payload: 1 });
    const [lease] = await owner.fetch('s', 'g', { leaseMs: 60_000 });
    expect(lease).toBeDefined();
    // The lease times come from the database, not from this process.
    expect(Math.abs(lease!.leasedAt.getTime() - Date.now())).toBeLessThan(60_000);

    const skewed = new ManualClock(Date.now() + 3600_000);
    const thief = createRheo({
      clock: skewed,
      backend: postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 1 } }, { schema: honest.schema }),
    });
    try {
      expect(await thief.fetch('s', 'g')).toEqual([]);
      // The thief's own events carry its (skewed) facade clock, but leases do not.
      await thief.append('s', { payload: 2 });
      const [next] = await thief.fetch('s', 'g', { leaseMs: 1000 });
      expect(next?.event.sequence).toBe(2);
      expect(next!.expiresAt.getTime() - Date.now()).toBeLessThan(60_000);
      await owner.ack(lease!);
    } finally {
      await thief.close();
    }
  });

  it('with an injected clock, expiry follows that clock only', async () => {
    const clock = new ManualClock();
    const rheo = createRheo({ backend: await makeTestBackend(clock), clock });
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    await rheo.append('s', { payload: 1 });
    const [lease] = await rheo.fetch('s', 'g', { leaseMs: 1000 });
    expect(lease!.expiresAt.getTime()).toBe(clock.now() + 1000);
    clock.advance(999);
    expect(await rheo.fetch('s', 'g')).toEqual([]);
    clock.advance(1);
    const [again] = await rheo.fetch('s', 'g');
    expect(again?.attempt).toBe(2);
  });
});
