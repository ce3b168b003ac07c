import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { FetchRequest, SettleOp } from '../core/backend.js';
import { requireCapability } from '../core/capabilities.js';
import { RheoError, isRheoError } from '../core/errors.js';
import { log, type Logger } from '../core/logger.js';
import type { JsonValue, Lease, SettleRequest, SettleResult } from '../core/types.js';
import { normalizeReason } from '../core/arguments.js';
import { leaseRefOf, settleOpFor } from '../runtime/lease-ops.js';
import { report } from '../observability/diagnostics.js';
import { emittedLeaseInfo, leaseInfo, type ConsumerEventMap } from '../observability/lease-events.js';
import { producerReporter } from '../observability/producer-diagnostics.js';
import { telemetryOf, type ProcessScope, type RheoTelemetry } from '../observability/telemetry.js';
import { InflightTracker } from '../producer/inflight-tracker.js';
import { SettleBatcher } from '../producer/settle-batcher.js';
import { backoffDelay, type BackoffOptions } from '../runtime/backoff.js';
import { isThenable } from '../runtime/lease-outcome.js';
import { KeyQueue } from '../runtime/key-queue.js';
import { RenewingMap } from '../runtime/renewing-map.js';
import { Slots } from '../runtime/slots.js';
import { WorkQueue } from '../runtime/work-queue.js';
import type { LeaseSource } from '../runtime/sources.js';
import { sleep, systemTimers, type Timers } from '../runtime/timers.js';
import { AppendListener, CANCELLED, idleClaim, type AppendWaitFn } from '../runtime/append-wait.js';
import { resolveConsumeOptions, resolveStopTimeout, type ResolvedConsumeOptions } from './consume-options.js';
import type { ConsumeOptions, ConsumerHandler, ConsumerState, ConsumerStats, StopOptions } from './consumer-types.js';
import { HandlerRun, type RunResult } from './handler-run.js';
import { afterAck, asSettleError, carryOut, releaseUnstarted, type SettleCounters } from './settle-policy.js';
import { transactionalHandler } from './transactional-handler.js';

/*
 * Longer than the house's 400 lines on purpose: this is the whole competing
 * path (fetch → run → settle, renewal and drain) in one place, the way
 * partition-worker.ts is for partition ownership. Its parts are the runtime's
 * (KeyQueue, HandlerRun, InflightTracker, SettleBatcher, settle-policy).
 */

/** What a consumer needs from rheo: the facade's lease source (runtime/sources.ts), never a concrete backend. */
export type ConsumerSource = LeaseSource;

/**
 * Starts consuming and returns the handle at once; see {@link Consumer}.
 * Options are validated synchronously (`invalid_argument`).
 */
export function createConsumer<T extends JsonValue = JsonValue>(source: ConsumerSource, options: ConsumeOptions<T>): Consumer<T> {
  return new Consumer<T>(source, options);
}

/** The longest a small batch of settles waits for more while handlers run (see SettleLinger). */
const SETTLE_LINGER_MS = 20;

/** Emits nothing in process: the consumer's own events carry the `leaseId`, the reporter only publishes and logs. */
const UNHEARD = { emit: (): boolean => false, listenerCount: (): number => 0 };

/**
 * The one-call runtime of competing consumers: one loop that claims leases
 * (at most `maxDemand` held, refilled once `minDemand` slots are free, in
 * claims of at most `maxDemand` split by the store's `claimsInFlight`), runs
 * the handler on each (`concurrency` at once, one per key with `orderBy`),
 * and settles by the handler's outcome with the policy of `settle-policy.ts`;
 * settles issued close together go to the store in one call, and every held
 * lease is renewed on one timer. The store is reached through the facade's
 * `LeaseSource`: requests are built here from validated options and from
 * the leases the store handed out, so nothing is validated twice.
 *
 * Events (typed, and published on `node:diagnostics_channel` as `rheo:<name>`):
 * `lease`, `ack`, `retry`, `dead-letter`, `lease-lost`, `settle-error`,
 * `fetch-error`, `handler-error`, `drain`. Each happening is published once;
 * the lease-level events the consumer emits also carry the `leaseId` (never
 * published). `renew-error` is emitted only. None is `'error'`: a failure of
 * a fetch, a renewal, a settle or a handler never stops the consumer.
 */
