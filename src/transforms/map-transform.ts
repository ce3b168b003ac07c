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

/** A lease travelling with the value computed from it; settle `lease` downstream (sinks take it as it is). */
export type { Mapped } from '../runtime/lease-outcome.js';

export interface MapTransformOptions<T extends JsonValue, R> {
  map(lease: Lease<T>, context: { signal: AbortSignal }): R | Promise<R>;
  /** Maps running at once; output order is input order regardless. Default 1. */
  concurrency?: number;
  /**
   * When given, a `map` that throws settles its lease by the failure policy
   * (nack with the message, or reject) and drops it from the output, and
   * leases not yet passed on are released on destroy. Without it, a throw
   * fails the stream. `throw rejectLease(reason)` always dead-letters.
   */
  producer?: LeaseSettler<T>;
  /** What a throw does to its lease: `'nack'` (retry) or `'reject'` (dead-letter). Default: the producer's `onFailure`, else `'nack'`. */
  onFailure?: FailurePolicy;
}

interface Slot<T extends JsonValue, R> {
  lease: Lease<T>;
  state: 'running' | 'done' | 'failed';
  value?: R;
  error?: unknown;
}

/** Every option `createMapTransform` takes; any other key is refused. */
const OPTION_KEYS = optionKeys<MapTransformOptions<JsonValue, unknown>>()('map', 'concurrency', 'producer', 'onFailure');

/**
 * Maps leases with bounded concurrency and emits `{ lease, value }` in input
 * order. It never settles a lease that mapped successfully: the lease rides
 * along to whoever makes the value durable.
 */
export function createMapTransform<T extends JsonValue, R>(options: MapTransformOptions<T, R>): MapTransform<T, R> {
  return new MapTransform(options);
}

/** Typed overloads for the transform's own events. */
export interface MapTransform<T extends JsonValue, R> {
  on<E extends keyof SettlingStreamEvents<T>>(event: E, listener: (...args: SettlingStreamEvents<T>[E]) => void): this;
  on(event: 'data', listener: (mapped: Mapped<T, R>) => void): this;
  on(event: string | symbol, listener: (...args: unknown[]) => void): this;
}

// Declaration merging adds typed event overloads; the interface declares no fields.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class MapTransform<T extends JsonValue, R> extends Transform {
  readonly concurrency: number;
  readonly #map: MapTransformOptions<T, R>['map'];
  readonly #producer: LeaseSettler<T> | undefined;
  readonly #onFailure: FailurePolicy;
  readonly #slots: Slot<T, R>[] = [];
  readonly #settles = new Set<Promise<void>>();
  readonly #shutdown = new AbortController();
  #waitingWrite: (() => void) | null = null;
  #waitingFlush: (() => void) | null = null;

  constructor(options: MapTransformOptions<T, R>) {
    assertKnownKeys('createMapTransform options', options, OPTION_KEYS);
    if (options === null || typeof options !== 'object' || typeof options.map !== 'function') {
      throw invalidArgument('createMapTransform expects { map(lease, { signal }), concurrency?, producer? }');
    }
    const concurrency = optionalInteger('concurrency', options.concurrency, 1, { min: 1, max: 10_000 });
    super({ objectMode: true, highWaterMark: concurrency });
    this.concurrency = concurrency;
    this.#map = options.map;
    this.#producer = options.producer;
    this.#onFailure = failurePolicyOf('createMapTransform', options.onFailure, options.producer);
  }

  override _transform(lease: Lease<T>, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    const slot: Slot<T, R> = { lease, state: 'running' };
    this.#slots.push(slot);
    const run = async (): Promise<R> => this.#map(lease, { signal: this.#shutdown.signal });
    run().then(
      (value) => {
        slot.state = 'done';
        slot.value = value;
        this.#emitReady();
      },
      (error: unknown) => {
        // Stryker disable next-line StringLiteral: equivalent: a state is only ever compared with 'running' and 'done'
        slot.state = 'failed';
        slot.error = error;
        this.#emitReady();
      },
    );
    if (this.#slots.length < this.concurrency) callback();
    else this.#waitingWrite = () => callback();
  }

  override _flush(callback: (error?: Error | null) => void): void {
    const finish = (): void => {
      Promise.allSettled([...this.#settles]).then(() => callback());
    };
    if (this.#slots.length === 0) finish();
    else this.#waitingFlush = finish;
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#shutdown.abort(error ?? new Error('map transform destroyed'));
    const unsent = this.#slots.splice(0).map((s) => s.lease);
    const producer = this.#producer;
    if (!producer || unsent.length === 0) return callback(error);
    Promise.all(unsent.map((lease) => settleLease(producer, lease, { kind: 'release' }, this))).then(() =>
      callback(error),
    );
  }

  #emitReady(): void {
    while (this.#slots.length > 0 && this.#slots[0]!.state !== 'running' && !this.destroyed) {
      const slot = this.#slots.shift()!;
      if (slot.state === 'done') {
        this.push({ lease: slot.lease, value: slot.value as R } satisfies Mapped<T, R>);
        continue;
      }
      if (!this.#producer) {
        this.destroy(slot.error instanceof Error ? slot.error : new Error(String(slot.error)));
        return;
      }
      this.emit('handler-error', { lease: slot.lease, error: slot.error });
      const settle = settleLease(this.#producer, slot.lease, failureSettlement(slot.error, this.#onFailure), this);
      this.#settles.add(settle);
      // Stryker disable next-line ArrowFunction: equivalent but for memory: the set only feeds Promise.allSettled at the end, where a settled promise left in it changes nothing
      void settle.finally(() => this.#settles.delete(settle));
    }
    if (this.#waitingWrite && this.#slots.length < this.concurrency) {
      const resume = this.#waitingWrite;
      this.#waitingWrite = null;
      resume();
    }
    if (this.#waitingFlush && this.#slots.length === 0) {
      const finish = this.#waitingFlush;
      this.#waitingFlush = null;
      finish();
    }
  }
}
