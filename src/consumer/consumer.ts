import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { pipeline } from 'node:stream/promises';
import type { FetchOptions, JsonValue, Lease } from '../core/types.js';
import { log, silentLogger, type Logger } from '../core/logger.js';
import { report } from '../observability/diagnostics.js';
import { attachTelemetry, telemetryOf, type ProcessScope, type RheoTelemetry } from '../observability/telemetry.js';
import { emittedLeaseInfo, leaseInfo, type ConsumerEventMap } from '../observability/lease-events.js';
import type { ProducerSource } from '../producer/producer-options.js';
import { RheoProducer } from '../producer/rheo-producer.js';
import type { Timers } from '../runtime/timers.js';
import { isThenable, type LeaseOutcome, type LeaseSettler } from '../runtime/lease-outcome.js';
import { createLeaseSink, type LeaseSink } from '../sinks/lease-sink.js';
import { resolveConsumeOptions, resolveStopTimeout, type ResolvedConsumeOptions } from './consume-options.js';
import type { ConsumeOptions, ConsumerState, ConsumerStats, StopOptions } from './consumer-types.js';
import { HandlerRun, type RunResult } from './handler-run.js';
import { LeaseGate } from './lease-gate.js';
import { requireCapability } from '../core/capabilities.js';
import type { ConsumerHandler } from './consumer-types.js';
import { transactionalHandler } from './transactional-handler.js';
import { carryOut, releaseUnstarted, type SettleCounters } from './settle-policy.js';

/** What a consumer needs from rheo: the facade, never a concrete backend. */
export type ConsumerSource = ProducerSource;

/** `'skip'`: the lease was taken back before its handler started; settle nothing. */
type Decision = RunResult | 'skip';

/**
 * Starts consuming and returns the handle at once; see {@link Consumer}.
 * Options are validated synchronously (`invalid_argument`).
 */
export function createConsumer<T extends JsonValue = JsonValue>(
  source: ConsumerSource,
  options: ConsumeOptions<T>,
): Consumer<T> {
  return new Consumer<T>(source, options);
}

/**
 * The one-call runtime: a `RheoProducer` (the only fetch path; it renews
 * every held lease on one timer) piped through an intake gate (ordering,
 * drain bookkeeping) into a lease sink (bounded concurrency). The consumer
 * settles each lease by its handler's outcome, with the policy of
 * `settle-policy.ts`.
 *
 * Events (typed, and published on `node:diagnostics_channel` as `rheo:<name>`):
 * `lease`, `ack`, `retry`, `dead-letter`, `lease-lost`, `settle-error`,
 * `fetch-error`, `handler-error`, `drain`. The producer publishes the
 * lease-level ones, the consumer `handler-error` and `drain`, so each
 * happening is published once. The lease-level events the consumer emits
 * also carry the `leaseId` (never published). `renew-error` is emitted only.
 * None is `'error'`: a failure of a fetch, a renewal, a settle or a handler
 * never stops the consumer.
 */
export class Consumer<T extends JsonValue = JsonValue> extends EventEmitter<ConsumerEventMap> {
  readonly stream: string;
  readonly group: string;
  readonly consumerId: string;
  readonly concurrency: number;
  readonly maxDemand: number;
  /** Resolves once the consumer has stopped (after `stop()` or the `signal`); rejects if its pipeline broke. */
  readonly done: Promise<void>;

