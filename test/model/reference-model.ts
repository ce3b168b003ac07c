import { partitionForKey } from '../../src/core/partitioner.js';
import type { JsonObject, JsonValue } from '../../src/core/types.js';
import type {
  ObservedDeadLetter,
  ObservedEvent,
  ObservedGroup,
  ObservedLease,
  ObservedPartition,
  Outcome,
  RenewOutcome,
  SettleOutcome,
} from './observable.js';

/*
 * The reference model: the delivery semantics of one stream, written from
 * docs/design.md and docs/semantics.md with no regard for cost. Unlike the
 * backends (a cursor plus open entries), it keeps an explicit state for EVERY
 * sequence of every group, so each rule reads as the contract states it:
 * the frontier is literally "the highest F such that every sequence up to F
 * is terminal", claimable is literally "never offered, pending past its
 * delay, or leased past expiry". Time is passed in; nothing here is random.
 */

type Delivery =
  /** Not yet offered to the group (or reopened by a replay from a sequence). */
  | { state: 'unoffered' }
  /** Acked, or before the group's start position. */
  | { state: 'done' }
  | { state: 'dead' }
  | {
      state: 'open';
      attempt: number;
      /** Lease expiry while leased, end of the delay while pending. */
      visibleAt: number;
      lease: { handle: number; consumerId: string; leasedAt: number } | null;
    };

interface ModelPartition {
  /** Index = sequence; index 0 unused. */
  deliveries: Delivery[];
  /** Sequences up to here that are appended later count as done (a start after the end of the log). */
  startBound: number;
}

interface ModelDeadLetter {
  partition: number;
  sequence: number;
  attempt: number;
  reason: string | null;
  at: number;
}

interface ModelGroup {
  name: string;
  maxAttempts: number;
  /** Fetches so far: the round-robin starts at `rotation % partitions.length`. */
  rotation: number;
  parts: ModelPartition[];
  /** In creation order, which is the listing order. */
  deadLetters: ModelDeadLetter[];
}

export type ModelStart =
  | { kind: 'after'; after: number; perPartition: Record<number, number> }
  | { kind: 'at'; at: number };

export interface ModelAppend {
  id: string | null;
  type: string;
  key: string | null;
  partition: number | null;
  payload: JsonValue;
  metadata: JsonObject;
  timestamp: number;
}

export type ModelReplay =
  | { kind: 'fromSequence'; fromSequence: number }
  | { kind: 'from'; from: number }
  | { kind: 'eventIds'; eventIds: string[] };

export interface ModelSettle {
  handle: number;
  kind: 'ack' | 'nack' | 'reject' | 'release';
  reason: string | null;
  delayMs: number;
}

/** A lease as the model issues it: its observable form plus the handle that names it. */
export interface ModelLease {
  handle: number;
  lease: ObservedLease;
}

export class ReferenceModel {
  readonly stream: string;
  readonly partitions: number;
  /** Index = sequence - 1, per partition. */
  readonly #log: ObservedEvent[][];
  readonly #byId = new Map<string, ObservedEvent>();
  readonly #groups = new Map<string, ModelGroup>();
  /** Every lease ever issued: handle -> which delivery (and group) it was for. */
  readonly #leases: Array<{ group: string; partition: number; sequence: number }> = [];
  #autoIds = 0;

  constructor(stream: string, partitions: number) {
    this.stream = stream;
    this.partitions = partitions;
    this.#log = Array.from({ length: partitions }, () => []);
  }

