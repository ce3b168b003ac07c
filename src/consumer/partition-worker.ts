import { isRheoError, type RheoError } from '../core/errors.js';
import type { JsonValue, RheoEvent } from '../core/types.js';
import { backoffDelay } from '../runtime/backoff.js';
import { sleep, type Timers } from '../runtime/timers.js';
import { AppendListener } from '../runtime/append-wait.js';
import { isThenable } from '../runtime/lease-outcome.js';
import { HandlerRun } from '../runtime/handler-run.js';
import { RenewingSet } from '../runtime/renewing-map.js';
import { CONSUMER_READING } from './handler-run.js';
import type { Slots } from '../runtime/slots.js';
import type { Coalescer } from '../core/coalescer.js';
import type { CommitInput } from '../core/ownership-arguments.js';
import type { SettleResult } from '../core/types.js';
import type { Settlement } from './handler-outcome.js';
import type { PartitionHandlerContext, PartitionSource, ResolvedPartitionOptions } from './partition-options.js';

/** What the worker tells its consumer, for counters and events. */
export interface WorkerReport {
  handled(): void;
  retried(): void;
  deadLettered(count: number): void;
  committed(): void;
  error(kind: 'read' | 'commit', error: RheoError): void;
}

/** How one event ended in this batch. */
type EventEnd = { kind: 'done' } | { kind: 'dead'; attempt: number; reason: string } | { kind: 'aborted' };
const DONE: EventEnd = { kind: 'done' };
const ABORTED: EventEnd = { kind: 'aborted' };
/** What a handler run that the worker aborted counts as (it is never settled: the event is not done). */
const ABORTED_RUN: Settlement = { kind: 'nack', reason: 'aborted', delayMs: 0, failure: null };

/**
 * One owned partition: reads it in sequence order from the committed
 * frontier, runs the handler on each event (one at a time, or one at a time
 * per key), and commits once per batch: the contiguous prefix of the batch
 * whose events are done or dead, with those dead letters, in one write.
 *
 * Ends when it is stopped (revocation, `stop()`) after committing what it
 * finished, or at once when fenced (a read or commit answered
 * `stale_generation`: the partition has moved on, its work is redone there).
 */
export class PartitionWorker<T extends JsonValue> {
  readonly partition: number;
  readonly generation: number;
  readonly done: Promise<void>;
  /** Set once a call came back `stale_generation` (or `closed`), or the consumer gave the partition up (`lose()`). */
  fenced = false;
  /**
   * Set when the store itself said the partition moved on (`stale_generation`
   * on a read, a commit or a transaction): the consumer counts that as a loss.
   * Not set by `closed` (rheo shutting down moves nothing) nor by `lose()`
   * (the consumer counted that loss when it called it).
   */
  movedOn = false;
  #position: number;
  #stopping = false;
  readonly #abort = new AbortController();
  /** Ends idle waits and backoffs early when the worker stops. */
  readonly #wake = new AbortController();
  /** The store's wait for an append, registered before a read that may come back empty (runtime/append-wait.ts). */
  readonly #appends: AppendListener;
  /** Whether the idle wait and the read after it go to the store as one step (#idleRead). */
  readonly #blocking: boolean;
  readonly #source: PartitionSource;
  readonly #o: ResolvedPartitionOptions<T>;
  readonly #timers: Timers;
  readonly #slots: Slots;
  readonly #maxAttempts: number;
  readonly #report: WorkerReport;
  readonly #committer: Coalescer<CommitInput, SettleResult>;
  /** Asynchronous handler runs in progress, ended at once when the worker aborts. */
  readonly #running = new RenewingSet<HandlerRun<Settlement>>();

  constructor(
    source: PartitionSource,
    options: ResolvedPartitionOptions<T>,
    owned: { partition: number; generation: number; frontier: number },
    env: {
      timers: Timers;
      /** Whether `timers` are the system's (not the caller's): a blocking wait is timed by the store. */
      systemTimers?: boolean;
      slots: Slots;
      maxAttempts: number;
      report: WorkerReport;
      committer: Coalescer<CommitInput, SettleResult>;
    },
  ) {
    this.#source = source;
    this.#o = options;
    this.partition = owned.partition;
    this.generation = owned.generation;
    this.#position = owned.frontier;
    this.#timers = env.timers;
    this.#slots = env.slots;
    this.#maxAttempts = env.maxAttempts;
    this.#report = env.report;
    this.#committer = env.committer;
    const backend = source.backend;
    const wait = backend.capabilities.notifications && backend.waitForAppend ? backend.waitForAppend.bind(backend) : null;
    this.#blocking = backend.capabilities.blockingFetch && env.systemTimers === true;
    this.#appends = new AppendListener(wait, options.stream, options.pollMs, options.maxPollMs, env.timers, this.#wake.signal);
    // An abort from the worker (revocation past its grace, lost partition,
    // stop timeout) ends every run at once; what a handler still does is ignored.
    this.#abort.signal.addEventListener(
      'abort',
      () => {
        for (const run of this.#running.values()) run.interrupt(ABORTED_RUN, this.#abort.signal.reason);
      },
      { once: true },
    );
    this.done = this.#loop();
  }

