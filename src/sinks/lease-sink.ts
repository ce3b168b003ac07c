import { Writable } from 'node:stream';
import pLimit, { type LimitFunction } from 'p-limit';
import { invalidArgument } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import { optionalInteger } from '../core/validation.js';
import type { LeaseLostInfo } from '../producer/producer-options.js';
import { LazyAbort } from './lazy-abort.js';

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

export interface LeaseHandlerContext {
  /** Aborted when the sink is destroyed or the producer loses this lease (renewal answered `stale_lease`). */
  signal: AbortSignal;
}

export interface LeaseSinkOptions<T extends JsonValue = JsonValue> {
  /** Settles go through it (settle + confirm in one step, coalesced). */
  producer: LeaseSettler<T>;
  /** Runs once per lease; its outcome decides the settle (see `LeaseOutcome`). */
  handle(lease: Lease<T>, context: LeaseHandlerContext): LeaseOutcome | Promise<LeaseOutcome>;
  /** Handlers running at once. Default 1. */
  concurrency?: number;
  /**
   * Leases accepted but not started before writes wait. Leases from a
   * producer are already bounded by its `maxDemand`; this only guards other
   * sources. Accepted leases are released (not lost) if the sink is destroyed.
   * Default 10000.
   */
  maxQueued?: number;
}

/**
 * An object-mode `Writable` that runs `handle(lease, { signal })` for every
 * lease with bounded concurrency (p-limit) and settles by the outcome.
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
  readonly #handle: LeaseSinkOptions<T>['handle'];
  readonly #limit: LimitFunction;
  readonly #maxQueued: number;
  readonly #queued = new Map<string, Lease<T>>();
  readonly #running = new Map<string, LazyAbort>();
  readonly #tasks = new Set<Promise<void>>();
  readonly #shutdown = new AbortController();
  #waitingWrite: (() => void) | null = null;
  readonly #lost = new LostLeases();
  readonly #onLost = (info: LeaseLostInfo<T>): void => {
    const running = this.#running.get(info.lease.leaseId);
    if (running) running.abort(info.error);
    else if (this.#queued.has(info.lease.leaseId)) this.#lost.add(info.lease.leaseId);
  };

  constructor(options: LeaseSinkOptions<T>) {
    if (options === null || typeof options !== 'object' || typeof options.handle !== 'function' || !options.producer) {
      throw invalidArgument('createLeaseSink expects { producer, handle(lease, { signal }), concurrency? }');
    }
    const concurrency = optionalInteger('concurrency', options.concurrency, 1, { min: 1, max: 10_000 });
    const maxQueued = optionalInteger('maxQueued', options.maxQueued, 10_000, { min: 0, max: 1_000_000 });
    super({ objectMode: true, highWaterMark: 1 });
    this.concurrency = concurrency;
    this.#maxQueued = maxQueued;
    this.#producer = options.producer;
    this.#handle = options.handle;
    this.#limit = pLimit({ concurrency, rejectOnClear: true });
    this.#producer.on('lease-lost', this.#onLost);
  }

  /** Handlers running now. */
  get activeCount(): number {
    return this.#running.size;
  }

  /** Leases accepted and waiting for a free slot. */
  get queuedCount(): number {
    return this.#queued.size;
  }

  override _write(lease: Lease<T>, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#queued.set(lease.leaseId, lease);
    const task = this.#limit(() => this.#run(lease)).catch(() => {
      // Cleared from the queue by destroy: _destroy releases the lease.
    });
    this.#tasks.add(task);
    void task.finally(() => {
      this.#tasks.delete(task);
      this.#resumeWrite();
    });
    if (this.#limit.pendingCount <= this.#maxQueued) callback();
    else this.#waitingWrite = () => callback();
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#whenIdle().then(() => {
      this.#producer.off('lease-lost', this.#onLost);
      callback();
    }, callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#shutdown.abort(error ?? new Error('lease sink destroyed'));
    this.#limit.clearQueue();
    for (const abort of this.#running.values()) abort.abort(this.#shutdown.signal.reason);
    const unstarted = [...this.#queued.values()];
    this.#queued.clear();
    this.#producer.off('lease-lost', this.#onLost);
    Promise.all(unstarted.map((lease) => settleLease(this.#producer, lease, { kind: 'release' }, this))).then(
      () => callback(error),
      () => callback(error),
    );
  }

  async #whenIdle(): Promise<void> {
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
  }

  #resumeWrite(): void {
    if (this.#waitingWrite && this.#limit.pendingCount <= this.#maxQueued) {
      const resume = this.#waitingWrite;
      this.#waitingWrite = null;
      resume();
    }
  }

  async #run(lease: Lease<T>): Promise<void> {
    if (!this.#queued.delete(lease.leaseId)) return;
    // Lost while queued (renewal answered stale_lease): its settle would be refused anyway.
    if (this.#lost.take(lease.leaseId)) return;
    const abort = new LazyAbort();
    this.#running.set(lease.leaseId, abort);
    const context = {} as LeaseHandlerContext;
    Object.defineProperty(context, 'signal', { get: () => abort.signal, enumerable: true });
    let settlement: Settlement;
    try {
      settlement = settlementOf(await this.#handle(lease, context));
    } catch (error) {
      if (this.#shutdown.signal.aborted) settlement = { kind: 'release' };
      else {
        this.emit('handler-error', { lease, error });
        settlement = thrownSettlement(error);
      }
    } finally {
      this.#running.delete(lease.leaseId);
    }
    // The slot frees as soon as the handler is done: the settle joins the
    // producer's next coalesced call while the next handler runs. Demand stays
    // bounded because the producer confirms only once the settle is answered.
    this.#track(settleLease(this.#producer, lease, settlement, this));
  }

  #track(task: Promise<void>): void {
    this.#tasks.add(task);
    void task.finally(() => this.#tasks.delete(task));
  }
}
