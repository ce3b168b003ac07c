import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { MemberView } from '../core/backend.js';
import type { RheoError } from '../core/errors.js';
import { isRheoError } from '../core/errors.js';
import type { JsonValue } from '../core/types.js';
import { report } from '../observability/diagnostics.js';
import type { MemberJoinEvent, RebalanceEvent } from '../observability/lease-events.js';
import { backoffDelay } from '../runtime/backoff.js';
import { systemTimers, type ScheduledTimer, type Timers } from '../runtime/timers.js';
import type { ConsumerState } from './consumer-types.js';
import {
  resolvePartitionOptions,
  type PartitionConsumeOptions,
  type PartitionSource,
  type ResolvedPartitionOptions,
} from './partition-options.js';
import { Coalescer } from '../core/coalescer.js';
import type { CommitInput } from '../core/ownership-arguments.js';
import type { SettleResult } from '../core/types.js';
import { PartitionWorker } from './partition-worker.js';
import { Slots } from '../runtime/slots.js';
import { partitionTransactionalHandler } from './transactional-handler.js';
import { requireCapability } from '../core/capabilities.js';

/** An ownership call failed; the consumer retries it by itself. */
export interface OwnershipErrorEvent {
  readonly stream: string;
  readonly group: string;
  readonly memberId: string;
  readonly op: 'heartbeat' | 'read' | 'commit' | 'release' | 'leave';
  readonly partition: number | null;
  readonly error: RheoError;
}

export interface PartitionConsumerEventMap {
  'member-join': [MemberJoinEvent];
  'member-leave': [MemberJoinEvent];
  rebalance: [RebalanceEvent];
  'ownership-error': [OwnershipErrorEvent];
  drain: [{ stream: string; group: string; memberId: string; aborted: number; timedOut: boolean }];
}

export interface PartitionConsumerStats {
  state: ConsumerState;
  /** Partitions owned now, ascending. */
  owned: number[];
  /** Partitions being handed over. */
  revoking: number[];
  groupGeneration: number;
  /** Handler runs finished (retries included). */
  handled: number;
  retried: number;
  deadLettered: number;
  /** Offset commits that landed. */
  commits: number;
  /** Partitions lost without a release (moved after the rebalance timeout or a session end). */
  lost: number;
  errors: number;
}

/**
 * `rheo.consume({ assignment: 'partitions' })`: a member of the group's
 * partition ownership (docs/design.md#two-ways-to-consume-a-group). A heartbeat on a timer keeps its
 * session and learns its share; one `PartitionWorker` per owned partition
 * reads in sequence order and commits once per batch. A revoked partition
 * stops reading, gets half the rebalance timeout to finish, commits, and is
 * released; `stop()` does the same for every partition and leaves the group.
 */
export class PartitionConsumer<T extends JsonValue = JsonValue> extends EventEmitter<PartitionConsumerEventMap> {
  readonly stream: string;
  readonly group: string;
  readonly memberId: string;
  /** Resolves once the consumer has stopped. Never rejects. */
  readonly done: Promise<void>;
  readonly #source: PartitionSource;
  readonly #o: ResolvedPartitionOptions<T>;
  readonly #timers: Timers;
  /** Whether `#timers` are the system's: only then may a worker's idle wait be timed by the store (blocking fetch). */
  readonly #systemTimers: boolean;
  readonly #slots: Slots;
  /**
   * Offset commits of every worker, one call at a time (core/coalescer.ts):
   * busy partitions share one commit per round, and so one connection and
   * one durable write. At most one op per partition per call.
   */
  readonly #committer: Coalescer<CommitInput, SettleResult>;
  readonly #workers = new Map<number, PartitionWorker<T>>();
  readonly #revoking = new Set<number>();
  #maxAttempts: number | null;
  #joined = false;
  #groupGeneration = 0;
  #timer: ScheduledTimer | null = null;
  #beating: Promise<void> | null = null;
  #heartbeatFailures = 0;
  #state: ConsumerState = 'running';
  #stopping: Promise<void> | null = null;
  #resolveDone!: () => void;
  readonly #counters = { handled: 0, retried: 0, deadLettered: 0, commits: 0, lost: 0, errors: 0 };
  readonly #onAbort = (): void => void this.stop();