  get fence() {
    return { stream: this.#o.stream, group: this.#o.group, partition: this.partition, memberId: this.#o.memberId, generation: this.generation };
  }

  /** Highest sequence committed by this worker (or the frontier it started from). */
  get position(): number {
    return this.#position;
  }

  /**
   * Stop after what is running: no new batch is read; handlers of the batch
   * get `graceMs` to finish, then their signals are aborted; the finished
   * prefix is committed. Called again (a revoked partition, then the
   * consumer's `stop()`), the earliest deadline wins: a later call can cut
   * the grace short, never extend it.
   */
  stop(graceMs: number): void {
    if (!this.#stopping) {
      this.#stopping = true;
      this.#wake.abort();
    }
    if (this.#abort.signal.aborted) return;
    if (graceMs <= 0) return this.#abort.abort(revokedError(this.partition));
    const timer = this.#timers.schedule(graceMs, () => this.#abort.abort(revokedError(this.partition)), { keepAlive: false });
    void this.done.finally(() => timer.cancel());
  }

  /**
   * The partition is no longer ours: abort everything, commit nothing, also
   * when it was being stopped with a grace (a revoked partition lost before
   * its release).
   */
  lose(): void {
    this.fenced = true;
    this.stop(0);
  }

  /**
   * Pipelined: while a batch is handled the next one is already being read,
   * and its commit runs while the next batch is handled (commits of one
   * partition still land in order: each waits for the one before). A read
   * and a commit are each a round trip plus, for the commit, a durable
   * write; overlapping them with the handlers is what the raw
   * read-a-range-update-a-cursor ceiling does not have to pay for.
   */
  async #loop(): Promise<void> {
    let committing: Promise<boolean> = Promise.resolve(true);
    try {
      let failures = 0;
      let after = this.#position;
      let ahead: Promise<RheoEvent<T>[] | { error: unknown }> | null = null;
      while (!this.#stopping) {
        // Listen as soon as a read that may come back empty is issued (before
        // anything else can run): a notification that arrives while the read
        // is on its way would otherwise find no waiter and the append would
        // wait out a whole pollMs. The read leaves first: a woken worker's
        // read does not wait for the registration. A read-ahead follows a
        // full batch and goes without. A wait still out after a read that
        // found events serves the next idle wait.
        const reading = ahead ?? this.#read(after);
        if (!ahead) this.#appends.listen();
        const read = await reading;
        ahead = null;
        if (!Array.isArray(read)) {
          if (this.#fencedBy(read.error)) return;
          this.#report.error('read', read.error as RheoError);
          await sleep(this.#timers, backoffDelay(++failures, this.#o.retryBackoff), this.#wake.signal);
          continue;
        }
        failures = 0;
        const events = read;
        if (events.length > 0) this.#appends.found();
        if (events.length === 0) {
          // Nothing new: let the commit in flight land before waiting.
          if (!(await committing)) return;
          // Stopped while reading: a wait registered now would not see the abort that already happened.
          if (!this.#stopping) {
            // Read in the same step as the wait, where the store can: the next turn takes it as a read-ahead.
            const found = await this.#idleRead(after);
            if (found !== null) ahead = Promise.resolve(found);
          }
          continue;
        }
        const last = events[events.length - 1]!.sequence;
        if (!this.#stopping && events.length === this.#o.batchSize) ahead = this.#read(last);
        const ends = await this.#runBatch(events);
        let upTo = after;
        const deadLetters: Array<{ sequence: number; attempt: number; reason: string }> = [];
        for (let i = 0; i < events.length; i++) {
          const end = ends[i]!;
          if (end.kind === 'aborted') break;
          upTo = events[i]!.sequence;
          if (end.kind === 'dead') deadLetters.push({ sequence: upTo, attempt: end.attempt, reason: end.reason });
        }
        if (!(await committing) || this.fenced) return;
        // With transaction: true every event's offset is already committed (in its handler's transaction, or alone for a dead letter).
        if (upTo > after && !this.#o.transaction) committing = this.#commit(upTo, deadLetters);
        if (upTo < last) return; // aborted part-way: what finished is committed below
        after = last;
      }
    } finally {
      // A wait still out ends with the worker (its timer would keep the process up for pollMs).
      this.#wake.abort();
      await committing;
    }
  }

  /**
   * The idle wait and the read after it. A store that can wait for the
   * append itself (capability `blockingFetch`) gets the read before the
   * append lands and runs it as the append does; its answer (events, or the
   * error to handle) is the next read. `null` when the usual idle wait ran
   * instead: the store could not wait so, or the worker runs on timers of the
   * caller's (a blocking wait is timed by the store, not by them).
   */
  #idleRead(after: number): Promise<RheoEvent<T>[] | { error: unknown } | null> {
    const backend = this.#source.backend;
    if (!this.#blocking || !backend.readOwnedAfterAppend) return this.#appends.idle().then(() => null);
    const read = backend.readOwnedAfterAppend.bind(backend);
    return this.#appends.idleFetch<RheoEvent<T>[] | { error: unknown }>(async (ms, signal) => {
      try {
        const got = await read(this.fence, after, this.#o.batchSize, this.#source.defaults.maxFetchBytes, ms, signal);
        return got && { found: got.events as RheoEvent<T>[], appended: got.appended };
      } catch (error) {
        return { found: { error }, appended: false };
      }
    });
  }

  /** A read that never rejects: the events, or the error to handle. */
  #read(after: number): Promise<RheoEvent<T>[] | { error: unknown }> {
    return this.#source.readOwned<T>(this.fence, { after, limit: this.#o.batchSize }).then(
      (events) => events,
      (error: unknown) => ({ error }),
    );
  }

  /** Retries until the commit lands, the worker is fenced, or it is lost. `false` when fenced. */
  async #commit(upTo: number, deadLetters: Array<{ sequence: number; attempt: number; reason: string }>): Promise<boolean> {
    for (let failures = 1; ; failures++) {
      try {
        const result = await this.#committer.submit({ ...this.fence, upTo, deadLetters });
        if (result.ok) {
          this.#position = upTo;
          this.#report.committed();
          if (deadLetters.length > 0) this.#report.deadLettered(deadLetters.length);
          return true;
        }
        if (this.#fencedBy(result.error)) return false;
        this.#report.error('commit', result.error);
      } catch (error) {
        if (this.#fencedBy(error)) return false;
        this.#report.error('commit', error as RheoError);
      }
      // A commit is idempotent (never backwards; dead letters once), so an
      // ambiguous or failed one is simply sent again. Once the worker has
      // been told to give up (grace over), a few tries are all it gets: the
      // next owner redoes what was not committed.
      if (this.fenced || (this.#abort.signal.aborted && failures >= 3)) return false;
      await sleep(this.#timers, backoffDelay(failures, this.#o.retryBackoff));
    }
  }

  #fencedBy(error: unknown): boolean {
    const moved = isRheoError(error, 'stale_generation');
    if (!moved && !isRheoError(error, 'closed')) return false;
    if (moved && !this.fenced) this.movedOn = true;
    this.fenced = true;
    this.#abort.abort(error);
    return true;
  }

  /** Runs a batch: in order, or in per-key chains; resolves with how each event ended. */
  async #runBatch(events: RheoEvent<T>[]): Promise<EventEnd[]> {
    const ends: EventEnd[] = new Array<EventEnd>(events.length);
    if (!this.#o.byKey) {
      for (let i = 0; i < events.length; i++) {
        ends[i] = await this.#runEvent(events[i]!);
        if (ends[i]!.kind === 'aborted') {
          ends.fill(ABORTED, i + 1);
          break;
        }
      }
      return ends;
    }
    const chains = new Map<string, number[]>();
    events.forEach((e, i) => {
      const key = e.key === null ? `\u0000${e.sequence}` : `k:${e.key}`;
      const chain = chains.get(key);
      if (chain) chain.push(i);
      else chains.set(key, [i]);
    });
    await Promise.all(
      [...chains.values()].map(async (chain) => {
        for (let k = 0; k < chain.length; k++) {
          const i = chain[k]!;
          ends[i] = await this.#runEvent(events[i]!);
          if (ends[i]!.kind === 'aborted') {
            for (const j of chain.slice(k + 1)) ends[j] = ABORTED;
            return;
          }
        }
      }),
    );
    return ends;
  }

  /** Runs one event until it is done, dead, or aborted: retries with backoff in between. */
  async #runEvent(event: RheoEvent<T>): Promise<EventEnd> {
    for (let attempt = 1; ; attempt++) {
      if (this.#abort.signal.aborted) return ABORTED;
      if (!this.#slots.tryTake()) await this.#slots.take();
      let settlement: Settlement;
      try {
        if (this.#abort.signal.aborted) return ABORTED;
        const run = this.#invoke(event, attempt);
        settlement = run instanceof Promise ? await run : run;
      } finally {
        this.#slots.give();
      }
      this.#report.handled();
      if (this.#abort.signal.aborted) return ABORTED;
      if (settlement.kind === 'ack') return DONE;
      if (settlement.kind === 'reject') return { kind: 'dead', attempt, reason: settlement.reason };
      if (settlement.kind === 'committed') {
        // With transaction: true the offset (and a reject's dead letter)
        // committed with the handler's writes. Without it this only comes
        // from a handler that returned another consumer's transactional outcome.
        if (this.#o.transaction) return this.#committedInTransaction(event.sequence, settlement.settle === 'reject');
        if (settlement.settle === 'ack') return DONE;
        return { kind: 'dead', attempt, reason: settlement.reason ?? 'rejected' };
      }
      if (settlement.kind === 'uncommitted') {
        // The partition moved on: the writes rolled back, the new owner redoes the event.
        if (this.#fencedBy(settlement.error)) return ABORTED;
        if (this.#o.onFailure === 'dead-letter' && attempt >= this.#maxAttempts) return this.#dead(event.sequence, attempt, settlement.error.message);
        this.#report.retried();
        await sleep(this.#timers, backoffDelay(attempt, this.#o.retryBackoff), this.#abort.signal);
        continue;
      }
      if (this.#o.onFailure === 'dead-letter' && attempt >= this.#maxAttempts) return this.#dead(event.sequence, attempt, settlement.reason);
      this.#report.retried();
      const delayMs = settlement.delayMs > 0 ? settlement.delayMs : backoffDelay(attempt, this.#o.retryBackoff);
      await sleep(this.#timers, delayMs, this.#abort.signal);
    }
  }

  #committedInTransaction(sequence: number, rejected: boolean): EventEnd {
    this.#position = sequence;
    this.#report.committed();
    if (rejected) this.#report.deadLettered(1);
    return DONE;
  }

  /**
   * An event that failed for good. Batched with the next commit normally;
   * with transaction: true committed alone at once, since the next event's
   * transaction moves the frontier past it (and a dead letter is only
   * written inside `(frontier, upTo]`).
   */
  async #dead(sequence: number, attempt: number, reason: string): Promise<EventEnd> {
    if (!this.#o.transaction) return { kind: 'dead', attempt, reason };
    return (await this.#commit(sequence, [{ sequence, attempt, reason }])) ? DONE : ABORTED;
  }

  /**
   * One handler call on the runtime's engine (runtime/handler-run.ts): its
   * own signal, aborted by the worker's, and the optional timeout. Never
   * rejects; a handler that returns synchronously is settled synchronously,
   * without a promise or a timer.
   */
  #invoke(event: RheoEvent<T>, attempt: number): Settlement | Promise<Settlement> {
    const parent = this.#abort.signal;
    const run = new HandlerRun<Settlement>(CONSUMER_READING);
    const context: PartitionHandlerContext = {
      attempt,
      partition: this.partition,
      generation: this.generation,
      memberId: this.#o.memberId,
      get signal() {
        if (parent.aborted) run.abortSignal(parent.reason);
        return run.signal;
      },
    };
    const handler = this.#o.handler;
    const result = run.run(() => handler(event, context), this.#o.handlerTimeoutMs, this.#timers);
    if (!isThenable(result)) return result;
    // Still running: the worker's abort ends it at once (its answer is then ignored).
    if (parent.aborted) run.interrupt(ABORTED_RUN, parent.reason);
    else {
      this.#running.add(run);
      void result.then(() => this.#running.delete(run));
    }
    return result;
  }
}

function revokedError(partition: number): Error {
  const error = new Error(`partition ${partition} is being handed over: stop work on it`);
  error.name = 'AbortError';
  return error;
}
