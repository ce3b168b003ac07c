import { assertKnownKeys, optionKeys } from '../core/option-keys.js';
import { Writable } from 'node:stream';
import { invalidArgument } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import { optionalInteger } from '../core/validation.js';
import type { LeaseLostInfo } from '../producer/producer-options.js';
import { HandlerRun, type RunReading } from '../runtime/handler-run.js';
import { RenewingMap } from '../runtime/renewing-map.js';
import { systemTimers } from '../runtime/timers.js';
import { WorkQueue } from '../runtime/work-queue.js';
import { telemetryOf, type ProcessScope, type RheoTelemetry } from '../observability/telemetry.js';

import {
  assertConcurrencyWithinDemand,
  failurePolicyOf,
  failureSettlement,
  intakeOf,
  isThenable,
  settleLease,
  settlementOf,
  type FailurePolicy,
  type LeaseOutcome,
  type LeaseSettler,
  type Settlement,
  type SettlingStreamEvents,
} from '../runtime/lease-outcome.js';

export interface LeaseHandlerContext {
  /** Aborted when the sink is destroyed or the producer loses this lease (renewal answered `stale_lease`). */
  signal: AbortSignal;
  /** The value a processor computed, when the lease arrived as a map transform's `{ lease, value }`; else `undefined`. */
  readonly value: unknown;
}

/** Runs once per lease; its outcome decides the settle (see `LeaseOutcome`). */
export type LeaseHandler<T extends JsonValue = JsonValue> = (
  lease: Lease<T>,
  context: LeaseHandlerContext,
) => LeaseOutcome | Promise<LeaseOutcome>;

/**
 * Options of `createLeaseSink`: `producer`, `handler` and the tuning fields of
 * `LeaseSinkTuning`. The handler is named `handler`, as in `rheo.consume`
 * and `createBatchSink`.
 */
export interface LeaseSinkOptions<T extends JsonValue = JsonValue> extends LeaseSinkTuning<T> {
  /** Runs once per lease; its outcome decides the settle (see `LeaseOutcome`). */
  handler: LeaseHandler<T>;
}

/** The fields of `LeaseSinkOptions` besides the handler. */
export interface LeaseSinkTuning<T extends JsonValue = JsonValue> {
  /** Settles go through it (settle + confirm in one step, coalesced). */
  producer: LeaseSettler<T>;
  /** Handlers running at once. Default 1. */
  concurrency?: number;
  /** What a throw does to its lease: `'nack'` (retry) or `'reject'` (dead-letter). Default: the producer's `onFailure`, else `'nack'`. */
  onFailure?: FailurePolicy;
  /**
   * Leases accepted but not started before writes wait. Leases from a
   * producer are already bounded by its `maxDemand`; this only guards other
   * sources. Accepted leases are released (not lost) if the sink is destroyed.
   * Default 10000.
   */
  maxQueued?: number;
}

/** Every option `createLeaseSink` takes; any other key is refused. */
const OPTION_KEYS = optionKeys<LeaseSinkOptions>()('producer', 'handler', 'concurrency', 'onFailure', 'maxQueued');

/**
 * An object-mode `Writable` that runs `handler(lease, { signal, value })` for
 * every lease with bounded concurrency and settles by the outcome. It takes
 * leases, or the `{ lease, value }` a map transform emits (the handler sees
 * the value); anything else fails the stream with `invalid_argument`.
 * `end()` (or the end of the pipeline) waits for every handler and settle.
 * A failed settle is an event (`lease-lost`, `settle-error`), never an error.
 * Destroying the sink aborts running handlers' signals and releases leases
 * that were accepted but never started; a handler that throws after the
 * sink was destroyed releases its lease instead of spending an attempt.
 */
export function createLeaseSink<T extends JsonValue = JsonValue>(options: LeaseSinkOptions<T>): LeaseSink<T> {
  return new LeaseSink(options);
}

/** Typed overloads for the sink's own events. */
export interface LeaseSink<T extends JsonValue = JsonValue> {
  on<E extends keyof SettlingStreamEvents<T>>(event: E, listener: (...args: SettlingStreamEvents<T>[E]) => void): this;
  on(event: string | symbol, listener: (...args: unknown[]) => void): this;
  once<E extends keyof SettlingStreamEvents<T>>(event: E, listener: (...args: SettlingStreamEvents<T>[E]) => void): this;
  once(event: string | symbol, listener: (...args: unknown[]) => void): this;
}