  constructor(source: PartitionSource, options: PartitionConsumeOptions<T>) {
    super();
    const o = resolvePartitionOptions(options, source.defaults, () => randomBytes(6).toString('hex'));
    if (o.transaction) requireCapability(source.backend, 'transactions', "consume({ assignment: 'partitions', transaction: true })");
    this.#source = source;
    this.#o = o.transaction ? { ...o, handler: partitionTransactionalHandler(source.backend, o, o.handler) } : o;
    this.stream = o.stream;
    this.group = o.group;
    this.memberId = o.memberId;
    this.#timers = o.timers ?? systemTimers;
    this.#systemTimers = o.timers === undefined;
    this.#slots = new Slots(o.concurrency);
    this.#committer = new Coalescer((ops: CommitInput[]) => source.commit(ops), { key: (op) => op.partition });
    this.#maxAttempts = o.maxAttempts;
    this.done = new Promise<void>((resolve) => (this.#resolveDone = resolve));
    if (o.signal?.aborted) queueMicrotask(this.#onAbort);
    else o.signal?.addEventListener('abort', this.#onAbort, { once: true });
    this.#schedule(0);
  }

  get state(): ConsumerState {
    return this.#state;
  }

  stats(): PartitionConsumerStats {
    return {
      state: this.#state,
      owned: [...this.#workers.keys()].sort((a, b) => a - b),
      revoking: [...this.#revoking].sort((a, b) => a - b),
      groupGeneration: this.#groupGeneration,
      ...this.#counters,
    };
  }

  /**
   * Stops reading, gives running handlers `timeoutMs` (default
   * `stopTimeoutMs`) before aborting them, commits what finished, then
   * leaves the group so its partitions move at once. Same promise when called again.
   */
  stop(options: { timeoutMs?: number } = {}): Promise<void> {
    this.#stopping ??= this.#drain(options.timeoutMs ?? this.#o.stopTimeoutMs);
    return this.#stopping;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  async #drain(timeoutMs: number): Promise<void> {
    this.#state = 'stopping';
    this.#o.signal?.removeEventListener('abort', this.#onAbort);
    this.#timer?.cancel();
    this.#timer = null;
    await this.#beating;
    const workers = [...this.#workers.values()];
    let timedOut = false;
    const timer = timeoutMs > 0 ? this.#timers.schedule(timeoutMs, () => (timedOut = true), { keepAlive: false }) : null;
    for (const w of workers) w.stop(timeoutMs);
    await Promise.all(workers.map((w) => w.done));
    timer?.cancel();
    this.#workers.clear();
    this.#revoking.clear();
    if (this.#joined) {
      try {
        await this.#source.leaveGroup(this.stream, this.group, this.memberId);
      } catch (error) {
        // The session ends by itself after sessionMs.
        this.#error('leave', null, error);
      }
      report(this, 'member-leave', this.#base());
    }
    this.#state = 'stopped';
    this.emit('drain', { ...this.#base(), aborted: timedOut ? workers.length : 0, timedOut });
    this.#resolveDone();
  }

  #base(): MemberJoinEvent {
    return { stream: this.stream, group: this.group, memberId: this.memberId };
  }

  #schedule(ms: number): void {
    if (this.#state !== 'running') return;
    this.#timer = this.#timers.schedule(ms, () => {
      this.#timer = null;
      this.#beating = this.#beat().finally(() => {
        this.#beating = null;
      });
    });
  }

  async #beat(): Promise<void> {
    let view: MemberView;
    try {
      if (this.#maxAttempts === null) this.#maxAttempts = (await this.#source.groupInfo(this.stream, this.group)).maxAttempts;
      view = await this.#source.heartbeat(this.stream, this.group, {
        memberId: this.memberId,
        sessionMs: this.#o.sessionMs,
        rebalanceTimeoutMs: this.#o.rebalanceTimeoutMs,
      });
      this.#heartbeatFailures = 0;
    } catch (error) {
      this.#error('heartbeat', null, error);
      if (isRheoError(error, 'closed')) {
        void this.stop({ timeoutMs: 0 });
        return;
      }
      this.#schedule(Math.min(this.#o.heartbeatMs, backoffDelay(++this.#heartbeatFailures, { initialMs: 100, maxMs: this.#o.heartbeatMs })));
      return;
    }
    if (this.#state !== 'running') return;
    if (!this.#joined) {
      this.#joined = true;
      report(this, 'member-join', this.#base());
    }
    this.#apply(view);
    this.#schedule(this.#o.heartbeatMs);
  }

  /** Starts, stops and hands over workers to match the member's view. */
  #apply(view: MemberView): void {
    this.#groupGeneration = view.groupGeneration;
    const owned = new Map(view.owned.map((o) => [o.partition, o]));
    const assigned: RebalanceEvent['assigned'][number][] = [];
    const revoked: number[] = [];
    const lost: number[] = [];
    for (const [p, worker] of this.#workers) {
      const now = owned.get(p);
      if (now && now.generation === worker.generation && !worker.fenced) continue;
      // Moved on without our release (timeout, session end, replay): fenced already.
      worker.lose();
      this.#workers.delete(p);
      this.#revoking.delete(p);
      lost.push(p);
      this.#counters.lost++;
    }
    const revokingNow = new Set(view.revoking);
    for (const o of view.owned) {
      if (this.#workers.has(o.partition)) continue;
      if (revokingNow.has(o.partition)) {
        // Given and taken back before we started: hand it over untouched.
        void this.#release(o.partition, o.generation);
        continue;
      }
      this.#workers.set(o.partition, this.#startWorker(o));
      assigned.push({ partition: o.partition, generation: o.generation });
    }
    for (const p of view.revoking) {
      const worker = this.#workers.get(p);
      if (!worker || this.#revoking.has(p)) continue;
      this.#revoking.add(p);
      revoked.push(p);
      worker.stop(Math.floor(this.#o.rebalanceTimeoutMs / 2));
      void worker.done.then(async () => {
        if (!worker.fenced) await this.#release(p, worker.generation);
        if (this.#workers.get(p) === worker) this.#workers.delete(p);
        this.#revoking.delete(p);
      });
    }
    if (assigned.length + revoked.length + lost.length > 0) {
      report(this, 'rebalance', {
        ...this.#base(),
        groupGeneration: view.groupGeneration,
        assigned,
        revoked,
        lost,
        owned: view.owned.map((o) => o.partition),
      });
    }
  }

  #startWorker(owned: { partition: number; generation: number; frontier: number }): PartitionWorker<T> {
    const counters = this.#counters;
    const worker: PartitionWorker<T> = new PartitionWorker<T>(this.#source, this.#o, owned, {
      timers: this.#timers,
      systemTimers: this.#systemTimers,
      slots: this.#slots,
      maxAttempts: this.#maxAttempts ?? 1,
      committer: this.#committer,
      report: {
        handled: () => void counters.handled++,
        retried: () => void counters.retried++,
        deadLettered: (n) => void (counters.deadLettered += n),
        committed: () => void counters.commits++,
        error: (op, error) => this.#error(op, owned.partition, error),
      },
    });
    // A worker that ended by itself (fenced) makes room for the next grant.
    // When the store fenced it (the partition moved on without our release:
    // a session that ended while paused, say) that is a loss like one seen
    // in a heartbeat's view, and counted and reported the same way; the
    // next view no longer holds the worker, so it would go unnoticed there.
    void worker.done.then(() => {
      if (!worker.fenced || this.#workers.get(owned.partition) !== worker) return;
      this.#workers.delete(owned.partition);
      this.#revoking.delete(owned.partition);
      if (worker.movedOn) this.#lostByFence(owned.partition);
    });
    return worker;
  }

  #lostByFence(partition: number): void {
    this.#counters.lost++;
    report(this, 'rebalance', {
      ...this.#base(),
      groupGeneration: this.#groupGeneration,
      assigned: [],
      revoked: [],
      lost: [partition],
      owned: [...this.#workers.keys()].sort((a, b) => a - b),
    });
  }

  async #release(partition: number, generation: number): Promise<void> {
    try {
      const [result] = await this.#source.releasePartitions([
        { stream: this.stream, group: this.group, partition, memberId: this.memberId, generation },
      ]);
      // Stale: it moved already (rebalance timeout); nothing to give back.
      if (result && !result.ok && !isRheoError(result.error, 'stale_generation')) this.#error('release', partition, result.error);
    } catch (error) {
      // It moves anyway once the rebalance timeout has passed.
      this.#error('release', partition, error);
    }
  }

  #error(op: OwnershipErrorEvent['op'], partition: number | null, error: unknown): void {
    this.#counters.errors++;
    if (this.listenerCount('ownership-error') > 0) {
      this.emit('ownership-error', { ...this.#base(), op, partition, error: error as RheoError });
    }
  }
}
