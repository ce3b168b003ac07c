import { assertKnownKeys, optionKeys } from '../core/option-keys.js';
import { Transform } from 'node:stream';
import { invalidArgument } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import { optionalInteger } from '../core/validation.js';

import {
  failurePolicyOf,
  failureSettlement,
  settleLease,
  type FailurePolicy,
  type LeaseSettler,
  type Mapped,
  type SettlingStreamEvents,
} from '../runtime/lease-outcome.js';

export interface KeyOrderedTransformOptions<T extends JsonValue, R> {
  map(lease: Lease<T>, context: { signal: AbortSignal }): R | Promise<R>;
  /** Leases with the same key never run at once. Default: the event key, else its partition. */
  keyOf?: (lease: Lease<T>) => string;
  /** Maps running at once across different keys. Default 1. */
  concurrency?: number;
  /**
   * When given, a throw settles the lease by the failure policy and drops
   * it, and waiting leases are released on destroy; otherwise a throw fails
   * the stream. `throw rejectLease(reason)` always dead-letters.
   */
  producer?: LeaseSettler<T>;
  /** What a throw does to its lease: `'nack'` (retry) or `'reject'` (dead-letter). Default: the producer's `onFailure`, else `'nack'`. */
  onFailure?: FailurePolicy;
}

/** Every option `createKeyOrderedTransform` takes; any other key is refused. */
const OPTION_KEYS = optionKeys<KeyOrderedTransformOptions<JsonValue, unknown>>()('map', 'keyOf', 'concurrency', 'producer', 'onFailure');

/**
 * Maps leases with at most one lease per key in flight and different keys
 * in parallel up to `concurrency`. Leases of one key run and are emitted in
 * arrival order; across keys, output is in completion order. Emits
 * `{ lease, value }` like the map transform.
 */
export function createKeyOrderedTransform<T extends JsonValue, R>(
  options: KeyOrderedTransformOptions<T, R>,
): KeyOrderedTransform<T, R> {
  return new KeyOrderedTransform(options);
}

export function defaultLeaseKey(lease: Lease<JsonValue>): string {
  return lease.event.key === null ? `partition:${lease.event.partition}` : `key:${lease.event.key}`;
}

/** Typed overloads for the transform's own events. */
export interface KeyOrderedTransform<T extends JsonValue, R> {
  on<E extends keyof SettlingStreamEvents<T>>(event: E, listener: (...args: SettlingStreamEvents<T>[E]) => void): this;
  on(event: 'data', listener: (mapped: Mapped<T, R>) => void): this;
  on(event: string | symbol, listener: (...args: unknown[]) => void): this;
}

// Declaration merging adds typed event overloads; the interface declares no fields.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class KeyOrderedTransform<T extends JsonValue, R> extends Transform {
  readonly concurrency: number;
  readonly #map: KeyOrderedTransformOptions<T, R>['map'];
  readonly #keyOf: (lease: Lease<T>) => string;
  readonly #producer: LeaseSettler<T> | undefined;
  readonly #onFailure: FailurePolicy;
  /** Waiting leases per key, keys in first-arrival order. */
  readonly #waiting = new Map<string, Lease<T>[]>();
  readonly #busyKeys = new Set<string>();
  readonly #tasks = new Set<Promise<void>>();
  readonly #shutdown = new AbortController();
  #maxBusy = 0;

  constructor(options: KeyOrderedTransformOptions<T, R>) {
    assertKnownKeys('createKeyOrderedTransform options', options, OPTION_KEYS);
    if (options === null || typeof options !== 'object' || typeof options.map !== 'function') {
      throw invalidArgument('createKeyOrderedTransform expects { map(lease, { signal }), keyOf?, concurrency?, producer? }');
    }
    const concurrency = optionalInteger('concurrency', options.concurrency, 1, { min: 1, max: 10_000 });
    super({ objectMode: true });
    this.concurrency = concurrency;
    this.#map = options.map;
    this.#keyOf = options.keyOf ?? defaultLeaseKey;
    this.#producer = options.producer;
    this.#onFailure = failurePolicyOf('createKeyOrderedTransform', options.onFailure, options.producer);
  }

  /** Keys being mapped now. */
  get activeCount(): number {
    return this.#busyKeys.size;
  }

  /** Highest `activeCount` seen: a gauge for tests and tuning. */
  get maxActiveCount(): number {
    return this.#maxBusy;
  }

  override _transform(lease: Lease<T>, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    const key = this.#keyOf(lease);
    const queue = this.#waiting.get(key);
    if (queue) queue.push(lease);
    else this.#waiting.set(key, [lease]);
    this.#pump();
    callback();
  }

  override _flush(callback: (error?: Error | null) => void): void {
    const wait = async (): Promise<void> => {
      while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
    };
    wait().then(() => callback(), callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#shutdown.abort(error ?? new Error('key-ordered transform destroyed'));
    const waiting = [...this.#waiting.values()].flat();
    this.#waiting.clear();
    const producer = this.#producer;
    if (!producer || waiting.length === 0) return callback(error);
    Promise.all(waiting.map((lease) => settleLease(producer, lease, { kind: 'release' }, this))).then(() =>
      callback(error),
    );
  }

  #pump(): void {
    // Stryker disable next-line ConditionalExpression: equivalent: _destroy empties #waiting, so a pump after it finds nothing to start
    if (this.destroyed) return;
    for (const [key, queue] of this.#waiting) {
      if (this.#busyKeys.size >= this.concurrency) return;
      if (this.#busyKeys.has(key)) continue;
      const lease = queue.shift()!;
      if (queue.length === 0) this.#waiting.delete(key);
      this.#start(key, lease);
    }
  }

  #start(key: string, lease: Lease<T>): void {
    this.#busyKeys.add(key);
    this.#maxBusy = Math.max(this.#maxBusy, this.#busyKeys.size);
    const task = (async () => {
      try {
        const value = await this.#map(lease, { signal: this.#shutdown.signal });
        // Stryker disable next-line ConditionalExpression: equivalent: a push after destroy is a no-op (nothing is emitted)
        if (!this.destroyed) this.push({ lease, value } satisfies Mapped<T, R>);
      } catch (error) {
        if (!this.#producer) {
          this.destroy(error instanceof Error ? error : new Error(String(error)));
          return;
        }
        this.emit('handler-error', { lease, error });
        await settleLease(this.#producer, lease, failureSettlement(error, this.#onFailure), this);
      } finally {
        this.#busyKeys.delete(key);
        this.#pump();
      }
    })();
    this.#tasks.add(task);
    void task.finally(() => this.#tasks.delete(task));
  }
}
