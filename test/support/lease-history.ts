import type { Lease } from '../../src/core/types.js';

export type SettleKind = 'ack' | 'nack' | 'reject' | 'release' | 'renew';

interface Claim {
  lease: Lease;
  /** Expiries set by renewals that succeeded (a renewal sets now + leaseMs, which may also shorten the lease). */
  renewedTo: number[];
  /** Kind of the settle that succeeded on this lease, if any. */
  settled: Exclude<SettleKind, 'renew'> | null;
}

interface FrontierSample {
  partition: number;
  frontier: number;
  /** Operation counter when the sample's answer arrived. */
  seenAtOp: number;
}

/**
 * The record of one concurrent run against one group, checked against the
 * design's invariants afterwards. Only facts the backend stated are used:
 * `leasedAt` is the time authority's "now" at the claim, so the checks need no
 * guess about how the clients' calls interleaved.
 *
 * A replay starts a new epoch: deliveries reopen and attempts start over,
 * so claims are compared only within an epoch.
 */
export class LeaseHistory {
  readonly violations: string[] = [];
  #epoch = 0;
  #op = 0;
  /** Per epoch: receipt → claims in the order they were returned. */
  #claims: Array<Map<string, Claim[]>> = [new Map()];
  /** Latest claim returned per receipt (any epoch): a settle issued on an older one must be fenced. */
  /**
   * Per receipt, the newest claim returned so far by the time authority's
   * `leasedAt`, not by arrival: answers on different connections can arrive
   * out of commit order, so an older claim's answer may land after a newer one.
   */
  readonly #latest = new Map<string, { leaseId: string; leasedAtMs: number }>();
  /** Per epoch: `partition:sequence` → operation counter at which its first terminal settle was issued. */
  #terminalIssued: Array<Map<string, number>> = [new Map()];
  #frontiers: FrontierSample[][] = [[]];
  #settles = 0;
  #staleRejected = 0;

  get epoch(): number {
    return this.#epoch;
  }

