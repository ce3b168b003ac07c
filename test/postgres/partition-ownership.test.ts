import { describe, expect, it } from 'vitest';
import { formatPartitionFailures, runPartitionScenario, type PartitionScenarioResult } from '../chaos/partition-ownership.js';
import { databaseUrl, uniqueSchema } from '../support/postgres.js';

/** Nothing lost, duplicated beyond crash redeliveries, out of order, overlapping or committed stale; no dead letter. */
function expectClean(result: PartitionScenarioResult): void {
  const failures = formatPartitionFailures([result]);
  expect(
    {
      lost: result.lost,
      duplicates: result.duplicates,
      orderViolations: result.orderViolations,
      overlaps: result.overlaps,
      staleAccepted: result.staleAccepted,
      deadLetters: result.deadLetters,
    },
    failures,
  ).toEqual({ lost: [], duplicates: [], orderViolations: [], overlaps: [], staleAccepted: [], deadLetters: 0 });
  expect(result.passed).toBe(true);
}

// Real processes on a real PostgreSQL, with the database clock as the time
// authority for sessions; waits are on conditions, bounded only to fail.
// The scenarios live in test/chaos/partition-ownership.ts, which `npm run
// chaos` runs too.
describe('partition ownership across processes (postgres)', () => {
  it('SIGKILL of one of three members: its partitions move once its session ends, come back on restart, nothing is lost', async () => {
    const result = await runPartitionScenario('member SIGKILL and restart', { url: databaseUrl(), schema: uniqueSchema('po') });
    expectClean(result);
    // The partitions moved because the store ended m2's session, not because
    // someone released them: m2 is no longer a member, the survivors own
    // everything, and the group was rebalanced (a later group generation).
    expect(result.facts.membersAfterKill).toEqual(['m1', 'm3']);
    expect(result.facts.generationAfterKill as number).toBeGreaterThan(result.facts.generationBeforeKill as number);
    expect((result.facts.m2Owned as number[]).length).toBeGreaterThanOrEqual(2);
  }, 180_000);

  it('a SIGSTOPped owner past its session cannot commit after the rebalance; its work is redone', async () => {
    const result = await runPartitionScenario('owner SIGSTOP past session', { url: databaseUrl(), schema: uniqueSchema('po') });
    // m1 may finish the handler it was running when it resumes (a replaced
    // owner's handling, counted apart); nothing else is handled twice after a commit.
    expectClean(result);
    // Everything m1 sent under a lost generation after it resumed was refused.
    const late = result.facts.late as Array<{ status: string; sentAt: number }>;
    expect(late.every((c) => c.status === 'stale_generation' && c.sentAt > (result.facts.resumedAt as number))).toBe(true);
    expect(result.facts.generationsInOrder).toBe(true);
  }, 180_000);

  it('a rolling restart of every member loses nothing, and no two members ever handle one partition at once', async () => {
    const result = await runPartitionScenario('rolling restart', { url: databaseUrl(), schema: uniqueSchema('po') });
    expectClean(result);
    // Every handover was graceful (finish, commit, release): nothing twice.
    expect(result.redeliveries).toBe(0);
  }, 240_000);
});