  get events(): readonly ObservedEvent[] {
    return [...this.#byId.values()];
  }

  get leaseCount(): number {
    return this.#leases.length;
  }

  /** Whether the lease named by `handle` is still the current holder of its delivery (expired or not). */
  isCurrent(handle: number): boolean {
    const ref = this.#leases[handle];
    if (!ref) return false;
    const d = this.#groups.get(ref.group)?.parts[ref.partition]?.deliveries[ref.sequence];
    return d?.state === 'open' && d.lease?.handle === handle;
  }

  /** Which delivery a handle is for, as `group/partition/sequence`. */
  deliveryOf(handle: number): string {
    const ref = this.#leases[handle]!;
    return `${ref.group}/${ref.partition}/${ref.sequence}`;
  }

  highWatermark(partition: number): number {
    return this.#log[partition]!.length;
  }

  // ---- the log --------------------------------------------------------------

  append(inputs: ModelAppend[]): Outcome<ObservedEvent[]> {
    const routed: number[] = [];
    for (const input of inputs) {
      if (input.partition !== null) {
        if (input.partition >= this.partitions) return { error: 'invalid_partition' };
        routed.push(input.partition);
      } else {
        routed.push(input.key === null ? 0 : partitionForKey(input.key, this.partitions));
      }
    }
    const out: ObservedEvent[] = [];
    inputs.forEach((input, i) => {
      const existing = input.id === null ? undefined : this.#byId.get(input.id);
      if (existing) {
        out.push(existing);
        return;
      }
      const partition = routed[i]!;
      const sequence = this.#log[partition]!.length + 1;
      const event: ObservedEvent = {
        id: input.id ?? `model-${++this.#autoIds}`,
        stream: this.stream,
        partition,
        sequence,
        type: input.type,
        key: input.key,
        payload: input.payload,
        metadata: input.metadata,
        timestamp: input.timestamp,
      };
      this.#log[partition]!.push(event);
      this.#byId.set(event.id, event);
      for (const g of this.#groups.values()) {
        const part = g.parts[partition]!;
        part.deliveries[sequence] = sequence <= part.startBound ? { state: 'done' } : { state: 'unoffered' };
      }
      out.push(event);
    });
    return { ok: out };
  }

  // ---- groups ---------------------------------------------------------------

  createGroup(group: string, start: ModelStart, maxAttempts: number): Outcome<void> {
    const parts = this.#startParts(start);
    if (!parts) return { error: 'invalid_partition' };
    if (this.#groups.has(group)) return { error: 'already_exists' };
    this.#groups.set(group, { name: group, maxAttempts, rotation: 0, parts, deadLetters: [] });
    return { ok: undefined };
  }

  resetGroup(group: string, start: ModelStart): Outcome<void> {
    const g = this.#groups.get(group);
    if (!g) return { error: 'group_not_found' };
    const parts = this.#startParts(start);
    if (!parts) return { error: 'invalid_partition' };
    g.parts = parts;
    g.deadLetters = [];
    return { ok: undefined };
  }

  // ---- consuming --------------------------------------------------------------

  fetch(
    group: string,
    request: { limit: number; leaseMs: number; consumerId: string; partitions: number[] | null },
    now: number,
  ): Outcome<ModelLease[]> {
    const g = this.#groups.get(group);
    if (!g) return { error: 'group_not_found' };
    const list = request.partitions === null ? [...this.#log.keys()] : [...new Set(request.partitions)].sort((a, b) => a - b);
    if (list.some((p) => p >= this.partitions)) return { error: 'invalid_partition' };
    const start = g.rotation++ % list.length;
    const order = [...list.slice(start), ...list.slice(0, start)];
    const out: ModelLease[] = [];
    const spent: Array<{ partition: number; sequence: number; attempt: number }> = [];
    const exhausted = new Set<number>();
    // One claim per partition per round, in the rotated order, until the
    // limit or until no partition has anything claimable.
    while (out.length < request.limit && exhausted.size < order.length) {
      for (const p of order) {
        if (out.length >= request.limit) break;
        if (exhausted.has(p)) continue;
        const lease = this.#claimOne(g, p, request, now, spent);
        if (lease) out.push(lease);
        else exhausted.add(p);
      }
    }
    // Deliveries one fetch finds spent die at the same instant; they are
    // listed by (partition, sequence), not in the rotating walk's order.
    spent.sort((a, b) => a.partition - b.partition || a.sequence - b.sequence);
    for (const x of spent) this.#bury(g, x.partition, x.sequence, x.attempt, 'max attempts exceeded', now);
    return { ok: out };
  }

  renew(handles: number[], leaseMs: number, now: number): RenewOutcome[] {
    return handles.map((handle) => {
      const d = this.#current(handle);
      if (!d) return 'stale_lease';
      d.visibleAt = now + leaseMs;
      return d.visibleAt;
    });
  }

  /** One outcome per op, applied in order, exactly as if each were its own call. */
  settle(ops: ModelSettle[], now: number): SettleOutcome[] {
    return ops.map((op) => {
      const d = this.#current(op.handle);
      if (!d) return 'stale_lease';
      const ref = this.#leases[op.handle]!;
      const g = this.#groups.get(ref.group)!;
      const deliveries = g.parts[ref.partition]!.deliveries;
      switch (op.kind) {
        case 'ack':
          deliveries[ref.sequence] = { state: 'done' };
          break;
        case 'reject':
          this.#bury(g, ref.partition, ref.sequence, d.attempt, op.reason, now);
          break;
        case 'nack':
          if (d.attempt >= g.maxAttempts) this.#bury(g, ref.partition, ref.sequence, d.attempt, op.reason, now);
          else deliveries[ref.sequence] = { state: 'open', attempt: d.attempt, visibleAt: now + op.delayMs, lease: null };
          break;
        case 'release':
          deliveries[ref.sequence] = { state: 'open', attempt: d.attempt - 1, visibleAt: now, lease: null };
          break;
      }
      return 'ok';
    });
  }

  // ---- operations -------------------------------------------------------------

  replay(group: string, spec: ModelReplay, partitions: number[] | null, now: number): Outcome<void> {
    const g = this.#groups.get(group);
    if (!g) return { error: 'group_not_found' };
    if (partitions?.some((p) => p >= this.partitions)) return { error: 'invalid_partition' };
    const inScope = (p: number): boolean => partitions === null || partitions.includes(p);
    if (spec.kind === 'eventIds') {
      const events = spec.eventIds.map((id) => this.#byId.get(id));
      if (events.some((e) => e === undefined)) return { error: 'invalid_argument' };
      for (const e of events as ObservedEvent[]) {
        if (!inScope(e.partition)) continue;
        const state = g.parts[e.partition]!.deliveries[e.sequence]!.state;
        if (state === 'done' || state === 'dead') this.#reopen(g, e.partition, e.sequence, now);
      }
      return { ok: undefined };
    }
    for (let p = 0; p < this.partitions; p++) {
      if (!inScope(p)) continue;
      const from =
        spec.kind === 'fromSequence'
          ? spec.fromSequence
          : this.#log[p]!.find((e) => e.timestamp >= spec.from)?.sequence;
      if (from === undefined) continue;
      const part = g.parts[p]!;
      for (let s = from; s < part.deliveries.length; s++) {
        const state = part.deliveries[s]!.state;
        if (state === 'dead') this.#unbury(g, p, s);
        if (state === 'done' || state === 'dead') part.deliveries[s] = { state: 'unoffered' };
      }
      part.startBound = Math.min(part.startBound, from - 1);
    }
    return { ok: undefined };
  }

  redrive(group: string, eventIds: string[] | null, now: number): Outcome<number> {
    const g = this.#groups.get(group);
    if (!g) return { error: 'group_not_found' };
    const wanted = eventIds === null ? null : new Set(eventIds);
    const moving = g.deadLetters.filter(
      (dl) => wanted === null || wanted.has(this.#log[dl.partition]![dl.sequence - 1]!.id),
    );
    for (const dl of moving) this.#reopen(g, dl.partition, dl.sequence, now);
    return { ok: moving.length };
  }

  // ---- observation ------------------------------------------------------------

  observe(group: string): Outcome<ObservedGroup> {
    const g = this.#groups.get(group);
    if (!g) return { error: 'group_not_found' };
    const partitions: Record<number, ObservedPartition> = {};
    let total = 0;
    let inflight = 0;
    let stored = 0;
    g.parts.forEach((part, p) => {
      const highWatermark = this.highWatermark(p);
      let frontier = 0;
      while (this.#terminal(part, frontier + 1)) frontier++;
      const lag = Math.max(0, highWatermark - frontier);
      total += lag;
      partitions[p] = {
        frontier,
        highWatermark,
        lag,
        oldestUnsettledAt: lag > 0 ? this.#log[p]![frontier]!.timestamp : null,
      };
      for (const d of part.deliveries) {
        if (d?.state !== 'open') continue;
        stored++;
        if (d.lease) inflight++;
      }
    });
    return {
      ok: {
        maxAttempts: g.maxAttempts,
        lag: total,
        partitions,
        inflight,
        deadLetterCount: g.deadLetters.length,
        deadLetters: g.deadLetters.map((dl) => this.#observeDeadLetter(g, dl)),
        storedDeliveries: stored,
      },
    };
  }

  // ---- internals --------------------------------------------------------------

  /** Terminal: acked, dead, or before the start. Past the end of the log only the start counts. */
  #terminal(part: ModelPartition, sequence: number): boolean {
    const d = part.deliveries[sequence];
    if (d === undefined) return sequence <= part.startBound;
    return d.state === 'done' || d.state === 'dead';
  }

  #startParts(start: ModelStart): ModelPartition[] | null {
    if (start.kind === 'after' && Object.keys(start.perPartition).some((k) => Number(k) >= this.partitions)) return null;
    return this.#log.map((events, p) => {
      let startBound: number;
      if (start.kind === 'after') startBound = start.perPartition[p] ?? start.after;
      else startBound = (events.find((e) => e.timestamp >= start.at)?.sequence ?? events.length + 1) - 1;
      const deliveries: Delivery[] = [{ state: 'done' }];
      for (const e of events) deliveries.push(e.sequence <= startBound ? { state: 'done' } : { state: 'unoffered' });
      return { deliveries, startBound };
    });
  }

  #claimOne(
    g: ModelGroup,
    p: number,
    request: { leaseMs: number; consumerId: string },
    now: number,
    spent: Array<{ partition: number; sequence: number; attempt: number }>,
  ): ModelLease | null {
    const deliveries = g.parts[p]!.deliveries;
    for (;;) {
      const sequence = deliveries.findIndex(
        (d, s) => s > 0 && (d.state === 'unoffered' || (d.state === 'open' && d.visibleAt <= now)),
      );
      if (sequence < 0) return null;
      const d = deliveries[sequence]!;
      const attempt = d.state === 'open' ? d.attempt : 0;
      if (attempt + 1 > g.maxAttempts) {
        deliveries[sequence] = { state: 'dead' };
        spent.push({ partition: p, sequence, attempt });
        continue;
      }
      const handle = this.#leases.length;
      this.#leases.push({ group: g.name, partition: p, sequence });
      deliveries[sequence] = {
        state: 'open',
        attempt: attempt + 1,
        visibleAt: now + request.leaseMs,
        lease: { handle, consumerId: request.consumerId, leasedAt: now },
      };
      return {
        handle,
        lease: {
          receipt: `${this.stream}/${g.name}/${p}/${sequence}`,
          stream: this.stream,
          group: g.name,
          consumerId: request.consumerId,
          attempt: attempt + 1,
          leasedAt: now,
          expiresAt: now + request.leaseMs,
          event: this.#log[p]![sequence - 1]!,
        },
      };
    }
  }

  /** The open, leased delivery that `handle` currently holds, or null (stale). */
  #current(handle: number): Extract<Delivery, { state: 'open' }> | null {
    if (!this.isCurrent(handle)) return null;
    const ref = this.#leases[handle]!;
    return this.#groups.get(ref.group)!.parts[ref.partition]!.deliveries[ref.sequence] as Extract<Delivery, { state: 'open' }>;
  }

  #bury(g: ModelGroup, partition: number, sequence: number, attempt: number, reason: string | null, now: number): void {
    g.parts[partition]!.deliveries[sequence] = { state: 'dead' };
    g.deadLetters.push({ partition, sequence, attempt, reason, at: now });
  }

  #unbury(g: ModelGroup, partition: number, sequence: number): void {
    g.deadLetters = g.deadLetters.filter((dl) => dl.partition !== partition || dl.sequence !== sequence);
  }

  /** A settled delivery becomes pending now with its attempts starting over. */
  #reopen(g: ModelGroup, partition: number, sequence: number, now: number): void {
    this.#unbury(g, partition, sequence);
    g.parts[partition]!.deliveries[sequence] = { state: 'open', attempt: 0, visibleAt: now, lease: null };
  }

  #observeDeadLetter(g: ModelGroup, dl: ModelDeadLetter): ObservedDeadLetter {
    return {
      stream: this.stream,
      group: g.name,
      attempt: dl.attempt,
      reason: dl.reason,
      deadLetteredAt: dl.at,
      event: this.#log[dl.partition]![dl.sequence - 1]!,
    };
  }
}
