import type {
  Backend,
  BackendCapabilities,
  AppendOutcome,
  CommitOp,
  GroupMembership,
  HeartbeatRequest,
  MemberView,
  OwnershipFence,
  FetchRequest,
  GroupSpec,
  GroupStart,
  GroupStorageStats,
  LeaseRef,
  NormalizedQuery,
  NormalizedReplay,
  PreparedAppend,
  RenewResult,
  RetentionPolicy,
  SettleOp,
  SettleOutcome,
  TrimReport,
  TrimRequest,
} from '../../core/backend.js';
import { receiptOf } from '../../core/backend.js';
import { systemClock, type Clock } from '../../core/clock.js';
import {
  RheoError,
  groupNotFound,
  invalidArgument,
  invalidPartition,
  staleLease,
  streamNotFound,
} from '../../core/errors.js';
import { newLeaseId, uuidv7 } from '../../core/ids.js';
import { staleGeneration } from '../../core/membership.js';
import type {
  DeadLetter,
  GroupInfo,
  JsonValue,
  LagReport,
  Lease,
  QueryResult,
  RheoEvent,
  StreamInfo,
} from '../../core/types.js';
import { routePartition } from '../../core/validation.js';
import { DeadLetterList } from './dead-letter-list.js';
import { groupLag, groupScope, partitionList, startPartitions, type GroupState } from './group-state.js';
import type { GroupPartition, OpenDelivery } from './group-partition.js';
import { StreamLog } from './stream-log.js';
import * as ownership from './ownership.js';

export interface MemoryBackendOptions {
  /** Lease expiry and event timestamps read this clock. Default: the system clock. */
  clock?: Clock;
}

/** A delivery a fetch found past maxAttempts, dead-lettered when the fetch ends. */
interface Spent {
  p: number;
  part: GroupPartition;
  d: OpenDelivery;
}

interface StreamState {
  readonly log: StreamLog;
  retention: RetentionPolicy | null;
  readonly groups: Map<string, GroupState>;
  readonly waiters: Set<() => void>;
}

/**
 * The in-memory backend: the reference implementation of the contract and the
 * zero-setup default. Single-process, not durable. Every operation costs
 * O(log n) or better in the log length; settled state below the frontier is
 * deleted, so a group's memory is bounded by its unsettled window plus its
 * dead letters.
 */
export function memoryBackend(options: MemoryBackendOptions = {}): Backend {
  return new MemoryBackend(options.clock ?? systemClock);
}