export class Consumer<T extends JsonValue = JsonValue> extends EventEmitter<ConsumerEventMap> {
  readonly stream: string;
  readonly group: string;
  readonly consumerId: string;
  readonly concurrency: number;
  readonly maxDemand: number;
  /** Resolves once the consumer has stopped (after `stop()`, the `signal`, or rheo's close); rejects if its loop broke (a listener threw). */
  readonly done: Promise<void>;

  readonly #source: ConsumerSource;
  readonly #options: ResolvedConsumeOptions<T>;
  readonly #handler: ConsumerHandler<T>;
  readonly #minDemand: number;
  /** The largest claim: `maxDemand` split into the store's `claimsInFlight`. */
  readonly #claimLimit: number;
  readonly #partitions: number[] | null;
  readonly #fetchBackoff: BackoffOptions;
  readonly #timers: Timers;
  /** Whether the idle wait and the claim after it go to the store as one step (runtime/append-wait.ts, idleClaim). */
  readonly #blocking: boolean;
  readonly #logger: Logger;
  readonly #telemetry: RheoTelemetry | null;
  readonly #report: ReturnType<typeof producerReporter>;
  /** Every lease held (waiting, running or settling), renewed on one timer. */
  readonly #held: InflightTracker<T>;
  readonly #settles: SettleBatcher;
  /** Claimed and not started: leaseId → lease (parked ones included). */
  readonly #waiting = new RenewingMap<string, Lease<T>>();
  /** Ready to start, in claim order. */
  readonly #ready = new WorkQueue<Lease<T>>();
  readonly #keys = new KeyQueue<Lease<T>>();
  /** leaseId → its ordering key, while the lease holds or waits for it. */
  readonly #keyOf = new RenewingMap<string, string>();
  readonly #runs = new RenewingMap<string, HandlerRun<T>>();
  /** OpenTelemetry process/settle spans of running and settling leases (only with telemetry). */
  readonly #scopes = new RenewingMap<string, ProcessScope>();
  /** One per running handler; a run frees its slot when it ends, before its settle. */
  readonly #slots: Slots;
  #pumping = false;
  /** Settles and releases under way; the drain waits for zero. */
  #settlingCount = 0;
  #settledWaiters: Array<() => void> = [];
  /** Wakes the drain when the last run ends and no fetch is on its way. */
  #idleWaiters: Array<() => void> = [];
  readonly #counters: SettleCounters & { handled: number; fetchErrors: number; released: number } = {
    handled: 0,
    acked: 0,
    retried: 0,
    deadLettered: 0,
    lost: 0,
    settleErrors: 0,
    fetchErrors: 0,
    released: 0,
  };
  #handlersRunning = 0;
  readonly #gauge = {
    started: (): void => void this.#handlersRunning++,
    settled: (): void => void this.#handlersRunning--,
  };
  #fetching: Promise<void> | null = null;
  #kickQueued = false;
  /** The store's wait for an append, registered with each claim (runtime/append-wait.ts). */
  readonly #appends: AppendListener;
  #fetchFailures = 0;
  #backoffMs = 0;
  /** Aborted on stop: cuts poll and backoff waits short. */
  readonly #halt = new AbortController();
  #state: ConsumerState = 'running';
  #stopping: Promise<void> | null = null;
  #resolveDone!: () => void;
  #rejectDone!: (error: unknown) => void;
  /** What broke the loop: a throw that escaped (an event listener's); the consumer stops and `done` rejects with it. */
  #broken: { error: unknown } | null = null;
  readonly #untrack: () => void;
  readonly #onAbort = (): void => void this.stop().catch(() => undefined);
  /** What settle-policy settles through: the batcher, which confirms each lease once answered. */
  readonly #settler = {
    ack: (lease: Lease<T>): Promise<void> => this.#settle({ kind: 'ack', lease }),
    nack: (lease: Lease<T>, reason?: string | null, options: { delayMs?: number } = {}): Promise<void> =>
      this.#settle({ kind: 'nack', lease, reason, delayMs: options.delayMs }),
    reject: (lease: Lease<T>, reason?: string | null): Promise<void> => this.#settle({ kind: 'reject', lease, reason }),
    release: (lease: Lease<T>): Promise<void> => this.#settle({ kind: 'release', lease }),
    confirm: (leaseId: string): boolean => this.#confirm(leaseId),
  };

  constructor(source: ConsumerSource, options: ConsumeOptions<T>) {
    super();
    const o = resolveConsumeOptions(options, source.defaults, () => randomBytes(6).toString('hex'));
    if (o.transaction) requireCapability(source.backend, 'transactions', 'consume({ transaction: true })');
    this.#source = source;
    this.#options = o;
    this.#logger = source.logger;
    this.#telemetry = telemetryOf(source);
    this.#handler = o.transaction ? transactionalHandler(source.backend, o.handler) : o.handler;
    this.stream = o.stream;
    this.group = o.group;
    this.consumerId = o.consumerId;
    this.concurrency = o.concurrency;
    this.maxDemand = o.maxDemand;
    this.#slots = new Slots(o.concurrency);
    this.#minDemand = o.minDemand ?? Math.max(1, Math.floor(o.maxDemand / 4));
    this.#claimLimit = Math.ceil(o.maxDemand / Math.max(1, Math.floor(source.backend.claimsInFlight ?? 1)));
    this.#partitions = o.partitions ? [...new Set(o.partitions)].sort((a, b) => a - b) : null;
    this.#fetchBackoff = o.fetchBackoff ?? { initialMs: Math.min(o.pollMs, 100), maxMs: 30_000 };
    this.#timers = o.timers ?? systemTimers;
    this.#blocking = source.capabilities.blockingFetch && o.timers === undefined;
    const wait: AppendWaitFn | null = source.capabilities.notifications ? (stream, ms, signal) => source.waitForAppend(stream, ms, signal) : null;
    this.#appends = new AppendListener(wait, o.stream, o.pollMs, o.maxPollMs, this.#timers, this.#halt.signal, () => source.clock.now());
    this.#report = producerReporter(UNHEARD, this.#logger);
    this.#held = new InflightTracker<T>({
      leaseMs: o.leaseMs,
      timers: this.#timers,
      renewMany: (leases) => this.#renew(leases),
      onLost: (lease, error) => {
        this.#report.lost(lease, error);
        this.#lost(lease, error);
        this.#freed();
      },
      onRenewError: (error, leases) => {
        // A closed facade will never renew again: stop rather than retry forever.
        if (error.code === 'closed') void this.#held.stop();
        this.#report.renewFailed({ stream: this.stream, group: this.group, consumerId: this.consumerId, error, leases: leases.length });
        if (this.listenerCount('renew-error') > 0) {
          this.emit('renew-error', { ...this.#base(), error, leaseIds: leases.map((l) => l.leaseId) });
        }
      },
      onRenewed: () => undefined,
    });
    const retry = { maxRetries: 8, initialMs: 100, maxMs: 5_000 };
    this.#settles = new SettleBatcher(
      (ops) => this.#source.settle(ops.map(settleOpOf)) as Promise<SettleResult[]>,
      500,
      2,
      (op, error) => this.#answered(op, error),
      {
        timers: this.#timers,
        // `backend_unavailable` wrote nothing, so sending it again cannot apply
        // it twice; it is retried while the lease, as last renewed, has not
        // expired by the facade's clock (past that the retry would be fenced).
        delayMs: (op, error, failures) => {
          if (error.code !== 'backend_unavailable' || failures > retry.maxRetries) return null;
          const delayMs = backoffDelay(failures, retry);
          const lease = this.#held.get(op.lease.leaseId) ?? op.lease;
          return this.#source.clock.now() + delayMs < lease.expiresAt.getTime() ? delayMs : null;
        },
      },
      // Acks that trickle in one or two per turn (handlers that wait on I/O)
      // gather while other handlers still run, up to a claim's worth of room
      // (minDemand) or SETTLE_LINGER_MS: measured with 10 handlers of 10 ms,
      // settle calls carried 7-9 acks each, one commit apiece.
      { ms: SETTLE_LINGER_MS, upTo: this.#minDemand, when: () => this.#runs.size > 0 },
    );
    const held = { stream: this.stream, group: this.group, inflight: this.#held };
    this.#untrack =
      this.#telemetry?.track({ stream: held.stream, group: held.group, get inflightCount() { return held.inflight.size; } }) ??
      (() => undefined);
    this.done = new Promise<void>((resolve, reject) => {
      this.#resolveDone = resolve;
      this.#rejectDone = reject;
    });
    // Kept handled: a broken loop is reported through `done` to whoever awaits it.
    this.done.catch(() => undefined);
    if (o.signal?.aborted) queueMicrotask(this.#onAbort);
    else o.signal?.addEventListener('abort', this.#onAbort, { once: true });
    this.#kick();
  }

  get state(): ConsumerState {
    return this.#state;
  }

  /** A snapshot of the gauges and counters. */
  stats(): ConsumerStats {
    const c = this.#counters;
    return {
      inflight: this.#handlersRunning,
      held: this.#held.size,
      handled: c.handled,
      acked: c.acked,
      retried: c.retried,
      deadLettered: c.deadLettered,
      lost: c.lost,
      settleErrors: c.settleErrors,
      fetchErrors: c.fetchErrors,
      backoffMs: this.#backoffMs,
      state: this.#state,
    };
  }

  /**
   * Drains: stops fetching, releases every lease that was never started
   * (redelivered at once, no attempt spent), waits up to `timeoutMs` for
   * running handlers, then aborts the rest (their leases are nacked), flushes
   * every pending settle and resolves when nothing is left running. Calling
   * it again returns the same promise.
   */
  async stop(options?: StopOptions): Promise<void> {
    const timeoutMs = resolveStopTimeout(options, this.#options.stopTimeoutMs);
    this.#stopping ??= this.#drain(timeoutMs);
    return this.#stopping;
  }

  /** `await using consumer = rheo.consume(...)`: stops with the default timeout. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  // ---- fetch ------------------------------------------------------------------

  #kick(): void {
    if (this.#fetching || this.#state !== 'running') return;
    this.#fetching = this.#fetchLoop().catch((error: unknown) => this.#broke(error)).finally(() => {
      this.#fetching = null;
      this.#wakeIdle();
      // A settle may have freed room while the loop was winding down.
      if (this.#state === 'running' && this.maxDemand - this.#held.size >= this.#minDemand) this.#kick();
    });
  }

  async #fetchLoop(): Promise<void> {
    // Whether the last claim left nothing claimable: wait for an append or the poll before the next.
    let idle = false;
    while (this.#state === 'running') {
      const room = this.maxDemand - this.#held.size;
      if (room < this.#minDemand) return; // near the cap: settles resume us
      const limit = Math.min(room, this.#claimLimit);
      const request: FetchRequest = {
        limit,
        consumerId: this.consumerId,
        leaseMs: this.#options.leaseMs,
        partitions: this.#partitions,
        maxBytes: this.#source.defaults.maxFetchBytes,
      };
      let leases: Lease<T>[];
      try {
        if (idle) {
          idle = false;
          const found = await idleClaim<T>(this.#appends, this.#source, this.#blocking, this.stream, this.group, request);
          // Waited as usual (the store could not wait itself): claim with the room there is now.
          if (found === null) continue;
          leases = found;
        } else {
          const claimed = this.#source.claim<T>(this.stream, this.group, request);
          // Listen right after the claim is issued, before anything can run in
          // between: an append that lands while the claim is on its way still
          // finds this wait (its notification is read only after this turn). A
          // woken consumer's claim leaves without waiting for the registration.
          this.#appends.listen();
          leases = await claimed;
        }
      } catch (error) {
        if (this.#state !== 'running') return;
        await this.#fetchFailed(asRheoError(error, 'fetch'));
        continue;
      }
      this.#fetchFailures = 0;
      this.#backoffMs = 0;
      for (const lease of leases) this.#held.add(lease);
      if (this.#state !== 'running') {
        // Claimed while stopping: give them back, never start them.
        this.#track(this.#release(leases));
        return;
      }
      if (leases.length === 0) {
        idle = true;
        continue;
      }
      this.#appends.found();
      this.#report.fetched(leases);
      for (const lease of leases) this.#intake(lease);
      this.#pump();
      // A short claim means nothing else was claimable: wait for an append or
      // the poll instead of a claim that would come back empty.
      idle = leases.length < limit;
    }
  }

  async #fetchFailed(error: RheoError): Promise<void> {
    const failures = ++this.#fetchFailures;
    const backoffMs = backoffDelay(failures, this.#fetchBackoff);
    this.#counters.fetchErrors++;
    this.#backoffMs = backoffMs;
    const info = { ...this.#base(), error, failures, backoffMs };
    this.#report.fetchFailed(info);
    this.emit('fetch-error', info);
    // rheo itself was closed: no fetch can succeed again, so wind down instead of backing off forever.
    if (error.code === 'closed') {
      void this.stop().catch(() => undefined);
      return;
    }
    await sleep(this.#timers, backoffMs, this.#halt.signal);
  }

  // ---- run --------------------------------------------------------------------

  /** A claimed lease: waits for its key (with `orderBy`), then for a slot. */
  #intake(lease: Lease<T>): void {
    this.#waiting.set(lease.leaseId, lease);
    if (this.listenerCount('lease') > 0) this.emit('lease', emittedLeaseInfo(lease));
    const orderKey = this.#options.orderKey;
    if (orderKey !== null) {
      let key: string | null;
      try {
        key = orderKey(lease);
      } catch {
        // A key function that throws cannot order this lease: it runs unordered rather than wedge its key.
        key = null;
      }
      if (key !== null) {
        this.#keyOf.set(lease.leaseId, key);
        if (!this.#keys.enter(key, lease)) return;
      }
    }
    this.#ready.push(lease);
  }

  /** Starts ready leases while slots are free. Re-entrant calls (a handler that finished at once) leave it to the loop. */
  #pump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#ready.length > 0 && this.#slots.tryTake()) this.#start(this.#ready.shift()!);
    } finally {
      this.#pumping = false;
    }
  }

  #start(lease: Lease<T>): void {
    const id = lease.leaseId;
    // Taken back before it started (lost, or released by a drain): run nothing.
    if (!this.#waiting.delete(id)) {
      this.#slots.give();
      return this.#freeKey(id);
    }
    const run = new HandlerRun<T>(lease);
    this.#runs.set(id, run);
    const scope = this.#telemetry?.process(lease) ?? null;
    const result = scope ? this.#startTraced(scope, run) : run.run(this.#handler, this.#options.handlerTimeoutMs, this.#timers, this.#gauge);
    if (isThenable(result)) void result.then((r) => this.#ran(run, r)).catch((error: unknown) => this.#broke(error));
    else this.#ran(run, result);
  }

  #startTraced(scope: ProcessScope, run: HandlerRun<T>): RunResult | Promise<RunResult> {
    this.#scopes.set(run.lease.leaseId, scope);
    return scope.run(() => run.run(this.#handler, this.#options.handlerTimeoutMs, this.#timers, this.#gauge));
  }

  #ran(run: HandlerRun<T>, result: RunResult): void {
    const lease = run.lease;
    const id = lease.leaseId;
    this.#runs.delete(id);
    this.#slots.give();
    this.#counters.handled++;
    if (result.kind === 'nack' && result.failure) {
      log(this.#logger, 'warn', { ...leaseInfo(lease), kind: result.failure.kind, err: result.failure.error },
        `rheo handler for stream "${lease.stream}", group "${lease.group}" failed (${result.failure.kind}); the event is retried`);
      report(this, 'handler-error', { ...leaseInfo(lease), kind: result.failure.kind, error: result.failure.error });
    }
    const scope = this.#scopes.size === 0 ? undefined : this.#scopes.get(id);
    if (scope) {
      this.#scopes.delete(id);
      if (result.kind === 'lost') scope.handled(null, result.error);
      else if (result.kind === 'nack' && result.failure) scope.handled('nack', result.failure.error);
      else if (result.kind === 'committed') scope.handled(result.settle);
      else if (result.kind === 'uncommitted') scope.handled('nack', result.error);
      else scope.handled(result.kind);
    }
    if (result.kind === 'lost') this.#freeKey(id);
    else if (result.kind === 'ack' && !scope) {
      // The hot path: the ack joins the next coalesced call and its answer
      // comes back to #ackAnswered, with no promise or closure per lease.
      this.#settlingCount++;
      this.#held.markSettling(id);
      this.#settles.enqueue({ kind: 'ack', lease }, this.#ackAnswered);
    } else {
      // The slot is free now: the settle joins the next coalesced call while the next handler runs.
      const settling = carryOut(this.#settler, lease, result, this.#counters, this);
      if (scope) void settling.then(() => scope.settled(), () => scope.settled());
      void this.#track(settling, id);
    }
    this.#pump();
    if (this.#runs.size === 0) this.#wakeIdle();
  }

  /** The lease is done with (settled, lost or given up): its key passes to the next lease of that key. */
  #freeKey(leaseId: string): void {
    const key = this.#keyOf.get(leaseId);
    if (key === undefined) return;
    this.#keyOf.delete(leaseId);
    const next = this.#keys.leave(key);
    if (next === undefined) return;
    this.#ready.push(next);
    this.#pump();
  }

  // ---- settle and renew ---------------------------------------------------------

  /** An ack sent by #ran's hot path was answered (after #answered): carry on as `carryOut` would. */
  readonly #ackAnswered = (op: SettleRequest, error: RheoError | null): void => {
    const id = op.lease.leaseId;
    let followUp: Promise<void> | undefined;
    let thrown: { error: unknown } | null = null;
    try {
      followUp = afterAck(this.#settler, op.lease as Lease<T>, error === null ? null : asSettleError(error), this.#counters, this);
    } catch (listenerError) {
      thrown = { error: listenerError };
    }
    try {
      if (followUp === undefined) this.#untrackWork(id);
      else {
        void this.#track(followUp, id);
        this.#untrackWork(null);
      }
    } catch (pumpError) {
      // Freeing the key starts the next handler, whose events may throw too.
      thrown ??= { error: pumpError };
    }
    // A listener threw: stop, while the batcher goes on answering the rest of its call.
    if (thrown) this.#broke(thrown.error);
  };

  #settle(request: SettleRequest & { lease: Lease<T> }): Promise<void> {
    this.#held.markSettling(request.lease.leaseId);
    return this.#settles.settle(request);
  }

  /** Every settle's answer, before its caller hears it: report it, and stop holding the lease. */
  #answered(op: SettleRequest, error: RheoError | null): void {
    const lease = op.lease as Lease<T>;
    const held = this.#held.has(lease.leaseId);
    try {
      this.#report.settled(op, error, held);
      if (error?.code === 'stale_lease' && held) this.#lost(lease, error);
      // A retry comes due without a notification: the idle wait must not run past it.
      if (error === null && op.kind === 'nack') this.#appends.expect(this.#source.clock.now() + (op.delayMs ?? 0));
    } finally {
      // A fenced or expired lease must not be renewed either: confirm regardless.
      this.#confirm(lease.leaseId);
    }
  }

  #confirm(leaseId: string): boolean {
    const held = this.#held.delete(leaseId);
    if (held) this.#freed();
    return held;
  }

  /**
   * Room was freed. The claim starts a microtask later: a settle call's
   * answer confirms all its leases in one synchronous loop, and claiming at
   * the first `minDemand` free slots would split one refill into two claims
   * (measured: 200 claims of 250 instead of 100 of 500 for 50,000 events).
   */
  #freed(): void {
    if (this.#kickQueued || this.#state !== 'running' || this.maxDemand - this.#held.size < this.#minDemand) return;
    this.#kickQueued = true;
    queueMicrotask(() => {
      this.#kickQueued = false;
      this.#kick();
    });
  }

  async #renew(leases: Lease<T>[]): Promise<Array<{ ok: true; lease: Lease<T> } | { ok: false; error: RheoError }>> {
    const results = await this.#source.renew(leases.map(leaseRefOf), this.#options.leaseMs);
    return leases.map((lease, i) => {
      const r = results[i];
      if (!r) return { ok: false as const, error: new RheoError('internal', 'renewMany: the backend returned too few results') };
      return r.ok ? { ok: true as const, lease: { ...lease, expiresAt: r.expiresAt } } : r;
    });
  }

  /** The lease was taken away (a renewal or a settle answered `stale_lease`). */
  #lost(lease: Lease<T>, error: RheoError): void {
    const id = lease.leaseId;
    this.#counters.lost++;
    this.emit('lease-lost', { ...emittedLeaseInfo(lease), error });
    if (this.#waiting.delete(id)) {
      const key = this.#keyOf.get(id);
      if (key !== undefined && this.#keys.unpark(key, lease)) this.#keyOf.delete(id);
      else this.#freeKey(id);
    }
    this.#runs.get(id)?.interrupt({ kind: 'lost', error });
  }

  async #release(leases: Lease<T>[]): Promise<void> {
    if (leases.length === 0) return;
    this.#counters.released += leases.length;
    await releaseUnstarted(this.#settler, leases, this.#counters, this);
  }

  /** Counts `work` until it settles; then frees the ordering key of `leaseId`, when given. */
  #track(work: Promise<void>, leaseId: string | null = null): Promise<void> {
    this.#settlingCount++;
    return work.then(
      () => this.#untrackWork(leaseId),
      (error: unknown) => {
        this.#untrackWork(leaseId);
        this.#broke(error);
      },
    );
  }

  #untrackWork(leaseId: string | null): void {
    try {
      // Freeing the key may start the next handler, whose events may throw: the count still goes down.
      if (leaseId !== null) this.#freeKey(leaseId);
    } finally {
      if (--this.#settlingCount === 0) {
        const waiters = this.#settledWaiters;
        this.#settledWaiters = [];
        for (const wake of waiters) wake();
      }
    }
  }

  // ---- stop -------------------------------------------------------------------

  /** A throw escaped the loop (settles and fetches never throw; an event listener did): stop, and reject `done`. */
  #broke(error: unknown): void {
    this.#broken ??= { error };
    // Nobody will settle what the running handlers return.
    for (const run of this.#runs.values()) run.interrupt({ kind: 'stopping' });
    void this.stop().catch(() => undefined);
  }

  async #drain(timeoutMs: number): Promise<void> {
    this.#state = 'stopping';
    this.#options.signal?.removeEventListener('abort', this.#onAbort);
    this.#halt.abort(CANCELLED);
    const unstarted = this.#waiting.values();
    this.#waiting.clear();
    this.#keys.clear();
    this.#keyOf.clear();
    this.#ready.drain();
    void this.#track(this.#release(unstarted));
    // A zero timeout (rheo.close()) schedules no timer: a timer source that
    // never fires (manual timers) must not hold the stop up.
    const finished = timeoutMs > 0 ? await this.#within(this.#idle(), timeoutMs) : this.#runs.size === 0;
    let aborted = 0;
    if (!finished) {
      for (const run of this.#runs.values()) {
        if (!run.aborted) aborted++;
        run.interrupt({ kind: 'stopping' });
      }
    }
    await this.#idle();
    while (this.#settlingCount > 0) await new Promise<void>((resolve) => this.#settledWaiters.push(resolve));
    await this.#held.stop();
    // Stopping should not wait out settle backoffs: one last try each.
    this.#settles.stopRetrying();
    await this.#settles.idle();
    this.#untrack();
    this.#state = 'stopped';
    const released = this.#counters.released;
    log(this.#logger, finished ? 'info' : 'warn', { ...this.#base(), released, aborted },
      `rheo consumer of stream "${this.stream}", group "${this.group}" stopped${finished ? '' : ` after aborting ${aborted} handler(s) at the timeout`}`);
    report(this, 'drain', { ...this.#base(), released, aborted, timedOut: !finished });
    if (this.#broken) this.#rejectDone(this.#broken.error);
    else this.#resolveDone();
  }

  /** Resolves when no handler runs and no claim is on its way. */
  #idle(): Promise<void> {
    if (this.#runs.size === 0 && this.#fetching === null) return Promise.resolve();
    return new Promise<void>((resolve) => this.#idleWaiters.push(resolve));
  }

  #wakeIdle(): void {
    if (this.#runs.size > 0 || this.#fetching !== null || this.#idleWaiters.length === 0) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const wake of waiters) wake();
  }

  /** `true` when `promise` settles within `ms`, `false` at the timeout. */
  #within(promise: Promise<unknown>, ms: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const timer = this.#timers.schedule(ms, () => resolve(false));
      void promise.then(() => {
        timer.cancel();
        resolve(true);
      });
    });
  }

  #base(): { stream: string; group: string; consumerId: string } {
    return { stream: this.stream, group: this.group, consumerId: this.consumerId };
  }
}

/**
 * The store's op for a settle the consumer built: the lease came from the
 * store and the delay from a parsed outcome, so only the reason (a handler's
 * own text) is normalised, as the public calls do. One literal of one shape
 * (see `settleOp` in core/arguments.ts for why).
 */
function settleOpOf(request: SettleRequest): SettleOp {
  const kind = request.kind;
  const hasReason = kind === 'nack' || kind === 'reject';
  return settleOpFor(request.lease, kind, hasReason ? normalizeReason(request.reason) : null, kind === 'nack' ? (request.delayMs ?? 0) : 0);
}

function asRheoError(error: unknown, what: string): RheoError {
  if (isRheoError(error)) return error;
  return new RheoError('internal', `${what} failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
}
