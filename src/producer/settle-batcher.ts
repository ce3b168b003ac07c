import { RheoError } from '../core/errors.js';
import type { SettleResult } from '../core/types.js';
import type { SettleRequest } from '../core/types.js';
import type { ScheduledTimer, Timers } from '../runtime/timers.js';
import { RenewingSet } from '../runtime/renewing-map.js';

/**
 * The one call the batcher needs: mixed settles in one backend round trip.
 * `Op` is whatever the owner queues (a `SettleRequest` by default; the
 * producer queues its validated store op with the lease it came from).
 */
export type SettleManyFn<Op = SettleRequest> = (ops: Op[]) => Promise<SettleResult[]>;

/**
 * Told about every op's answer (`null` on success) before its promise
 * settles, so the owner's per-op bookkeeping costs no promise of its own. A
 * throw rejects that op's promise with what was thrown.
 */
export type SettledHook<Op = SettleRequest> = (op: Op, error: RheoError | null) => void;

/**
 * Which failed settles go out again. `delayMs` gets the op, its error and how
 * many times it has failed (1 on the first failure), and answers the wait
 * before the next try, or `null` to give up and answer the caller with `error`.
 */
export interface SettleRetry<Op = SettleRequest> {
  timers: Timers;
  delayMs(op: Op, error: RheoError, failures: number): number | null;
}

/**
 * Hears one op's answer (`null` on success). It must not throw: it runs in
 * the loop that answers the rest of the call's ops.
 */
export type SettleDone<Op = SettleRequest> = (op: Op, error: RheoError | null) => void;

/**
 * Lets a batch that is still small at the end of its turn wait for more
 * settles known to be on their way (handlers still running). With handlers
 * that each take a while (I/O), they finish one or two per turn, and every
 * settle call carried 7-9 of them, one commit each: a competing consumer then
 * cost the server twice partition mode's CPU per event. Settles issued in one
 * turn still go together at once; a small batch goes at the end of a later
 * turn once it reaches `upTo` or `when()` says no more are coming, and after
 * `ms` at the latest (a real timer, like the turn's `setImmediate`, whatever
 * clock the owner runs on).
 */
export interface SettleLinger {
  ms: number;
  upTo: number;
  when(): boolean;
}

interface Pending<Op> {
  op: Op;
  done: SettleDone<Op>;
  failures: number;
}

interface Waiting<Op> {
  pending: Pending<Op>;
  timer: ScheduledTimer;
  /** Resolves when the op is back in the queue. */
  requeued: Promise<void>;
  requeue: () => void;
}

/**
 * Coalesces settles issued close together into one `settleMany` call, the
 * way DataLoader coalesces loads: every settle requested during the current
 * turn of the event loop (all microtasks and I/O callbacks before the next
 * `setImmediate`) goes out in one batch, and a batch also goes out at once when
 * it reaches `maxBatch`. While `maxConcurrentCalls` calls are on their way,
 * new settles wait and join the next call, so a slow backend gets fewer,
 * larger calls instead of a queue of small ones (measured on PostgreSQL with
 * 10 concurrent handlers: 2000 calls of 10 ops became a few hundred larger ones).
 * A pipeline that acks 100 leases therefore makes a handful of round trips, not 100.
 *
 * With a `retry` policy, an op that failed (alone or with its whole call) is
 * queued again after the delay the policy gives, and its caller is answered
 * only when it succeeds or the policy gives up; see `RheoProducer` for the
 * policy (only `backend_unavailable`, which means nothing was written).
 */
export class SettleBatcher<Op = SettleRequest> {
  readonly #settleMany: SettleManyFn<Op>;
  readonly #maxBatch: number;
  readonly #maxConcurrentCalls: number;
  readonly #onSettled: SettledHook<Op> | null;
  readonly #retry: SettleRetry<Op> | null;
  #queue: Array<Pending<Op>> = [];
  #scheduled: NodeJS.Immediate | null = null;
  #lingering: NodeJS.Timeout | null = null;
  readonly #linger: SettleLinger | null;
  #inFlight = new RenewingSet<Promise<void>>();
  readonly #waiting = new Set<Waiting<Op>>();
  #lastTries = false;

  constructor(
    settleMany: SettleManyFn<Op>,
    maxBatch = 500,
    maxConcurrentCalls = 2,
    onSettled: SettledHook<Op> | null = null,
    retry: SettleRetry<Op> | null = null,
    linger: SettleLinger | null = null,
  ) {
    this.#linger = linger;
    this.#settleMany = settleMany;
    this.#maxBatch = maxBatch;
    this.#maxConcurrentCalls = maxConcurrentCalls;
    this.#onSettled = onSettled;
    this.#retry = retry;
  }

