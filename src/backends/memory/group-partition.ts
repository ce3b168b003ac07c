import { MinHeap } from './min-heap.js';

export type DeliveryState = 'leased' | 'pending';

/** Per-delivery state, kept only while the delivery is open (leased or pending). */
export interface OpenDelivery {
  readonly sequence: number;
  state: DeliveryState;
  attempt: number;
  leaseId: string | null;
  consumerId: string | null;
  leasedAt: number;
  /** Lease expiry when leased; end of the nack delay when pending. */
  visibleAt: number;
  /**
   * Changes on every change, so heap entries that describe an older state are
   * skipped. Drawn from one counter per partition, never restarted for a
   * reopened sequence: a timer left by an earlier incarnation of the same
   * sequence once matched the new one and expired its live lease early.
   */
  version: number;
}

interface TimerEntry {
  visibleAt: number;
  sequence: number;
  version: number;
}

interface ReadyEntry {
  sequence: number;
  version: number;
}

/**
 * One group's progress over one partition: a cursor over the log plus the open
 * deliveries. Acked deliveries are simply deleted, so memory is bounded by the
 * unsettled window; the frontier is `min(open) - 1`, or the cursor when nothing
 * is open. Every operation is O(log open) and independent of the log length.
 */
export class GroupPartition {
  cursor: number;
  leasedCount = 0;
  #versions = 0;
  readonly open = new Map<number, OpenDelivery>();
  /**
   * Sequences above the cursor that are not new: those open when a replay
   * moved the cursor back below them. Without this, one acked or
   * dead-lettered before the cursor came back up looked never offered and
   * was delivered again (and a dead one was leased while still listed dead).
   * Bounded by the deliveries open at replays; dropped as the cursor passes.
   */
  readonly #held = new Set<number>();
  /** Open sequences (possibly stale) for the frontier's minimum. */
  readonly #openSeqs = new MinHeap<number>((a, b) => a < b);
  /** Open deliveries by the time they become claimable. */
  readonly #timers = new MinHeap<TimerEntry>(
    (a, b) => a.visibleAt < b.visibleAt || (a.visibleAt === b.visibleAt && a.sequence < b.sequence),
  );
  /** Claimable open deliveries by sequence. */
  readonly #ready = new MinHeap<ReadyEntry>((a, b) => a.sequence < b.sequence);

  constructor(cursor: number) {
    this.cursor = cursor;
  }

  frontier(): number {
    for (;;) {
      const top = this.#openSeqs.peek();
      if (top === undefined) return this.cursor;
      if (this.open.has(top)) return Math.min(top - 1, this.cursor);
      this.#openSeqs.pop();
    }
  }

  /**
   * The lowest claimable sequence: an open delivery whose `visibleAt <= now`,
   * or the next sequence the cursor has not reached. `null` when none.
   */
  nextClaimable(now: number, highWatermark: number): { sequence: number; delivery: OpenDelivery | null } | null {
    for (;;) {
      const t = this.#timers.peek();
      if (t === undefined || t.visibleAt > now) break;
      this.#timers.pop();
      if (this.#isCurrent(t.sequence, t.version)) this.#ready.push({ sequence: t.sequence, version: t.version });
    }
    let ready: ReadyEntry | undefined;
    for (;;) {
      ready = this.#ready.peek();
      if (ready === undefined || this.#isCurrent(ready.sequence, ready.version)) break;
      this.#ready.pop();
    }
    this.#advance();
    const next = this.cursor + 1 <= highWatermark ? this.cursor + 1 : null;
    if (ready !== undefined && (next === null || ready.sequence < next)) {
      return { sequence: ready.sequence, delivery: this.open.get(ready.sequence)! };
    }
    return next === null ? null : { sequence: next, delivery: null };
  }

  /** Opens a never-offered sequence (advancing the cursor) or returns the existing open entry. */
  take(sequence: number, existing: OpenDelivery | null): OpenDelivery {
    if (existing) {
      this.#ready.pop();
      return existing;
    }
    this.cursor = sequence;
    const d = this.#openEntry(sequence, 0);
    this.#advance();
    return d;
  }

  /**
   * Replay from `from`: settled sequences at or above it become new again by
   * moving the cursor back; the open ones are held so that they are not
   * offered again once settled.
   */
  rewind(from: number): void {
    this.cursor = Math.min(this.cursor, from - 1);
    for (const s of this.#held) if (s >= from) this.#held.delete(s);
    for (const s of this.open.keys()) if (s >= from) this.#held.add(s);
    this.#advance();
  }

  /** Acked or dead-lettered: at or below the cursor, or held above it, and not open. */
  isSettled(sequence: number): boolean {
    return !this.open.has(sequence) && (sequence <= this.cursor || this.#held.has(sequence));
  }

  lease(d: OpenDelivery, leaseId: string, consumerId: string, now: number, expiresAt: number): void {
    if (d.state !== 'leased') this.leasedCount++;
    d.state = 'leased';
    d.attempt++;
    d.leaseId = leaseId;
    d.consumerId = consumerId;
    d.leasedAt = now;
    this.#schedule(d, expiresAt);
  }

  renew(d: OpenDelivery, expiresAt: number): void {
    this.#schedule(d, expiresAt);
  }

  /** Makes an open delivery pending (claimable at `visibleAt`). */
  makePending(d: OpenDelivery, visibleAt: number): void {
    if (d.state === 'leased') this.leasedCount--;
    d.state = 'pending';
    d.leaseId = null;
    d.consumerId = null;
    this.#schedule(d, visibleAt);
  }

  /** Removes an open delivery (acked or dead-lettered). */
  close(d: OpenDelivery): void {
    if (d.state === 'leased') this.leasedCount--;
    d.version = ++this.#versions;
    this.open.delete(d.sequence);
  }

  /** Reopens a settled sequence as pending with a fresh attempt count. No-op when already open. */
  reopen(sequence: number, now: number): void {
    if (this.open.has(sequence)) return;
    const d = this.#openEntry(sequence, 0);
    this.makePending(d, now);
  }

  /**
   * A trim deleted every sequence up to `upTo`: those the group had not
   * settled (open, or never offered and not held) count as dead-lettered and
   * gone; the cursor moves to at least `upTo` so the frontier never sits
   * below a deleted sequence. Returns how many were unsettled. Costs
   * O(open + held) and runs only on trims that pass the frontier.
   */
  trimTo(upTo: number): number {
    let unsettled = 0;
    for (const d of [...this.open.values()]) {
      if (d.sequence > upTo) continue;
      this.close(d);
      unsettled++;
    }
    let heldBelow = 0;
    for (const s of this.#held) {
      if (s > upTo) continue;
      this.#held.delete(s);
      if (s > this.cursor) heldBelow++;
    }
    if (upTo > this.cursor) {
      unsettled += upTo - this.cursor - heldBelow;
      this.cursor = upTo;
    }
    this.#advance();
    return unsettled;
  }

  /**
   * Offset commit (partition ownership): everything up to `upTo` is settled.
   * Open deliveries at or below it (reopened by a replay or redrive that the
   * owner has since handled again) close; the cursor moves up to it. Costs
   * O(open), which is zero in a group consumed by ownership.
   */
  commitTo(upTo: number): void {
    for (const d of [...this.open.values()]) if (d.sequence <= upTo) this.close(d);
    if (upTo > this.cursor) this.cursor = upTo;
    for (const s of this.#held) if (s <= this.cursor) this.#held.delete(s);
    this.#advance();
  }

  /** Whether a lease is live at `now` (ownership refuses to start beside competing consumers). */
  hasLiveLease(now: number): boolean {
    if (this.leasedCount === 0) return false;
    for (const d of this.open.values()) if (d.state === 'leased' && d.visibleAt > now) return true;
    return false;
  }

  /** Heap entries held for this partition (stale ones included): bounded by a multiple of the open deliveries. */
  get heapEntries(): number {
    return this.#openSeqs.size + this.#timers.size + this.#ready.size;
  }

  /**
   * Keeps `cursor + 1` neither open nor held, so the frontier
   * (`min(open) - 1` capped by the cursor) never stops below a settled one.
   */
  #advance(): void {
    while (this.open.has(this.cursor + 1) || this.#held.delete(this.cursor + 1)) this.cursor++;
  }

  #openEntry(sequence: number, attempt: number): OpenDelivery {
    const d: OpenDelivery = {
      sequence,
      state: 'pending',
      attempt,
      leaseId: null,
      consumerId: null,
      leasedAt: 0,
      visibleAt: 0,
      version: ++this.#versions,
    };
    this.open.set(sequence, d);
    this.#openSeqs.push(sequence);
    if (this.#tooStale(this.#openSeqs)) this.#openSeqs.retain((s) => this.open.has(s));
    return d;
  }

  #schedule(d: OpenDelivery, visibleAt: number): void {
    d.version = ++this.#versions;
    d.visibleAt = visibleAt;
    this.#timers.push({ visibleAt, sequence: d.sequence, version: d.version });
    if (this.#tooStale(this.#timers)) this.#timers.retain((t) => this.#isCurrent(t.sequence, t.version));
  }

  /**
   * Lazy deletion leaves an entry behind for every ack: a lease timer stays
   * until its expiry (30 s by default) and an open sequence until `frontier()`
   * runs, so at high rates the heaps grew by ~80 bytes per event. Sweeping
   * once they hold more than twice the open deliveries keeps memory bounded
   * by the unsettled window at O(1) amortised per entry.
   */
  #tooStale(heap: { readonly size: number }): boolean {
    return heap.size > 2 * this.open.size + 1024;
  }

  #isCurrent(sequence: number, version: number): boolean {
    return this.open.get(sequence)?.version === version;
  }
}
