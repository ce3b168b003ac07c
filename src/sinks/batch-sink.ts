import { assertKnownKeys, optionKeys } from '../core/option-keys.js';
import { Writable } from 'node:stream';
import type { OwnedTransaction, TransactionClient } from '../core/backend.js';
import { invalidArgument } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import { optionalInteger } from '../core/validation.js';
import { BatchCollector, type FlushReason } from '../runtime/batch-collector.js';

import {
  LostLeases,
  assertConcurrencyWithinDemand,
  failurePolicyOf,
  failureSettlement,
  intakeOf,
  settleLease,
  settlementOf,
  type FailurePolicy,
  type LeaseOutcome,
  type LeaseSettler,
  type Settlement,
  type SettlingStreamEvents,
} from '../runtime/lease-outcome.js';
import type { Timers } from '../runtime/timers.js';
import type { RheoProducer } from '../producer/rheo-producer.js';
import type { LeaseLostInfo } from '../producer/producer-options.js';
import { WorkQueue } from '../runtime/work-queue.js';
import { settleInTransaction, transactionOf } from './batch-transaction.js';
import { telemetryOf, type RheoTelemetry } from '../observability/telemetry.js';

interface ClosedBatch<T> {
  leases: Lease<T>[];
  reason: FlushReason;
  key: string | undefined;
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
  /** With `transaction: true`: the client of the batch's transaction; its writes commit with the batch's settles. */
  client?: TransactionClient;
  /**
   * The processors' values, one per lease in batch order, when leases came
   * as a map transform's `{ lease, value }` (`undefined` for a bare lease).
   * Absent when every lease of the batch came bare.
   */
  values?: unknown[];
  /** With `batchKey`: the key every lease of this batch shares. */
  key?: string;
}

/** Runs once per batch; its outcome decides the settles (see `BatchOutcome`). */
export type BatchHandler<T extends JsonValue = JsonValue> = (
  leases: Lease<T>[],
  context: BatchContext,
) => BatchOutcome | Promise<BatchOutcome>;

/**
 * Options of `createBatchSink`: `producer`, `handler` and the tuning fields
 * of `BatchSinkTuning`. The handler is named `handler`, as in `rheo.consume`
 * and `createLeaseSink`.
 */
export interface BatchSinkOptions<T extends JsonValue = JsonValue> extends BatchSinkTuning<T> {
  /** Runs once per batch; its outcome decides the settles (see `BatchOutcome`). */
  handler: BatchHandler<T>;
}