  /** Settles queued but not yet sent. */
  get queuedCount(): number {
    return this.#queue.length;
  }

  /** Failed settles waiting for their retry delay. */
  get retryingCount(): number {
    return this.#waiting.size;
  }

  /** Resolves when the settle is durable; rejects with the `RheoError` of this op (or of the whole call). */
  settle(op: Op): Promise<void> {
    return new Promise<void>((resolve, reject) => this.enqueue(op, (_, error) => (error ? reject(error) : resolve())));
  }

  /**
   * `settle` without a promise: `done` hears the answer. The consumer's hot
   * path passes one shared function for every op, so a settle costs no
   * promise or closure of its own (a promise chain per ack was the largest
   * allocation of a competing-mode drain).
   */
  enqueue(op: Op, done: SettleDone<Op>): void {
    this.#queue.push({ op, done, failures: 0 });
    if (this.#queue.length >= this.#maxBatch) this.flush();
    else this.#scheduled ??= setImmediate(this.#turnEnded);
  }

  /** The turn's settles are in: they go now, or (with a linger, while the batch is small and more are coming) a little later. */
  readonly #turnEnded = (): void => {
    this.#scheduled = null;
    const linger = this.#linger;
    if (linger !== null && this.#queue.length < linger.upTo && linger.when()) {
      this.#lingering ??= setTimeout(() => this.flush(), linger.ms);
      return;
    }
    this.flush();
  };

  /** Sends what is queued, as far as `maxConcurrentCalls` allows; the rest goes when a call returns. */
  flush(): void {
    if (this.#scheduled) {
      clearImmediate(this.#scheduled);
      this.#scheduled = null;
    }
    if (this.#lingering) {
      clearTimeout(this.#lingering);
      this.#lingering = null;
    }
    while (this.#queue.length > 0 && this.#inFlight.size < this.#maxConcurrentCalls) {
      const batch = this.#queue.splice(0, this.#maxBatch);
      const sent = this.#send(batch);
      this.#inFlight.add(sent);
      void sent.finally(() => {
        this.#inFlight.delete(sent);
        if (this.#queue.length > 0) this.flush();
      });
    }
  }

  /** Flushes and resolves when every settle sent so far has an answer (retries included). */
  async idle(): Promise<void> {
    this.flush();
    while (this.#inFlight.size > 0 || this.#queue.length > 0 || this.#waiting.size > 0) {
      // Only what can still change: an empty allSettled resolves at once, and
      // racing it while a retry waits spun this loop on microtasks, so the
      // retry's timer never fired.
      const changes: Array<Promise<unknown>> = [...this.#waiting].map((w) => w.requeued);
      if (this.#inFlight.size > 0) changes.push(Promise.allSettled(this.#inFlight.values()));
      await Promise.race(changes);
      this.flush();
    }
  }

  /**
   * Sends every settle waiting for a retry now, and answers each failure from
   * here on without retrying: for a close, which should not wait out backoffs.
   */
  stopRetrying(): void {
    this.#lastTries = true;
    for (const waiting of [...this.#waiting]) waiting.requeue();
  }

  async #send(batch: Array<Pending<Op>>): Promise<void> {
    let results: SettleResult[];
    try {
      results = await this.#settleMany(batch.map((p) => p.op));
    } catch (error) {
      const failure =
        error instanceof RheoError
          ? error
          : new RheoError('internal', `settle failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
      for (const p of batch) this.#failed(p, failure);
      return;
    }
    for (let i = 0; i < batch.length; i++) {
      const result = results[i];
      if (result?.ok) this.#answer(batch[i]!, null);
      else this.#failed(batch[i]!, result?.error ?? new RheoError('internal', 'settleMany returned too few results'));
    }
  }

  #failed(p: Pending<Op>, error: RheoError): void {
    const delayMs = this.#retry && !this.#lastTries ? this.#retry.delayMs(p.op, error, p.failures + 1) : null;
    if (delayMs === null || this.#retry === null) return this.#answer(p, error);
    p.failures++;
    let requeue!: () => void;
    const requeued = new Promise<void>((resolve) => {
      requeue = () => {
        if (!this.#waiting.delete(waiting)) return;
        waiting.timer.cancel();
        this.#queue.push(p);
        resolve();
        this.#scheduled ??= setImmediate(this.#turnEnded);
      };
    });
    const waiting: Waiting<Op> = { pending: p, timer: this.#retry.timers.schedule(delayMs, () => requeue()), requeued, requeue };
    this.#waiting.add(waiting);
  }

  #answer(p: Pending<Op>, error: RheoError | null): void {
    let answer = error;
    try {
      this.#onSettled?.(p.op, error);
    } catch (thrown) {
      answer = thrown as RheoError;
    }
    p.done(p.op, answer);
  }
}