class MemoryBackend implements Backend {
  readonly name = 'memory';
  readonly capabilities: BackendCapabilities = Object.freeze({
    durable: false,
    distributed: false,
    notifications: true,
    transactions: false,
    partitionOwnership: true,
    retention: true,
    cluster: false,
  });
  readonly #clock: Clock;
  readonly #streams = new Map<string, StreamState>();
  #deadLetterIds = 0;
  #closed = false;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  async migrate(): Promise<void> {
    this.#assertOpen();
  }

  /** Nothing to reach: a no-op that still refuses once closed, and has no schema. */
  async ping(): Promise<number | null> {
    this.#assertOpen();
    return null;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const s of this.#streams.values()) for (const wake of s.waiters) wake();
  }

  async createStream(name: string, partitions: number, retention: RetentionPolicy | null = null): Promise<void> {
    this.#assertOpen();
    if (this.#streams.has(name)) {
      throw new RheoError('already_exists', `stream "${name}" already exists`, { stream: name });
    }
    this.#streams.set(name, {
      log: new StreamLog(name, partitions, new Date(this.#clock.now())),
      retention: retention && { ...retention },
      groups: new Map(),
      waiters: new Set(),
    });
  }

  async listStreams(): Promise<StreamInfo[]> {
    this.#assertOpen();
    return [...this.#streams.values()]
      .map(({ log, retention }) => {
        const watermarks: StreamInfo['watermarks'] = {};
        for (let p = 0; p < log.partitions; p++) {
          watermarks[p] = { lowWatermark: log.lowWatermark(p), highWatermark: log.highWatermark(p) };
        }
        return {
          name: log.name,
          partitions: log.partitions,
          createdAt: new Date(log.createdAt),
          retention: retention && { ...retention },
          watermarks,
        };
      })
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async createGroup(stream: string, group: string, spec: GroupSpec): Promise<void> {
    const s = this.#stream(stream);
    // The request is checked against the stream before the name is: a bad
    // start is invalid_partition whether or not the group exists (PostgreSQL
    // checks it before its insert can conflict).
    const partitions = partitionList(s.log, spec.partitions ?? null);
    const parts = startPartitions(s.log, group, spec.start, partitions);
    if (s.groups.has(group)) {
      throw new RheoError('already_exists', `group "${group}" already exists on stream "${stream}"`, { stream, group });
    }
    s.groups.set(group, {
      name: group,
      maxAttempts: spec.maxAttempts,
      partitions: Object.freeze(partitions),
      parts,
      deadLetters: new DeadLetterList(),
      rotation: 0,
      membership: null,
    });
  }

  async listGroups(stream: string): Promise<string[]> {
    return [...this.#stream(stream).groups.keys()].sort();
  }

  async append(stream: string, inputs: PreparedAppend[]): Promise<AppendOutcome[]> {
    const s = this.#stream(stream);
    const log = s.log;
    // Route everything first: an invalid partition anywhere must write nothing.
    const partitions = inputs.map((i) => routePartition(stream, log.partitions, i.partition, i.key));
    const inBatch = new Map<string, RheoEvent>();
    const out: AppendOutcome[] = [];
    for (let i = 0; i < inputs.length; i++) {
      const input = inputs[i]!;
      const existing = input.id === null ? undefined : (log.byId.get(input.id) ?? inBatch.get(input.id));
      if (existing) {
        out.push({ event: existing, existed: true });
        continue;
      }
      const partition = partitions[i]!;
      const event: RheoEvent = deepFreeze({
        id: input.id ?? uuidv7(this.#clock),
        stream,
        partition,
        sequence: log.nextSequence(partition),
        type: input.type,
        key: input.key,
        payload: input.payload,
        metadata: input.metadata,
        timestamp: input.timestamp,
      });
      log.push(event, input.size);
      inBatch.set(event.id, event);
      out.push({ event, existed: false });
    }
    if (inBatch.size > 0) {
      const waiters = [...s.waiters];
      s.waiters.clear();
      for (const wake of waiters) wake();
    }
    return out;
  }

  async read(stream: string, partition: number, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    const { log } = this.#stream(stream);
    if (partition >= log.partitions) throw invalidPartition(stream, partition, log.partitions);
    return log.read(partition, after, limit, maxBytes);
  }

  async query(stream: string, query: NormalizedQuery): Promise<QueryResult> {
    const { log } = this.#stream(stream);
    if (query.partition !== null && query.partition >= log.partitions) {
      throw invalidPartition(stream, query.partition, log.partitions);
    }
    return log.query(query);
  }

  async fetch(stream: string, group: string, request: FetchRequest): Promise<Lease[]> {
    const { log, g } = this.#group(stream, group);
    const partitions = groupScope(log, g, request.partitions);
    const now = this.#clock.now();
    const leases: Lease[] = [];
    const start = g.rotation++ % partitions.length;
    const exhausted = new Set<number>();
    const budget = { bytes: 0, maxBytes: request.maxBytes, spent: false };
    const spent: Spent[] = [];
    // Round-robin, one claim per partition per round, so a backlog in one
    // partition never starves the others. The walk ends at the first event
    // that does not fit the byte budget, as PostgreSQL's claim does.
    while (leases.length < request.limit && exhausted.size < partitions.length && !budget.spent) {
      for (let k = 0; k < partitions.length && leases.length < request.limit && !budget.spent; k++) {
        const p = partitions[(start + k) % partitions.length]!;
        if (exhausted.has(p)) continue;
        const lease = this.#claimOne(log, g, p, now, request, budget, leases.length === 0, spent);
        if (lease) leases.push(lease);
        else if (!budget.spent) exhausted.add(p);
      }
    }
    // The deliveries one fetch dead-letters die together: numbered by
    // (partition, sequence), not by the rotating walk (docs/semantics.md).
    spent.sort((a, b) => a.p - b.p || a.d.sequence - b.d.sequence);
    for (const { p, part, d } of spent) this.#deadLetter(g, p, part, d, 'max attempts exceeded', now);
    return leases;
  }

  async renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    const now = this.#clock.now();
    return refs.map((ref) => {
      const found = this.#leased(ref);
      if (found instanceof RheoError) return { ok: false, error: found };
      found.part.renew(found.d, now + leaseMs);
      return { ok: true, expiresAt: new Date(now + leaseMs) };
    });
  }

  async settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    const now = this.#clock.now();
    return ops.map((op) => {
      const found = this.#leased(op);
      if (found instanceof RheoError) return { ok: false, error: found };
      const { g, part, d } = found;
      switch (op.kind) {
        case 'ack':
          part.close(d);
          break;
        case 'nack':
          if (d.attempt >= g.maxAttempts) this.#deadLetter(g, op.partition, part, d, op.reason, now);
          else part.makePending(d, now + op.delayMs);
          break;
        case 'reject':
          this.#deadLetter(g, op.partition, part, d, op.reason, now);
          break;
        case 'release':
          d.attempt--;
          part.makePending(d, now);
          break;
      }
      return { ok: true };
    });
  }

  async lag(stream: string, group: string, only: number[] | null = null): Promise<LagReport> {
    const { log, g } = this.#group(stream, group);
    return groupLag(log, g, groupScope(log, g, only));
  }

  async replay(stream: string, group: string, spec: NormalizedReplay, only: number[] | null): Promise<void> {
    const { log, g } = this.#group(stream, group);
    const partitions = groupScope(log, g, only);
    const now = this.#clock.now();
    if (spec.kind === 'query') {
      // Reopened in log order per partition; all matches are found before
      // the first is reopened, so the replay is all or nothing like the others.
      const matched = partitions.flatMap((p) => log.matching(p, spec.query));
      for (const e of matched) this.#reopen(g, e.partition, e.sequence, now);
      return;
    }
    if (spec.kind === 'eventIds') {
      const events = spec.eventIds.map((id) => {
        const e = log.byId.get(id);
        if (!e) throw invalidArgument(`replay: event "${id}" does not exist in stream "${stream}"`, { stream, group });
        return e;
      });
      const allowed = new Set(partitions);
      ownership.bumpGenerations(g, [...new Set(events.map((e) => e.partition))].filter((p) => allowed.has(p)));
      for (const e of events) {
        if (allowed.has(e.partition)) this.#reopen(g, e.partition, e.sequence, now);
      }
      return;
    }
    ownership.bumpGenerations(g, partitions);
    for (const p of partitions) {
      // Below the low watermark a replay starts at it (docs/semantics.md, "Retention").
      const from =
        spec.kind === 'fromSequence' ? Math.max(spec.fromSequence, log.lowWatermark(p)) : log.firstSequenceAt(p, spec.from.getTime());
      if (from === null) continue;
      const part = g.parts[p]!;
      part.rewind(from);
      for (const dead of g.deadLetters.inPartitionFrom(p, from)) g.deadLetters.remove(dead);
    }
  }

  async resetGroup(stream: string, group: string, start: GroupStart, only: number[] | null = null): Promise<void> {
    const { log, g } = this.#group(stream, group);
    const scope = groupScope(log, g, only);
    const fresh = startPartitions(log, group, start, scope);
    for (const p of scope) {
      g.parts[p] = fresh[p]!;
      for (const dead of g.deadLetters.inPartitionFrom(p, 0)) g.deadLetters.remove(dead);
    }
    ownership.bumpGenerations(g, scope);
  }

  async groupInfo(stream: string, group: string): Promise<GroupInfo> {
    const { log, g } = this.#group(stream, group);
    return {
      stream,
      group,
      maxAttempts: g.maxAttempts,
      lag: groupLag(log, g),
      inflight: g.parts.reduce((n, part) => n + part.leasedCount, 0),
      deadLetters: g.deadLetters.size,
      partitions: Object.fromEntries(
        g.partitions.map((p) => [p, { inflight: g.parts[p]!.leasedCount, deadLetters: g.deadLetters.countIn(p) }]),
      ),
    };
  }

  async deadLetters(stream: string, group: string, limit: number, after: string | null, maxBytes: number): Promise<DeadLetter[]> {
    const { log, g } = this.#group(stream, group);
    let afterId = 0;
    if (after !== null) {
      // The id spelled exactly as it was handed out: '01' names no dead letter.
      afterId = /^[1-9]\d{0,14}$/.test(after) ? Number(after) : -1;
      if (!g.deadLetters.has(afterId)) {
        throw new RheoError('cursor_not_found', `dead-letter cursor "${after}" not found in group "${group}" of stream "${stream}"`, {
          stream,
          group,
        });
      }
    }
    const page = g.deadLetters.page(afterId, limit);
    let n = 0;
    for (let bytes = 0; n < page.length; n++) {
      bytes += log.size(page[n]!.partition, page[n]!.sequence);
      if (bytes > maxBytes && n > 0) break;
    }
    return page.slice(0, n).map((e) => ({
      id: String(e.id),
      stream,
      group,
      attempt: e.attempt,
      reason: e.reason,
      deadLetteredAt: new Date(e.deadLetteredAt),
      event: log.event(e.partition, e.sequence)!,
    }));
  }

  async redrive(stream: string, group: string, eventIds: string[] | null): Promise<number> {
    const { log, g } = this.#group(stream, group);
    const now = this.#clock.now();
    const entries =
      eventIds === null
        ? g.deadLetters.all()
        : eventIds.flatMap((id) => {
            const e = log.byId.get(id);
            const dead = e && g.deadLetters.find(e.partition, e.sequence);
            return dead ? [dead] : [];
          });
    ownership.bumpGenerations(g, [...new Set(entries.map((dead) => dead.partition))]);
    for (const dead of entries) {
      g.deadLetters.remove(dead);
      g.parts[dead.partition]!.reopen(dead.sequence, now);
    }
    return entries.length;
  }

  async setRetention(stream: string, retention: RetentionPolicy | null): Promise<void> {
    this.#stream(stream).retention = retention && { ...retention };
  }

  /**
   * Per partition in order, while the batch limit lasts: the bound is the
   * higher of the count bound and the age bound (the leading run of old
   * events), capped by every group's frontier unless forced. Groups passed
   * by a forced bound lose their unsettled sequences below it.
   */
  async trim(stream: string, request: TrimRequest): Promise<TrimReport> {
    const s = this.#stream(stream);
    const { log } = s;
    const explicit = request.before !== null || request.keep !== null;
    const policy = explicit ? null : s.retention;
    const keep = explicit ? request.keep : (policy?.maxEvents ?? null);
    const beforeMs = explicit
      ? (request.before?.getTime() ?? null)
      : policy?.maxAgeMs != null
        ? this.#clock.now() - policy.maxAgeMs
        : null;
    const report: TrimReport = { deleted: 0, partitions: {}, forced: [] };
    let budget = request.limit;
    for (let p = 0; p < log.partitions; p++) {
      const low = log.lowWatermark(p);
      let bound = low - 1;
      if (budget > 0 && (explicit || policy !== null)) {
        if (keep !== null) bound = Math.max(bound, log.highWatermark(p) - keep);
        if (beforeMs !== null) bound = Math.max(bound, log.lastBefore(p, beforeMs, budget));
        bound = Math.min(bound, low - 1 + budget);
        if (!request.force) for (const g of s.groups.values()) bound = Math.min(bound, g.parts[p]!.frontier());
      }
      if (bound >= low) {
        for (const g of [...s.groups.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
          const unsettled = g.parts[p]!.trimTo(bound);
          g.deadLetters.removeUpTo(p, bound);
          if (unsettled > 0) report.forced.push({ group: g.name, partition: p, unsettled });
        }
      }
      const deleted = bound >= low ? log.trimTo(p, bound) : 0;
      budget -= deleted;
      report.deleted += deleted;
      report.partitions[p] = { deleted, lowWatermark: log.lowWatermark(p) };
    }
    return report;
  }

  async deleteGroup(stream: string, group: string): Promise<void> {
    const s = this.#stream(stream);
    if (!s.groups.delete(group)) throw groupNotFound(stream, group);
  }

  async deleteStream(stream: string): Promise<void> {
    const s = this.#stream(stream);
    this.#streams.delete(stream);
    // Idle producers of the stream look again (and find it gone) instead of waiting out their poll.
    for (const wake of [...s.waiters]) wake();
    s.waiters.clear();
  }

  waitForAppend(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    const s = this.#streams.get(stream);
    if (!s || this.#closed || signal?.aborted) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const done = (woken: boolean) => {
        clearTimeout(timer);
        s.waiters.delete(wake);
        signal?.removeEventListener('abort', onAbort);
        resolve(woken && !this.#closed);
      };
      const wake = () => done(true);
      const onAbort = () => done(false);
      const timer = setTimeout(() => done(false), timeoutMs);
      s.waiters.add(wake);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  async storageStats(stream: string, group: string): Promise<GroupStorageStats> {
    const { g } = this.#group(stream, group);
    return {
      deliveries: g.parts.reduce((n, part) => n + part.open.size, 0),
      deadLetters: g.deadLetters.size,
    };
  }

  // ---- partition ownership (docs/design.md#two-ways-to-consume-a-group; src/core/membership.ts) ----

  async heartbeat(stream: string, group: string, request: HeartbeatRequest): Promise<MemberView> {
    const { log, g } = this.#group(stream, group);
    return ownership.heartbeat(log, g, request, this.#clock.now()).view;
  }

  async leaveGroup(stream: string, group: string, memberId: string): Promise<void> {
    const { g } = this.#group(stream, group);
    ownership.leave(g, memberId, this.#clock.now());
  }

  async releasePartitions(fences: OwnershipFence[]): Promise<SettleOutcome[]> {
    this.#assertOpen();
    return fences.map((fence) => ownership.release(this.#streams.get(fence.stream)?.groups.get(fence.group), fence));
  }

  async readOwned(fence: OwnershipFence, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    const { log, g } = this.#group(fence.stream, fence.group);
    if (fence.partition >= log.partitions) throw invalidPartition(fence.stream, fence.partition, log.partitions);
    if (!ownership.fencedSlot(g, fence)) throw staleGeneration(fence);
    return log.read(fence.partition, after, limit, maxBytes);
  }

  async commit(ops: CommitOp[]): Promise<SettleOutcome[]> {
    this.#assertOpen();
    const now = this.#clock.now();
    return ops.map((op) => {
      const s = this.#streams.get(op.stream);
      return ownership.commit(s?.log, s?.groups.get(op.group), op, (g, partition, sequence, attempt, reason) =>
        g.deadLetters.add({ id: ++this.#deadLetterIds, partition, sequence, attempt, reason, deadLetteredAt: now }),
      );
    });
  }

  async members(stream: string, group: string): Promise<GroupMembership> {
    const { log, g } = this.#group(stream, group);
    return ownership.membership(log, g.membership, this.#clock.now());
  }

  // ---- internals ----------------------------------------------------------

  /** Replay of one event: a settled (acked or dead) delivery becomes claimable again with attempts reset; an open one is left alone. */
  #reopen(g: GroupState, p: number, sequence: number, now: number): void {
    const part = g.parts[p]!;
    if (!part.isSettled(sequence)) return;
    const dead = g.deadLetters.find(p, sequence);
    if (dead) g.deadLetters.remove(dead);
    part.reopen(sequence, now);
  }

  /**
   * Claims the partition's lowest claimable delivery; spent ones on the way
   * are closed and added to `spent`. `null` when there is none, or when its
   * event does not fit the budget (then `budget.spent` is set and the
   * delivery is left as it was).
   */
  #claimOne(
    log: StreamLog,
    g: GroupState,
    p: number,
    now: number,
    request: FetchRequest,
    budget: { bytes: number; maxBytes: number; spent: boolean },
    first: boolean,
    spent: Spent[],
  ): Lease | null {
    const part = g.parts[p]!;
    for (;;) {
      const next = part.nextClaimable(now, log.highWatermark(p));
      if (next === null) return null;
      const isSpent = (next.delivery?.attempt ?? 0) + 1 > g.maxAttempts;
      if (!isSpent) {
        const bytes = budget.bytes + log.size(p, next.sequence);
        if (bytes > budget.maxBytes && !first) {
          budget.spent = true;
          return null;
        }
        budget.bytes = bytes;
      }
      const d = part.take(next.sequence, next.delivery);
      if (isSpent) {
        part.close(d);
        spent.push({ p, part, d });
        continue;
      }
      const leaseId = newLeaseId();
      const expiresAt = now + request.leaseMs;
      part.lease(d, leaseId, request.consumerId, now, expiresAt);
      return {
        leaseId,
        receipt: receiptOf(log.name, g.name, p, d.sequence),
        stream: log.name,
        group: g.name,
        consumerId: request.consumerId,
        attempt: d.attempt,
        leasedAt: new Date(now),
        expiresAt: new Date(expiresAt),
        event: log.event(p, d.sequence)!,
      };
    }
  }

  #deadLetter(g: GroupState, p: number, part: GroupPartition, d: OpenDelivery, reason: string | null, now: number): void {
    if (part.open.get(d.sequence) === d) part.close(d);
    g.deadLetters.add({
      id: ++this.#deadLetterIds,
      partition: p,
      sequence: d.sequence,
      attempt: d.attempt,
      reason,
      deadLetteredAt: now,
    });
  }

  #leased(ref: LeaseRef): { g: GroupState; part: GroupPartition; d: OpenDelivery } | RheoError {
    const g = this.#streams.get(ref.stream)?.groups.get(ref.group);
    const part = g?.parts[ref.partition];
    const d = part?.open.get(ref.sequence);
    if (!g || !part || !d || d.state !== 'leased' || d.leaseId !== ref.leaseId) {
      return staleLease(ref.stream, ref.group, `delivery ${ref.partition}/${ref.sequence} is not leased under this lease id`);
    }
    return { g, part, d };
  }

  #stream(stream: string): StreamState {
    this.#assertOpen();
    const s = this.#streams.get(stream);
    if (!s) throw streamNotFound(stream);
    return s;
  }

  #group(stream: string, group: string): { log: StreamLog; g: GroupState } {
    const s = this.#stream(stream);
    const g = s.groups.get(group);
    if (!g) throw groupNotFound(stream, group);
    return { log: s.log, g };
  }

  #assertOpen(): void {
    if (this.#closed) throw new RheoError('closed', 'the memory backend is closed');
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value) && !(value instanceof Date)) {
    for (const v of Object.values(value as Record<string, JsonValue>)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