  /** Successful settles and renewals, and stale ones correctly refused: a run that did nothing proves nothing. */
  get counts(): { claims: number; settles: number; staleRefused: number } {
    let claims = 0;
    for (const epoch of this.#claims) for (const list of epoch.values()) claims += list.length;
    return { claims, settles: this.#settles, staleRefused: this.#staleRejected };
  }

  /** Call when a fetch returns. */
  claimed(leases: Lease[]): void {
    const epoch = this.#claims[this.#epoch]!;
    for (const lease of leases) {
      const list = epoch.get(lease.receipt) ?? [];
      list.push({ lease, renewedTo: [], settled: null });
      epoch.set(lease.receipt, list);
      const latest = this.#latest.get(lease.receipt);
      const leasedAtMs = lease.leasedAt.getTime();
      if (latest === undefined || leasedAtMs >= latest.leasedAtMs) this.#latest.set(lease.receipt, { leaseId: lease.leaseId, leasedAtMs });
    }
  }

  /**
   * Call just before issuing a settle or renew; returns a function to call
   * with its outcome (`null` for success, else the error code).
   */
  issue(kind: SettleKind, lease: Lease): (outcome: { ok: true; expiresAt?: Date } | { ok: false; code: string }) => void {
    const op = ++this.#op;
    const epoch = this.#epoch;
    const staleAtIssue = this.#latest.get(lease.receipt)?.leaseId !== lease.leaseId;
    const name = `${kind} of ${lease.receipt} attempt ${lease.attempt}`;
    return (outcome) => {
      if (!outcome.ok) {
        if (outcome.code !== 'stale_lease') this.violations.push(`${name} failed with ${outcome.code}`);
        else if (staleAtIssue) this.#staleRejected++;
        return;
      }
      this.#settles++;
      if (kind === 'ack' || kind === 'reject') {
        // Keyed by when it was issued: it took effect somewhere between issue and answer.
        const terminal = this.#terminalIssued[epoch]!;
        const key = positionOf(lease);
        terminal.set(key, Math.min(terminal.get(key) ?? op, op));
      }
      if (staleAtIssue) this.violations.push(`${name} succeeded although a newer claim had been returned before it was issued`);
      const claim = this.#claims[epoch]!.get(lease.receipt)?.find((c) => c.lease.leaseId === lease.leaseId);
      if (!claim) return;
      if (kind === 'renew') claim.renewedTo.push(outcome.expiresAt!.getTime());
      else if (claim.settled) this.violations.push(`${name} succeeded after ${claim.settled} had already settled it`);
      else claim.settled = kind;
    };
  }

  /** Call with each partition's frontier as soon as `lag` answers. */
  frontier(partition: number, frontier: number): void {
    this.#frontiers[this.#epoch]!.push({ partition, frontier, seenAtOp: this.#op });
  }

  /** Call after a replay, when no call of the previous epoch is still running. */
  replayed(): void {
    this.#epoch++;
    this.#claims.push(new Map());
    this.#terminalIssued.push(new Map());
    this.#frontiers.push([]);
  }

  /** Runs every check; returns the violations found (empty when the run kept the invariants). */
  check(): string[] {
    for (let e = 0; e <= this.#epoch; e++) {
      for (const [receipt, claims] of this.#claims[e]!) this.#checkClaims(e, receipt, claims);
      this.#checkFrontiers(e);
    }
    return this.violations;
  }

  #checkClaims(epoch: number, receipt: string, claims: Claim[]): void {
    const ordered = [...claims].sort(
      (a, b) => a.lease.leasedAt.getTime() - b.lease.leasedAt.getTime() || a.lease.attempt - b.lease.attempt,
    );
    for (let i = 1; i < ordered.length; i++) {
      const before = ordered[i - 1]!;
      const after = ordered[i]!;
      const at = after.lease.leasedAt.getTime();
      // Invariant 1: the earlier holder gave it back, or its lease had expired.
      // A renewal that succeeded ran before the reclaim (after it, the token
      // is fenced), so the expiry in force was one of theirs; which one ran
      // last is unknown, so only the earliest of them is certain.
      const expiry = before.renewedTo.length > 0 ? Math.min(...before.renewedTo) : before.lease.expiresAt.getTime();
      if (before.settled === null && expiry > at) {
        this.violations.push(
          `epoch ${epoch}: ${receipt} claimed at ${at} (attempt ${after.lease.attempt}) while attempt ${before.lease.attempt} ` +
            `(claimed at ${before.lease.leasedAt.getTime()}) held it until ${expiry}` +
            (before.renewedTo.length > 0 ? ' by a renewal' : ''),
        );
      }
      if (before.settled === 'ack' || before.settled === 'reject') {
        this.violations.push(`epoch ${epoch}: ${receipt} claimed again (attempt ${after.lease.attempt}) after ${before.settled}`);
      }
      if (before.settled !== 'release' && after.lease.attempt <= before.lease.attempt) {
        this.violations.push(`epoch ${epoch}: ${receipt} attempt did not grow (${before.lease.attempt} → ${after.lease.attempt})`);
      }
    }
  }

  #checkFrontiers(epoch: number): void {
    const last = new Map<number, number>();
    const terminal = this.#terminalIssued[epoch]!;
    for (const sample of this.#frontiers[epoch]!) {
      const previous = last.get(sample.partition) ?? 0;
      // Invariant 6: no step back within an epoch.
      if (sample.frontier < previous) {
        this.violations.push(`epoch ${epoch}: frontier of partition ${sample.partition} went back from ${previous} to ${sample.frontier}`);
      }
      last.set(sample.partition, Math.max(previous, sample.frontier));
      // Never past an unsettled sequence: each one at or below it had a terminal settle issued before the answer.
      for (let seq = previous + 1; seq <= sample.frontier; seq++) {
        const issued = terminal.get(`${sample.partition}:${seq}`);
        if (issued === undefined || issued > sample.seenAtOp) {
          this.violations.push(`epoch ${epoch}: frontier of partition ${sample.partition} reached ${sample.frontier} before ${seq} was settled`);
          break;
        }
      }
    }
  }
}

function positionOf(lease: Lease): string {
  return `${lease.event.partition}:${lease.event.sequence}`;
}
