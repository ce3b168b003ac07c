import { RheoError, isRheoError } from '../core/errors.js';
import type { Lease } from '../core/types.js';
import { RenewingMap } from '../runtime/renewing-map.js';
import type { ScheduledTimer, Timers } from '../runtime/timers.js';

/** One renewal answer per lease, in order (the shape of `Rheo.renewMany`). */
export type RenewManyFn<T> = (
  leases: Lease<T>[],
) => Promise<Array<{ ok: true; lease: Lease<T> } | { ok: false; error: RheoError }>>;

export interface InflightTrackerOptions<T> {
  leaseMs: number;
  timers: Timers;
  renewMany: RenewManyFn<T>;
  random?: () => number;
  /** A renewal came back `stale_lease`: the lease is already gone from the tracker. */
  onLost(lease: Lease<T>, error: RheoError): void;
  /** A renewal failed for another reason; the leases are kept and retried sooner. */
  onRenewError(error: RheoError, leases: Lease<T>[]): void;
  onRenewed(summary: RenewSummary): void;
}

export interface RenewSummary {
  renewed: number;
  lost: number;
  failed: number;
}

interface Entry<T> {
  lease: Lease<T>;
  /** Emitted downstream (`'data'`); unhanded entries are still in the readable buffer. */
  handed: boolean;
  /** A settle is on its way: renewing now would race it, so renewal skips it. */
  settling: boolean;
}

/**
 * Every lease a producer holds (buffered or handed downstream and not yet
 * confirmed), renewed on one jittered timer at about half the lease, the way
 * nodejs-pubsub's lease manager does it: one set, one timer, never one timer
 * per lease. The renewal timer is housekeeping, so it is `unref`'d. It is
 * left to run out when the last lease goes: a lease added before it fires
 * rides on it (renewed a little early at worst), and a round that finds
 * nothing held renews nothing and sets no next timer. So a consumer that
 * holds one lease at a time, an idle one woken by each append, sets one
 * timer per half lease instead of one per lease, and none between the claim
 * and the handler's start (a timer set after 10 ms of idleness took 11 µs).
 */
export class InflightTracker<T> {
  readonly #entries = new RenewingMap<string, Entry<T>>();
  readonly #options: InflightTrackerOptions<T>;
  readonly #random: () => number;
  #timer: ScheduledTimer | null = null;
  #renewing: Promise<void> | null = null;
  #stopped = false;

  constructor(options: InflightTrackerOptions<T>) {
    this.#options = options;
    this.#random = options.random ?? Math.random;
  }

  get size(): number {
    return this.#entries.size;
  }

  has(leaseId: string): boolean {
    return this.#entries.has(leaseId);
  }

  /** The held lease as last renewed (its `expiresAt` is current), if held. */
  get(leaseId: string): Lease<T> | undefined {
    return this.#entries.get(leaseId)?.lease;
  }

  add(lease: Lease<T>): void {
    this.#entries.set(lease.leaseId, { lease, handed: false, settling: false });
    if (this.#timer === null) this.#schedule(this.#intervalMs());
  }

  markHanded(leaseId: string): void {
    const entry = this.#entries.get(leaseId);
    if (entry) entry.handed = true;
  }

  markSettling(leaseId: string): void {
    const entry = this.#entries.get(leaseId);
    if (entry) entry.settling = true;
  }

  /** Forgets a lease; `true` when it was held. */
  delete(leaseId: string): boolean {
    return this.#entries.delete(leaseId);
  }

  /** Removes and returns the leases never handed downstream (and not settling). */
  takeUnhanded(): Lease<T>[] {
    const taken: Lease<T>[] = [];
    for (const entry of this.#entries.values()) {
      if (!entry.handed && !entry.settling) {
        taken.push(entry.lease);
        this.#entries.delete(entry.lease.leaseId);
      }
    }
    return taken;
  }

  /** Stops renewing for good; waits for a renewal already on its way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#cancel();
    await this.#renewing;
  }

  /** Runs one renewal round now (also what the timer does). */
  renewNow(): Promise<void> {
    this.#cancel();
    this.#renewing ??= this.#renew();
    return this.#renewing;
  }

  #intervalMs(): number {
    // Between 40% and 50% of the lease: about half, jittered so that many
    // producers started together do not renew in lockstep.
    return Math.max(1, Math.floor(this.#options.leaseMs * (0.5 - 0.1 * this.#random())));
  }

  #schedule(ms: number): void {
    if (this.#stopped || this.#timer || this.#renewing || this.#entries.size === 0) return;
    this.#timer = this.#options.timers.schedule(ms, () => {
      this.#timer = null;
      void this.renewNow();
    }, { keepAlive: false });
  }

  #cancel(): void {
    this.#timer?.cancel();
    this.#timer = null;
  }

  async #renew(): Promise<void> {
    const batch = this.#entries.values().filter((e) => !e.settling);
    let nextMs = this.#intervalMs();
    const summary: RenewSummary = { renewed: 0, lost: 0, failed: 0 };
    const lost: Array<[Lease<T>, RheoError]> = [];
    let renewError: [RheoError, Lease<T>[]] | null = null;
    try {
      if (batch.length === 0) return;
      try {
        const results = await this.#options.renewMany(batch.map((e) => e.lease));
        const failures: Lease<T>[] = [];
        let firstError: RheoError | null = null;
        batch.forEach((entry, i) => {
          const result = results[i];
          const current = this.#entries.get(entry.lease.leaseId);
          if (!current || current.settling) return; // confirmed or settling meanwhile: its answer is moot
          if (result?.ok) {
            current.lease = result.lease;
            summary.renewed++;
          } else if (result && isRheoError(result.error, 'stale_lease')) {
            this.delete(entry.lease.leaseId);
            lost.push([entry.lease, result.error]);
          } else {
            summary.failed++;
            failures.push(entry.lease);
            firstError ??= result?.error ?? new RheoError('internal', 'renewMany returned too few results');
          }
        });
        if (firstError) renewError = [firstError, failures];
      } catch (error) {
        summary.failed = batch.length;
        const failure = isRheoError(error)
          ? error
          : new RheoError('internal', `renew failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
        renewError = [failure, batch.map((e) => e.lease)];
      }
      // A failed round retries at a quarter of the interval: waiting a whole
      // interval again could let the leases expire.
      if (summary.failed > 0) nextMs = Math.max(1, Math.floor(nextMs / 4));
    } finally {
      this.#renewing = null;
      this.#schedule(nextMs);
    }
    // Callbacks run last so that a throwing listener cannot break the round.
    summary.lost = lost.length;
    for (const [lease, error] of lost) this.#options.onLost(lease, error);
    if (renewError) this.#options.onRenewError(renewError[0], renewError[1]);
    if (batch.length > 0) this.#options.onRenewed(summary);
  }
}
