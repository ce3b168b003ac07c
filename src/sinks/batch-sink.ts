import { Writable } from 'node:stream';
import { invalidArgument } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import { optionalInteger } from '../core/validation.js';
import { BatchCollector, type FlushReason } from '../transforms/batch-collector.js';

import {
  LostLeases,
  settleLease,
  settlementOf,
  thrownSettlement,
  type LeaseOutcome,
  type LeaseSettler,
  type Settlement,
  type SettlingStreamEvents,
} from './lease-outcome.js';
import type { Timers } from '../producer/timers.js';
import type { LeaseLostInfo } from '../producer/producer-options.js';
import { WorkQueue } from './work-queue.js';
import { telemetryOf, type RheoTelemetry } from '../observability/telemetry.js';
import { chosenHandler } from './handler-option.js';

interface ClosedBatch<T> {
  leases: Lease<T>[];
  reason: FlushReason;
}

/**
 * What a batch `handler` returns: nothing or `'ack'` acks every lease; an array
 * gives one `LeaseOutcome` per lease, in the order of the batch. A throw
 * nacks the whole batch with the error message.
 */
export type BatchOutcome = void | 'ack' | LeaseOutcome[];

export interface BatchContext {
  /** Aborted when the sink is destroyed. */
  signal: AbortSignal;
  /** Why the batch closed: it was full, its timeout passed, or the stream ended. */
  reason: FlushReason;
}

/** Runs once per batch; its outcome decides the settles (see `BatchOutcome`). */
export type BatchHandler<T extends JsonValue = JsonValue> = (
  leases: Lease<T>[],
  context: BatchContext,
) => BatchOutcome | Promise<BatchOutcome>;

/**
 * Options of `createBatchSink`: `producer`, `handler` and the tuning fields
 * of `BatchSinkTuning`. The handler is named `handler`, as in `rheo.consume`
 * and `createLeaseSink`; the older name `handleBatch` still works.
 */
export type BatchSinkOptions<T extends JsonValue = JsonValue> = BatchSinkTuning<T> &
  (
    | {
        /** Runs once per batch; its outcome decides the settles (see `BatchOutcome`). */
        handler: BatchHandler<T>;
        /** @deprecated Renamed `handler`; pass one of the two. */
        handleBatch?: undefined;
      }
    | {
        handler?: undefined;
        /** @deprecated Renamed `handler`, the name `rheo.consume` and `createLeaseSink` use. */
        handleBatch: BatchHandler<T>;
      }
  );

/** The fields of `BatchSinkOptions` besides the handler. */
export interface BatchSinkTuning<T extends JsonValue = JsonValue> {
  /** Settles go through it (settle + confirm in one step, coalesced). */
  producer: LeaseSettler<T>;
  /** A batch closes at this many leases. Default 100. Keep it at or below the producer's `maxDemand`, or batches close only on the timer. */
  batchSize?: number;
  /** ...or this long after its first lease, whichever comes first. Default 1000. */
  batchTimeoutMs?: number;
  /** Batches handled at once. Default 1. */
  concurrency?: number;
  /** Default: the producer's timers. */
  timers?: Timers;
}

export interface BatchErrorInfo<T> {
  leases: Lease<T>[];
  error: unknown;
}

export interface BatchSinkEvents<T> extends SettlingStreamEvents<T> {
  /** The batch `handler` threw or returned an outcome list of the wrong length; the batch is nacked. */
  'batch-error': [info: BatchErrorInfo<T>];
}

/**
 * An object-mode `Writable` that groups leases like a Broadway batcher (by
 * `batchSize` or `batchTimeoutMs`, whichever first; a partial batch flushes
 * on its timer and at the end of the stream), hands each batch to
 * `handler`, then settles every lease. The settles of one batch reach
 * the backend as one coalesced call. Destroying the sink releases leases of
 * batches that never started.
 */
export function createBatchSink<T extends JsonValue = JsonValue>(options: BatchSinkOptions<T>): BatchSink<T> {
  return new BatchSink(options);
}

/** Typed overloads for the sink's own events. */
export interface BatchSink<T extends JsonValue = JsonValue> {
  on<E extends keyof BatchSinkEvents<T>>(event: E, listener: (...args: BatchSinkEvents<T>[E]) => void): this;
  on(event: string | symbol, listener: (...args: unknown[]) => void): this;
  once<E extends keyof BatchSinkEvents<T>>(event: E, listener: (...args: BatchSinkEvents<T>[E]) => void): this;
  once(event: string | symbol, listener: (...args: unknown[]) => void): this;
}