/** The fields of `BatchSinkOptions` besides the handler. */
export interface BatchSinkTuning<T extends JsonValue = JsonValue> {
  /** Settles go through it (settle + confirm in one step, coalesced). With `transaction: true`, a `RheoProducer` (its `backend` and `confirm` are used). */
  producer: LeaseSettler<T> & Partial<Pick<RheoProducer<T>, 'backend' | 'confirm'>>;
  /**
   * Runs each batch in a transaction on a connection of the backend's pool
   * and hands the handler its `client`. When every lease of the batch acks
   * or rejects, those settles join the transaction and commit with the
   * handler's writes; a throw, a `retry`, a `release`, an invalid outcome or
   * a stale lease in the batch rolls everything back, and the leases are
   * nacked outside it (a stale lease is reported as `lease-lost`). Needs the
   * backend's `transactions` capability (`unsupported` otherwise). Default false.
   */
  transaction?: boolean;
  /** A batch closes at this many leases. Default 100. Keep it at or below the producer's `maxDemand`, or batches close only on the timer. */
  batchSize?: number;
  /** ...or this long after its first lease, whichever comes first. Default 1000. */
  batchTimeoutMs?: number;
  /** Batches handled at once. Default 1. */
  concurrency?: number;
  /**
   * Broadway's `batch_key`: a batch holds leases of one key only. Each key
   * fills its own batch (by `batchSize` or `batchTimeoutMs`), so a batch is
   * never split across keys. Default: one batch for all leases.
   */
  batchKey?: (lease: Lease<T>) => string;
  /** What a throw of the handler does to the batch: `'nack'` (retry) or `'reject'` (dead-letter). Default: the producer's `onFailure`, else `'nack'`. */
  onFailure?: FailurePolicy;
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

/** Every option `createBatchSink` takes; any other key is refused. */
const OPTION_KEYS = optionKeys<BatchSinkOptions>()('producer', 'handler', 'transaction', 'batchSize', 'batchTimeoutMs', 'concurrency', 'batchKey', 'onFailure', 'timers');

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
  readonly #producer: BatchSinkTuning<T>['producer'];
  readonly #telemetry: RheoTelemetry | null;
  readonly #handler: BatchHandler<T>;
  readonly #begin: (() => Promise<OwnedTransaction>) | null;
  readonly #concurrency: number;
  readonly #onFailure: FailurePolicy;
  readonly #batchKey: ((lease: Lease<T>) => string) | null;
  readonly #newCollector: (key: string | undefined) => BatchCollector<Lease<T>>;
  /** The open batch; with `batchKey`, one per key that has an open batch. */
  readonly #collectors = new Map<string | undefined, BatchCollector<Lease<T>>>();
  /** Processor values of accepted leases that came as `{ lease, value }`, by lease id; created on the first one. */
  #values: Map<string, unknown> | null = null;
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
    assertKnownKeys('createBatchSink options', options, OPTION_KEYS);
    const handler = (options as Partial<BatchSinkOptions<T>> | null)?.handler;
    if (typeof handler !== 'function' || !options.producer) {
      throw invalidArgument('createBatchSink expects { producer, handler(leases, { signal }), batchSize?, batchTimeoutMs?, concurrency? }');
    }
    const batchSize = optionalInteger('batchSize', options.batchSize, 100, { min: 1, max: 100_000 });
    const batchTimeoutMs = optionalInteger('batchTimeoutMs', options.batchTimeoutMs, 1000, { min: 1, max: 3600_000 });
    const concurrency = optionalInteger('concurrency', options.concurrency, 1, { min: 1, max: 10_000 });
    // Every batch holds at least one lease: more batches at once than leases held never run.
    assertConcurrencyWithinDemand('createBatchSink', concurrency, options.producer);
    if (options.batchKey !== undefined && typeof options.batchKey !== 'function') {
      throw invalidArgument('createBatchSink: batchKey must be a function of the lease returning a string');
    }
    const onFailure = failurePolicyOf('createBatchSink', options.onFailure, options.producer);
    const begin = transactionOf(options.producer, options.transaction);
    super({ objectMode: true, highWaterMark: 1 });
    this.batchSize = batchSize;
    this.batchTimeoutMs = batchTimeoutMs;
    this.#producer = options.producer;
    this.#telemetry = telemetryOf(options.producer);
    this.#handler = handler;
    this.#begin = begin;
    this.#concurrency = concurrency;
    this.#onFailure = onFailure;
    this.#batchKey = options.batchKey ?? null;
    const timers = options.timers ?? options.producer.timers;
    this.#newCollector = (key) =>
      new BatchCollector<Lease<T>>({
        size: batchSize,
        intervalMs: batchTimeoutMs,
        timers,
        onFlush: (leases, reason) => {
          // A key's collector lives only while its batch is open, so keys seen once cost nothing later.
          this.#collectors.delete(key);
          this.#dispatch(leases, reason, key);
        },
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

  /** Leases in the batches still open (with `batchKey`, summed over the keys). */
  get openBatchLength(): number {
    let length = 0;
    for (const collector of this.#collectors.values()) length += collector.length;
    return length;
  }

  override _write(item: unknown, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    let lease: Lease<T>;
    let key: string | undefined;
    try {
      const intake = intakeOf<T>('createBatchSink', item);
      lease = intake.lease;
      if (this.#batchKey) {
        key = this.#batchKey(lease);
        if (typeof key !== 'string') throw invalidArgument(`createBatchSink: batchKey must return a string, got ${typeof key}`);
      }
      if (intake.mapped) (this.#values ??= new Map()).set(lease.leaseId, intake.value);
    } catch (error) {
      return callback(error as Error);
    }
    let collector = this.#collectors.get(key);
    if (collector === undefined) {
      collector = this.#newCollector(key);
      this.#collectors.set(key, collector);
    }
    collector.add(lease);
    callback();
  }

  override _final(callback: (error?: Error | null) => void): void {
    for (const collector of [...this.#collectors.values()]) collector.flush('end');
    this.#whenIdle().then(() => {
      this.#producer.off('lease-lost', this.#onLost);
      callback();
    }, callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#shutdown.abort(error ?? new Error('batch sink destroyed'));
    const open = [...this.#collectors.values()].flatMap((collector) => collector.take());
    this.#collectors.clear();
    this.#values = null;
    const unstarted = [...open, ...this.#queued.drain().flatMap((batch) => batch.leases)];
    this.#producer.off('lease-lost', this.#onLost);
    Promise.all(unstarted.map((lease) => settleLease(this.#producer, lease, { kind: 'release' }, this))).then(
      () => callback(error),
      () => callback(error),
    );
  }

  #dispatch(leases: Lease<T>[], reason: FlushReason, key: string | undefined): void {
    this.#queued.push({ leases, reason, key });
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
      const task = this.#run(batch).then(this.#ran, this.#ran);
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

  async #run({ leases: batch, reason, key }: ClosedBatch<T>): Promise<void> {
    // Leases lost while waiting (renewal answered stale_lease) would only be refused at settle time.
    const leases = batch.filter((lease) => !this.#lost.take(lease.leaseId));
    const values = this.#takeValues(batch);
    if (leases.length === 0) return;
    let settlements: Array<Settlement | null>;
    const scope = this.#telemetry?.processBatch(leases) ?? null;
    let tx: OwnedTransaction | null = null;
    try {
      if (this.#begin) tx = await this.#begin();
      const context: BatchContext = {
        signal: this.#shutdown.signal,
        reason,
        ...(tx ? { client: tx.client } : {}),
        ...(values ? { values: leases.map((lease) => values.get(lease.leaseId)) } : {}),
        ...(key !== undefined ? { key } : {}),
      };
      const outcome = await (scope ? scope.run(() => this.#handler(leases, context)) : this.#handler(leases, context));
      scope?.handled();
      settlements = this.#settlementsOf(leases, outcome);
    } catch (error) {
      scope?.handled(error);
      await tx?.rollback();
      tx = null;
      if (this.#shutdown.signal.aborted) settlements = leases.map(() => ({ kind: 'release' }));
      else {
        this.emit('batch-error', { leases, error });
        const failed = failureSettlement(error, this.#onFailure);
        settlements = leases.map(() => failed);
      }
    }
    if (tx) {
      const sink = { signal: this.#shutdown.signal, producer: this.#producer, events: this };
      settlements = await settleInTransaction(sink, tx, leases, settlements as Settlement[]);
    }
    // The batch slot frees now; the settles (one coalesced call) are awaited by _final.
    const settles = Promise.all(
      leases.map((lease, i) => {
        const settlement = settlements[i];
        return settlement ? settleLease(this.#producer, lease, settlement, this) : undefined;
      }),
    );
    const task = settles.then(() => undefined);
    this.#tasks.add(task);
    void task.finally(() => this.#tasks.delete(task));
  }

  /** The processor values of a batch's leases (taken out of the sink's map), or `null` when none came mapped. */
  #takeValues(batch: Lease<T>[]): Map<string, unknown> | null {
    const all = this.#values;
    if (all === null) return null;
    let values: Map<string, unknown> | null = null;
    for (const lease of batch) {
      if (!all.has(lease.leaseId)) continue;
      (values ??= new Map()).set(lease.leaseId, all.get(lease.leaseId));
      all.delete(lease.leaseId);
    }
    return values;
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
    return leases.map(() => failureSettlement(error, 'nack'));
  }
}