// Declaration merging adds typed event overloads; the interface declares no fields.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class LeaseSink<T extends JsonValue = JsonValue> extends Writable {
  readonly concurrency: number;
  readonly #producer: LeaseSettler<T>;
  readonly #handler: LeaseHandler<T>;
  readonly #maxQueued: number;
  readonly #telemetry: RheoTelemetry | null;
  readonly #onFailure: FailurePolicy;
  /** Processor values of accepted leases that came as `{ lease, value }`, by lease id; created on the first one. */
  #values: Map<string, unknown> | null = null;
  /** Accepted and not started, oldest first. */
  readonly #queue = new WorkQueue<Lease<T>>();
  readonly #running = new RenewingMap<string, HandlerRun<SinkRun>>();
  /** Handlers running plus settles not answered yet: `_final` waits for zero. */
  #busy = 0;
  #idle: (() => void) | null = null;
  #pumpScheduled = false;
  #pumping = false;
  #destroyed = false;
  #waitingWrite: (() => void) | null = null;
  readonly #onLost = (info: LeaseLostInfo<T>): void => {
    const id = info.lease.leaseId;
    const running = this.#running.get(id);
    if (running) return running.abortSignal(info.error);
    // Lost while queued (renewal answered stale_lease): its settle would be refused anyway.
    if (this.#queue.withdraw((lease) => lease.leaseId === id)) {
      this.#values?.delete(id);
      this.#resumeWrite();
      this.#checkIdle();
    }
  };
  readonly #pump = (): void => {
    this.#pumpScheduled = false;
    this.#pumping = true;
    while (this.#running.size < this.concurrency && !this.#destroyed) {
      const lease = this.#queue.shift();
      if (lease === undefined) break;
      this.#start(lease);
    }
    this.#pumping = false;
    this.#resumeWrite();
  };
  readonly #settled = (): void => {
    this.#busy--;
    this.#checkIdle();
  };
  /** `settleLease` never rejects unless an event listener threw: count it, and let the rejection surface. */
  readonly #settleThrew = (error: unknown): never => {
    this.#settled();
    throw error;
  };

  constructor(options: LeaseSinkOptions<T>) {
    assertKnownKeys('createLeaseSink options', options, OPTION_KEYS);
    const handler = (options as Partial<LeaseSinkOptions<T>> | null)?.handler;
    if (typeof handler !== 'function' || !options.producer) {
      throw invalidArgument('createLeaseSink expects { producer, handler(lease, { signal }), concurrency? }');
    }
    const concurrency = optionalInteger('concurrency', options.concurrency, 1, { min: 1, max: 10_000 });
    const maxQueued = optionalInteger('maxQueued', options.maxQueued, 10_000, { min: 0, max: 1_000_000 });
    assertConcurrencyWithinDemand('createLeaseSink', concurrency, options.producer);
    super({ objectMode: true, highWaterMark: 1 });
    this.concurrency = concurrency;
    this.#maxQueued = maxQueued;
    this.#producer = options.producer;
    this.#handler = handler;
    this.#telemetry = telemetryOf(options.producer);
    this.#onFailure = failurePolicyOf('createLeaseSink', options.onFailure, options.producer);
    this.#producer.on('lease-lost', this.#onLost);
  }

  /** Handlers running now. */
  get activeCount(): number {
    return this.#running.size;
  }

  /** Leases accepted and waiting for a free slot. */
  get queuedCount(): number {
    return this.#queue.length;
  }

  override _write(item: unknown, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    let lease: Lease<T>;
    try {
      const intake = intakeOf<T>('createLeaseSink', item);
      lease = intake.lease;
      if (intake.mapped) (this.#values ??= new Map()).set(lease.leaseId, intake.value);
    } catch (error) {
      return callback(error as Error);
    }
    this.#queue.push(lease);
    // Handlers start in a microtask, never inside `_write`: one pump starts
    // every lease written in the same synchronous run.
    if (!this.#pumpScheduled) {
      this.#pumpScheduled = true;
      queueMicrotask(this.#pump);
    }
    if (this.#queue.length <= this.#maxQueued) callback();
    else this.#waitingWrite = () => callback();
  }

  override _final(callback: (error?: Error | null) => void): void {
    const finish = (): void => {
      this.#producer.off('lease-lost', this.#onLost);
      callback();
    };
    if (this.#busy === 0 && this.#queue.length === 0) return finish();
    this.#idle = finish;
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#destroyed = true;
    const reason = error ?? new Error('lease sink destroyed');
    for (const run of this.#running.values()) run.abortSignal(reason);
    const unstarted = this.#queue.drain();
    this.#values = null;
    this.#producer.off('lease-lost', this.#onLost);
    Promise.all(unstarted.map((lease) => settleLease(this.#producer, lease, { kind: 'release' }, this))).then(
      () => callback(error),
      () => callback(error),
    );
  }

  #resumeWrite(): void {
    if (this.#waitingWrite && this.#queue.length <= this.#maxQueued) {
      const resume = this.#waitingWrite;
      this.#waitingWrite = null;
      resume();
    }
  }

  /**
   * Runs the handler on the runtime's engine (runtime/handler-run.ts); a
   * handler that returns no promise is settled at once, without a promise of
   * its own (most no-op and CPU-bound handlers).
   */
  #start(lease: Lease<T>): void {
    const run = new HandlerRun<SinkRun>(SINK_READING);
    this.#running.set(lease.leaseId, run);
    this.#busy++;
    const scope = this.#telemetry?.process(lease) ?? null;
    const context = new SinkHandlerContext(run, this.#values?.get(lease.leaseId));
    const handler = this.#handler;
    const invoke = (): unknown => handler(lease, context);
    const result = run.run(scope ? () => scope.run(invoke) : invoke, null, systemTimers);
    if (isThenable(result)) void result.then((r) => this.#ran(lease, r, scope));
    else this.#ran(lease, result, scope);
  }

  #ran(lease: Lease<T>, run: SinkRun, scope: ProcessScope | null): void {
    if (run.thrown) this.#finish(lease, this.#failed(lease, run.thrown.error), scope, run.thrown);
    else this.#finish(lease, run.settlement, scope);
  }

  #failed(lease: Lease<T>, error: unknown): Settlement {
    if (this.#destroyed) return { kind: 'release' };
    this.emit('handler-error', { lease, error });
    return failureSettlement(error, this.#onFailure);
  }

  #finish(lease: Lease<T>, settlement: Settlement, scope: ProcessScope | null = null, thrown?: { error: unknown }): void {
    this.#running.delete(lease.leaseId);
    this.#values?.delete(lease.leaseId);
    // The slot frees as soon as the handler is done: the settle joins the
    // producer's next coalesced call while the next handler runs. Demand stays
    // bounded because the producer confirms only once the settle is answered.
    let settling = settleLease(this.#producer, lease, settlement, this);
    if (scope) {
      if (thrown) scope.handled(settlement.kind, thrown.error);
      else scope.handled(settlement.kind);
      settling = settling.finally(() => scope.settled());
    }
    void settling.then(this.#settled, this.#settleThrew);
    // A handler that finished inside the pump loop leaves the loop to start the next one.
    if (this.#queue.length > 0 && !this.#pumping) this.#pump();
  }

  #checkIdle(): void {
    if (this.#busy > 0 || this.#queue.length > 0 || !this.#idle) return;
    const idle = this.#idle;
    this.#idle = null;
    idle();
  }
}

/** What a handler run of the sink ends with: the settlement its outcome asks for, and what it threw, if it did. */
interface SinkRun {
  settlement: Settlement;
  thrown?: { error: unknown };
}

const ACKED: SinkRun = Object.freeze({ settlement: Object.freeze({ kind: 'ack' as const }) });

/** How the sink reads a handler: by the sinks' outcome vocabulary (runtime/lease-outcome.ts); no timeout. */
const SINK_READING: RunReading<SinkRun> = {
  returned: (value) => {
    const settlement = settlementOf(value);
    return settlement.kind === 'ack' ? ACKED : { settlement };
  },
  threw: (error) => ({ settlement: failureSettlement(error, 'nack'), thrown: { error } }), // #ran settles a throw by the policy
  timedOut: () => {
    throw new Error('a lease sink sets no handler timeout');
  },
};

/** The `{ signal }` a handler gets; the signal is created only when read. */
class SinkHandlerContext implements LeaseHandlerContext {
  readonly #run: HandlerRun<SinkRun>;
  readonly value: unknown;

  constructor(run: HandlerRun<SinkRun>, value: unknown) {
    this.#run = run;
    this.value = value;
  }

  get signal(): AbortSignal {
    return this.#run.signal;
  }
}