  readonly #options: ResolvedConsumeOptions<T>;
  readonly #handler: ConsumerHandler<T>;
  readonly #producer: RheoProducer<T>;
  readonly #gate: LeaseGate<T>;
  readonly #sink: LeaseSink<T>;
  readonly #timers: Timers;
  readonly #logger: Logger;
  readonly #runs = new Map<string, HandlerRun<T>>();
  readonly #decisions = new Map<string, Decision>();
  /** OpenTelemetry process/settle spans of running and settling leases (only with telemetry). */
  readonly #scopes = new Map<string, ProcessScope>();
  readonly #telemetry: RheoTelemetry | null;
  /** Settles and releases under way; `#drain` waits for zero. */
  #settlingCount = 0;
  #settledWaiters: Array<() => void> = [];
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
  readonly #pipelineDone: Promise<unknown>;
  #handlersRunning = 0;
  #backoffMs = 0;
  #state: ConsumerState = 'running';
  #stopping: Promise<void> | null = null;
  readonly #onAbort = (): void => void this.stop().catch(() => undefined);
  readonly #gauge = {
    started: (): void => void this.#handlersRunning++,
    settled: (): void => void this.#handlersRunning--,
  };

  constructor(source: ConsumerSource, options: ConsumeOptions<T>) {
    super();
    const o = resolveConsumeOptions(options, source.defaults, () => randomBytes(6).toString('hex'));
    if (o.transaction) requireCapability(source.backend, 'transactions', 'consume({ transaction: true })');
    this.#options = o;
    this.#logger = source.logger ?? silentLogger;
    this.#telemetry = telemetryOf(source);
    this.#handler = o.transaction ? transactionalHandler(source.backend, o.handler) : o.handler;
    this.stream = o.stream;
    this.group = o.group;
    this.consumerId = o.consumerId;
    this.concurrency = o.concurrency;
    this.maxDemand = o.maxDemand;
    this.#producer = new RheoProducer<T>(this.#observedSource(source), {
      stream: o.stream,
      group: o.group,
      maxDemand: o.maxDemand,
      leaseMs: o.leaseMs,
      pollMs: o.pollMs,
      consumerId: o.consumerId,
      partitions: o.partitions,
      timers: o.timers,
      minDemand: o.minDemand,
      fetchBackoff: o.fetchBackoff,
    });
    this.#timers = this.#producer.timers;
    this.#gate = new LeaseGate<T>({
      orderKey: o.orderKey,
      onArrive: (lease) => {
        if (this.listenerCount('lease') > 0) this.emit('lease', emittedLeaseInfo(lease));
      },
      onLateLease: (lease) => this.#track(this.#release([lease])),
    });
    this.#sink = createLeaseSink<T>({
      producer: this.#settler(),
      concurrency: o.concurrency,
      handler: (lease) => this.#handle(lease),
    });
    this.#listenToProducer();
    const running = pipeline(this.#producer, this.#gate, this.#sink);
    // Kept handled: a broken pipeline is reported through `done` and `stop()`.
    this.#pipelineDone = running.then(
      () => null,
      (error: unknown) => {
        // The sink is gone: nobody will settle what the running handlers return.
        for (const run of this.#runs.values()) run.interrupt({ kind: 'stopping' });
        return error;
      },
    );
    this.done = this.#pipelineDone.then(async (error) => {
      await this.stop();
      if (error) throw error;
    });
    this.done.catch(() => undefined);
    if (o.signal?.aborted) queueMicrotask(this.#onAbort);
    else o.signal?.addEventListener('abort', this.#onAbort, { once: true });
  }

  get state(): ConsumerState {
    return this.#state;
  }

  /** A snapshot of the gauges and counters. */
  stats(): ConsumerStats {
    const c = this.#counters;
    return {
      inflight: this.#handlersRunning,
      held: this.#producer.inflightCount,
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

  async #drain(timeoutMs: number): Promise<void> {
    this.#state = 'stopping';
    this.#options.signal?.removeEventListener('abort', this.#onAbort);
    const unstarted = this.#gate.close();
    this.#track(this.#release(unstarted));
    void this.#producer.drain();
    // A zero timeout (rheo.close()) schedules no timer: a timer source that
    // never fires (manual timers) must not hold the stop up.
    const finished = timeoutMs > 0 ? await this.#within(this.#pipelineDone, timeoutMs) : this.#runs.size === 0;
    let aborted = 0;
    if (!finished) {
      for (const run of this.#runs.values()) {
        if (!run.aborted) aborted++;
        run.interrupt({ kind: 'stopping' });
      }
    }
    await this.#pipelineDone;
    while (this.#settlingCount > 0) await new Promise<void>((resolve) => this.#settledWaiters.push(resolve));
    await this.#producer.close();
    this.#state = 'stopped';
    log(this.#logger, finished ? 'info' : 'warn', {
      stream: this.stream, group: this.group, consumerId: this.consumerId, released: this.#counters.released, aborted,
    }, `rheo consumer of stream "${this.stream}", group "${this.group}" stopped${finished ? '' : ` after aborting ${aborted} handler(s) at the timeout`}`);
    report(this, 'drain', {
      stream: this.stream,
      group: this.group,
      consumerId: this.consumerId,
      released: this.#counters.released,
      aborted,
      timedOut: !finished,
    });
  }

  /**
   * The sink calls this when a slot is free. Returns a dummy outcome (the
   * real decision is in `#decisions`), at once when the handler returned a
   * plain value, so a fast handler costs the sink no promise.
   */
  #handle(lease: Lease<T>): LeaseOutcome | Promise<LeaseOutcome> {
    const id = lease.leaseId;
    if (!this.#gate.start(id)) {
      this.#decisions.set(id, 'skip');
      return 'ack';
    }
    const run = new HandlerRun<T>(lease);
    this.#runs.set(id, run);
    // Runs are interrupted by the consumer itself: on 'lease-lost' from the
    // producer, at the stop timeout, and when the pipeline breaks. Not
    // subscribing to the sink's per-lease signal keeps that signal unallocated.
    const start = (): RunResult | Promise<RunResult> =>
      run.run(this.#handler, this.#options.handlerTimeoutMs, this.#timers, this.#gauge);
    let result: RunResult | Promise<RunResult>;
    if (this.#telemetry) {
      const scope = this.#telemetry.process(lease);
      this.#scopes.set(id, scope);
      result = scope.run(start);
    } else result = start();
    if (isThenable(result)) return result.then((r) => this.#ran(run, r));
    return this.#ran(run, result);
  }

  #ran(run: HandlerRun<T>, result: RunResult): LeaseOutcome {
    const lease = run.lease;
    this.#runs.delete(lease.leaseId);
    this.#counters.handled++;
    if (result.kind === 'nack' && result.failure) {
      log(this.#logger, 'warn', { ...leaseInfo(lease), kind: result.failure.kind, err: result.failure.error },
        `rheo handler for stream "${lease.stream}", group "${lease.group}" failed (${result.failure.kind}); the event is retried`);
      report(this, 'handler-error', { ...leaseInfo(lease), kind: result.failure.kind, error: result.failure.error });
    }
    this.#decisions.set(lease.leaseId, result);
    const scope = this.#scopes.get(lease.leaseId);
    if (scope) {
      if (result.kind === 'lost') {
        this.#scopes.delete(lease.leaseId);
        scope.handled(null, result.error);
      } else if (result.kind === 'nack' && result.failure) scope.handled('nack', result.failure.error);
      else if (result.kind === 'committed') scope.handled(result.settle);
      else if (result.kind === 'uncommitted') scope.handled('nack', result.error);
      else scope.handled(result.kind);
    }
    return 'ack';
  }

  /** What the sink settles through: every settle kind carries out the recorded decision. */
  #settler(): LeaseSettler<T> {
    const producer = this.#producer;
    const settle = (lease: Lease<T>): Promise<void> => this.#settle(lease);
    return {
      ack: settle,
      nack: settle,
      reject: settle,
      // Only the sink's own teardown releases (leases it accepted but never started).
      release: (lease) => this.#release([lease]),
      holds: (leaseId) => producer.holds(leaseId),
      timers: producer.timers,
      on: producer.on.bind(producer) as LeaseSettler<T>['on'],
      off: producer.off.bind(producer) as LeaseSettler<T>['off'],
    };
  }

  #settle(lease: Lease<T>): Promise<void> {
    const id = lease.leaseId;
    const decision = this.#decisions.get(id) ?? 'skip';
    this.#decisions.delete(id);
    if (decision === 'skip') {
      this.#gate.finish(id);
      return Promise.resolve();
    }
    const settling = carryOut(this.#producer, lease, decision, this.#counters, this);
    const scope = this.#scopes.get(id);
    if (scope) {
      this.#scopes.delete(id);
      void settling.then(() => scope.settled(), () => scope.settled());
    }
    return this.#track(settling, id);
  }

  async #release(leases: Lease<T>[]): Promise<void> {
    if (leases.length === 0) return;
    this.#counters.released += leases.length;
    await releaseUnstarted(this.#producer, leases, this.#counters, this);
  }

  /** Counts `work` until it settles; then frees the ordering key of `leaseId`, when given. */
  #track(work: Promise<void>, leaseId: string | null = null): Promise<void> {
    this.#settlingCount++;
    return work.then(
      () => this.#untrack(leaseId),
      (error: unknown) => {
        this.#untrack(leaseId);
        throw error;
      },
    );
  }

  #untrack(leaseId: string | null): void {
    if (leaseId !== null) this.#gate.finish(leaseId);
    if (--this.#settlingCount > 0) return;
    const waiters = this.#settledWaiters;
    this.#settledWaiters = [];
    for (const wake of waiters) wake();
  }

  #listenToProducer(): void {
    const base = { stream: this.stream, group: this.group, consumerId: this.consumerId };
    this.#producer.on('lease-lost', ({ lease, error }) => {
      this.#counters.lost++;
      this.emit('lease-lost', { ...emittedLeaseInfo(lease), error });
      this.#gate.forget(lease.leaseId);
      this.#runs.get(lease.leaseId)?.interrupt({ kind: 'lost', error });
    });
    this.#producer.on('renew-error', ({ error, leases }) => {
      if (this.listenerCount('renew-error') > 0) this.emit('renew-error', { ...base, error, leaseIds: leases.map((l) => l.leaseId) });
    });
    this.#producer.on('fetch-error', ({ error, failures, backoffMs }) => {
      this.#counters.fetchErrors++;
      this.#backoffMs = backoffMs;
      this.emit('fetch-error', { ...base, error, failures, backoffMs });
      // rheo itself was closed: no fetch can succeed again, so wind down instead of backing off forever.
      if (error.code === 'closed') void this.stop().catch(() => undefined);
    });
  }

  /** The facade, with fetch observed so that a successful fetch clears the backoff gauge. */
  #observedSource(source: ConsumerSource): ConsumerSource {
    const observed: ConsumerSource = {
      backend: source.backend,
      defaults: source.defaults,
      clock: source.clock,
      logger: source.logger,
      renewMany: (leases, options) => source.renewMany(leases, options),
      settleMany: (ops) => source.settleMany(ops),
      fetch: async <U extends JsonValue = JsonValue>(stream: string, group: string, options?: FetchOptions) => {
        const leases = await source.fetch<U>(stream, group, options);
        this.#backoffMs = 0;
        return leases;
      },
    };
    attachTelemetry(observed, telemetryOf(source));
    return observed;
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
}
