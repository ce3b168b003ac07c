import { describe, expect, it } from 'vitest';
import { runExactlyOnce } from '../chaos/exactly-once.js';
import { databaseUrl, uniqueSchema } from '../support/postgres.js';

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
});
