import type { ChaosRecord } from './records.js';

/** What was stored in one partition of the log, in sequence order. */
export interface StoredPartition {
  partition: number;
  events: Array<{ id: string; sequence: number }>;
}

export interface CheckInput {
  /** Records of every appender. */
  appended: ChaosRecord[];
  /** Records of every worker. */
  workers: ChaosRecord[];
  log: StoredPartition[];
  deadLetterIds: string[];
}

export interface CheckResult {
  /** Distinct event ids whose append was acknowledged. */
  events: number;
  /** Acknowledged, yet neither handled nor dead-lettered once the group was drained. */
  lost: number;
  /** Finished handler runs beyond the first, per event. */
  duplicates: number;
  /** Settles answered ok for a lease the group had already handed out again (see `staleSettles`). */
  staleAccepted: number;
  /** Settles answered `stale_lease`: the fence at work. */
  staleRefused: number;
  /** Per partition, sequences missing from 1..max plus sequences stored twice. */
  gaps: number;
  /** Ids stored more than once, or stored elsewhere than their append was told. */
  logErrors: number;
  /** Distinct events handled at least once. */
  handled: number;
  deadLettered: number;
  /** Claims with attempt > 1: how often the fault made the group take a lease back. */
  reclaims: number;
  /** Up to a few examples of each failure, for the report. */
  examples: string[];
}

/** Compares what the children were told with each other and with the log. */
export function check(input: CheckInput): CheckResult {
  const examples: string[] = [];
  const example = (text: string): void => {
    if (examples.length < 8) examples.push(text);
  };

  const stored = new Map<string, { partition: number; sequence: number }>();
  let gaps = 0;
  let logErrors = 0;
  for (const { partition, events } of input.log) {
    let expected = 1;
    for (const { id, sequence } of events) {
      if (sequence !== expected) {
        gaps += Math.abs(sequence - expected);
        example(`partition ${partition}: sequence ${sequence} where ${expected} was due`);
      }
      expected = sequence + 1;
      if (stored.has(id)) {
        logErrors++;
        example(`event ${id} is stored twice`);
      } else stored.set(id, { partition, sequence });
    }
  }

  const acknowledged = new Set<string>();
  for (const r of input.appended) {
    if (r.k !== 'appended') continue;
    acknowledged.add(r.id);
    const at = stored.get(r.id);
    if (at && (at.partition !== r.p || at.sequence !== r.s)) {
      logErrors++;
      example(`event ${r.id} was acknowledged at ${r.p}:${r.s} but is stored at ${at.partition}:${at.sequence}`);
    }
  }

  const runs = new Map<string, number>();
  let handledRuns = 0;
  for (const r of input.workers) {
    if (r.k !== 'handled') continue;
    handledRuns++;
    runs.set(r.id, (runs.get(r.id) ?? 0) + 1);
  }
  const dead = new Set(input.deadLetterIds);
  let lost = 0;
  for (const id of acknowledged) {
    if (runs.has(id) || dead.has(id)) continue;
    lost++;
    example(`event ${id} was acknowledged but never handled${stored.has(id) ? '' : ' and is not in the log'}`);
  }

  const { accepted, refused } = staleSettles(input.workers, example);
  const reclaims = input.workers.filter((r) => r.k === 'claim' && r.attempt > 1).length;
  return {
    events: acknowledged.size,
    lost,
    duplicates: handledRuns - runs.size,
    staleAccepted: accepted,
    staleRefused: refused,
    gaps,
    logErrors,
    handled: runs.size,
    deadLettered: dead.size,
    reclaims,
    examples,
  };
}

interface Claim {
  lease: string;
  attempt: number;
  leasedAt: number;
}

/**
 * Counts settles that were answered ok although the lease had been taken
 * back. Claims of one event are ordered by attempt, then by the database
 * clock at the claim (a release gives its attempt back, so the claim after a
 * release has the same attempt). A settle of lease L answered ok is stale:
 * - for `ack` and `reject`, when any claim newer than L exists: an accepted
 *   ack or reject ends the delivery, so only the newest claim may do it;
 * - for `nack` and `release`, which reopen the delivery, when a newer claim
 *   was made (database clock) before the settle was sent (same machine
 *   clock): the delivery was no longer L's to give back.
 * Claims a SIGKILLed worker received in its last instant may be missing
 * from the records; they could only hide a violation, never invent one.
 */
function staleSettles(records: ChaosRecord[], example: (text: string) => void): { accepted: number; refused: number } {
  const claims = new Map<string, Claim[]>();
  const claimOf = new Map<string, Claim>();
  for (const r of records) {
    if (r.k !== 'claim') continue;
    const claim = { lease: r.lease, attempt: r.attempt, leasedAt: r.t };
    claimOf.set(r.lease, claim);
    const list = claims.get(r.id);
    if (list) list.push(claim);
    else claims.set(r.id, [claim]);
  }
  const newer = (a: Claim, b: Claim): boolean => a.attempt > b.attempt || (a.attempt === b.attempt && a.leasedAt > b.leasedAt);
  let accepted = 0;
  let refused = 0;
  for (const r of records) {
    if (r.k !== 'settle') continue;
    if (!r.ok) {
      if (r.code === 'stale_lease') refused++;
      continue;
    }
    const own = claimOf.get(r.lease);
    if (!own) continue;
    const later = (claims.get(r.id) ?? []).filter((c) => c.lease !== r.lease && newer(c, own));
    const ends = r.op === 'ack' || r.op === 'reject';
    const stale = ends ? later.length > 0 : later.some((c) => c.leasedAt < r.t);
    if (stale) {
      accepted++;
      example(`${r.op} of ${r.id} attempt ${own.attempt} was accepted although attempt ${later.map((c) => c.attempt).join(',')} was claimed`);
    }
  }
  return { accepted, refused };
}