// Declaration merging adds typed event overloads; the interface declares no fields.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class BatchSink<T extends JsonValue = JsonValue> extends Writable {
  readonly batchSize: number;
  readonly batchTimeoutMs: number;
  readonly #producer: LeaseSettler<T>;
  readonly #telemetry: RheoTelemetry | null;
  readonly #handler: BatchHandler<T>;
  readonly #concurrency: number;
  readonly #collector: BatchCollector<Lease<T>>;
  /** Closed batches waiting for a free slot. */
  readonly #queued = new WorkQueue<ClosedBatch<T>>();
  #active = 0;
  #pumpScheduled = false;
  /** Running batches and unanswered settles: `_final` waits for none. */
  readonly #tasks = new Set<Promise<void>>();
  readonly #shutdown = new AbortController();
  readonly #lost = new LostLeases();
  readonly #onLost = (info: LeaseLostInfo<T>): void => this.#lost.add(info.lease.leaseId);

  constructor(options: BatchSinkOptions<T>) {
    const handler = chosenHandler<BatchHandler<T>>('createBatchSink', options, 'handleBatch');
    if (handler === null || !options.producer) {
      throw invalidArgument('createBatchSink expects { producer, handler(leases, { signal }), batchSize?, batchTimeoutMs?, concurrency? }');
    }
    const batchSize = optionalInteger('batchSize', options.batchSize, 100, { min: 1, max: 100_000 });
    const batchTimeoutMs = optionalInteger('batchTimeoutMs', options.batchTimeoutMs, 1000, { min: 1, max: 3600_000 });
    const concurrency = optionalInteger('concurrency', options.concurrency, 1, { min: 1, max: 10_000 });
    super({ objectMode: true, highWaterMark: 1 });
    this.batchSize = batchSize;
    this.batchTimeoutMs = batchTimeoutMs;
    this.#producer = options.producer;
    this.#telemetry = telemetryOf(options.producer);
    this.#handler = handler;
    this.#concurrency = concurrency;
    this.#collector = new BatchCollector<Lease<T>>({
      size: batchSize,
      intervalMs: batchTimeoutMs,
      timers: options.timers ?? options.producer.timers,
      onFlush: (leases, reason) => this.#dispatch(leases, reason),
    });
    this.#producer.on('lease-lost', this.#onLost);
  }

  /** Batches being handled now. */
  get activeCount(): number {
    return this.#active;
  }

  /** Closed batches waiting for a free slot. */
  get queuedCount(): number {
    return this.#queued.length;
  }

  /** Leases in the batch still open. */
  get openBatchLength(): number {
    return this.#collector.length;
  }

  override _write(lease: Lease<T>, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#collector.add(lease);
    callback();
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#collector.flush('end');
    this.#whenIdle().then(() => {
      this.#producer.off('lease-lost', this.#onLost);
      callback();
    }, callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#shutdown.abort(error ?? new Error('batch sink destroyed'));
    const unstarted = [...this.#collector.take(), ...this.#queued.drain().flatMap((batch) => batch.leases)];
    this.#producer.off('lease-lost', this.#onLost);
    Promise.all(unstarted.map((lease) => settleLease(this.#producer, lease, { kind: 'release' }, this))).then(
      () => callback(error),
      () => callback(error),
    );
  }

  #dispatch(leases: Lease<T>[], reason: FlushReason): void {
    this.#queued.push({ leases, reason });
    // Batches start in a microtask, never inside `_write` or a timer flush of the collector.
    if (!this.#pumpScheduled) {
      this.#pumpScheduled = true;
      queueMicrotask(this.#pump);
    }
  }

  readonly #pump = (): void => {
    this.#pumpScheduled = false;
    while (this.#active < this.#concurrency && !this.#shutdown.signal.aborted) {
      const batch = this.#queued.shift();
      if (batch === undefined) return;
      this.#active++;
      const task = this.#run(batch.leases, batch.reason).then(this.#ran, this.#ran);
      this.#tasks.add(task);
      void task.finally(() => this.#tasks.delete(task));
    }
  };

  /** Runs inside the finished batch's promise, so the next batch is tracked before that one leaves `#tasks`. */
  readonly #ran = (): void => {
    this.#active--;
    this.#pump();
  };

  async #whenIdle(): Promise<void> {
    for (;;) {
      // A batch dispatched just now waits for its microtask; start it here rather than wait for that.
      if (this.#tasks.size === 0) this.#pump();
      if (this.#tasks.size === 0) return;
      await Promise.allSettled([...this.#tasks]);
    }
  }

  async #run(batch: Lease<T>[], reason: FlushReason): Promise<void> {
    // Leases lost while waiting (renewal answered stale_lease) would only be refused at settle time.
    const leases = batch.filter((lease) => !this.#lost.take(lease.leaseId));
    if (leases.length === 0) return;
    let settlements: Settlement[];
    const scope = this.#telemetry?.processBatch(leases) ?? null;
    try {
      const context = { signal: this.#shutdown.signal, reason };
      const outcome = await (scope ? scope.run(() => this.#handler(leases, context)) : this.#handler(leases, context));
      scope?.handled();
      settlements = this.#settlementsOf(leases, outcome);
    } catch (error) {
      scope?.handled(error);
      if (this.#shutdown.signal.aborted) settlements = leases.map(() => ({ kind: 'release' }));
      else {
        this.emit('batch-error', { leases, error });
        const nack = thrownSettlement(error);
        settlements = leases.map(() => nack);
      }
    }
    // The batch slot frees now; the settles (one coalesced call) are awaited by _final.
    const settles = Promise.all(leases.map((lease, i) => settleLease(this.#producer, lease, settlements[i]!, this)));
    const task = settles.then(() => undefined);
    this.#tasks.add(task);
    void task.finally(() => this.#tasks.delete(task));
  }

  #settlementsOf(leases: Lease<T>[], outcome: BatchOutcome): Settlement[] {
    if (outcome === undefined || outcome === 'ack') return leases.map(() => ({ kind: 'ack' }));
    if (Array.isArray(outcome) && outcome.length === leases.length) return outcome.map((o) => settlementOf(o));
    const error = new TypeError(
      `a batch handler must return nothing, 'ack' or one outcome per lease (${leases.length}), got ${
        Array.isArray(outcome) ? `an array of ${outcome.length}` : typeof outcome
      }`,
    );
    this.emit('batch-error', { leases, error });
    return leases.map(() => thrownSettlement(error));
  }
}
