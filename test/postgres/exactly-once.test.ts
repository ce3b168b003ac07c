import { describe, expect, it } from 'vitest';
import { runExactlyOnce } from '../chaos/exactly-once.js';
import { databaseUrl, pgbouncerUrl, uniqueSchema } from '../support/postgres.js';

// The short version; `npm run chaos` runs 20,000 events (scripts/chaos.ts).
const EVENTS = Number(process.env.RHEO_EXACTLY_ONCE_EVENTS ?? 1_000);

describe('exactly-once effects under faults (PostgreSQL)', () => {
  it('every event\'s effect commits exactly once while workers are SIGKILLed and their connections terminated', async () => {
    const result = await runExactlyOnce({
      url: databaseUrl(),
      schema: uniqueSchema('eo'),
      events: EVENTS,
      workers: 3,
      leaseMs: 3_000,
      seed: 13,
      faultEveryMs: Number(process.env.RHEO_EXACTLY_ONCE_FAULT_MS ?? 2_000),
      timeoutMs: 150_000,
    });
    process.stdout.write(`exactly-once: ${JSON.stringify(result)}\n`);
    expect(result.kills + result.terminations).toBeGreaterThan(0);
    expect(result).toMatchObject({ events: EVENTS, rows: EVENTS, distinct: EVENTS, duplicated: 0, missing: 0, lag: 0 });
  }, 200_000);

  it('partition ownership: every effect commits exactly once, with its offset, while members are SIGKILLed (their partitions move) and connections terminated', async () => {
    const result = await runExactlyOnce({
      url: databaseUrl(),
      schema: uniqueSchema('eop'),
      assignment: 'partitions',
      partitions: 8,
      events: EVENTS,
      workers: 3,
      leaseMs: 2_000,
      seed: 11,
      faultEveryMs: Number(process.env.RHEO_EXACTLY_ONCE_FAULT_MS ?? 2_000),
      timeoutMs: 150_000,
    });
    process.stdout.write(`exactly-once (partitions): ${JSON.stringify(result)}\n`);
    expect(result.kills + result.terminations).toBeGreaterThan(0);
    expect(result).toMatchObject({ events: EVENTS, rows: EVENTS, distinct: EVENTS, duplicated: 0, missing: 0, lag: 0 });
  }, 200_000);

  /** The proxy's rates: every COMMIT answer has a 1 in 12 chance of being lost after the server committed. */
  const PROXY = { commit: 1 / 12, answer: 1 / 400, reset: 1 / 1500 };

  it.each(['leases', 'partitions'] as const)(
    'through PgBouncer (transaction pooling) and a proxy that loses answers (COMMITs above all) and resets connections: every effect exactly once (%s)',
    async (assignment) => {
      const result = await runExactlyOnce({
        url: databaseUrl(),
        pgbouncerUrl: pgbouncerUrl() || undefined,
        schema: uniqueSchema('eox'),
        assignment,
        partitions: 4,
        events: Math.round(EVENTS * 0.3),
        workers: 2,
        leaseMs: 2_000,
        seed: assignment === 'leases' ? 17 : 19,
        faultEveryMs: 4_000,
        timeoutMs: 150_000,
        proxy: PROXY,
      });
      process.stdout.write(`exactly-once (${assignment}, proxy${pgbouncerUrl() ? ', pgbouncer' : ''}): ${JSON.stringify(result)}\n`);
      expect(result.droppedCommits).toBeGreaterThan(0);
      const events = Math.round(EVENTS * 0.3);
      expect(result).toMatchObject({ events, rows: events, distinct: events, duplicated: 0, missing: 0, lag: 0 });
    },
    200_000,
  );
});
