import { Transform } from 'node:stream';
import { RheoError, invalidArgument } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import type { Timers } from '../runtime/timers.js';
import {
  settleLease,
  thrownSettlement,
  type LeaseSettler,
  type Settlement,
  type SettlingStreamEvents,
} from '../runtime/lease-outcome.js';
import { BatchCollector, type FlushReason } from '../runtime/batch-collector.js';

export interface WindowContext {
  signal: AbortSignal;
  /** Why the window closed: `every` leases, `everyMs` passed, or the stream ended. */
  reason: FlushReason;
}

export interface WindowTransformOptions<T extends JsonValue, A, R> {
  /** The window's leases are acked through it, after the trigger's output was pushed. */
  producer: LeaseSettler<T> & { readonly maxDemand?: number };
  /** Close the window every N leases. */
  every?: number;
  /** ...and/or this long after the window's first lease. */
  everyMs?: number;
  /** A fresh accumulator per window. Default: `() => []` (the accumulator is the window's leases). */
  initial?: () => A;
  /** Folds one lease into the accumulator. Never settle here. Default: appends the lease. */
  reduce?: (accumulator: A, lease: Lease<T>) => A;
  /**
   * Runs when the window closes, with the aggregate and the window's leases.
   * Its result (unless `undefined`) is pushed downstream; only then are the
   * leases acked. A throw nacks all of them.
   */
  trigger(accumulator: A, leases: Lease<T>[], context: WindowContext): R | undefined | Promise<R | undefined>;
  timers?: Timers;
}

export interface TriggerErrorInfo<T> {
  leases: Lease<T>[];
  error: unknown;
}

export interface WindowTransformEvents<T> extends SettlingStreamEvents<T> {
  /** The trigger threw; the window's leases are nacked. */
  'trigger-error': [info: TriggerErrorInfo<T>];
}

/**
 * Flow-style reduce over windows of leases, with Flow's settlement rule:
 * never settle inside the reducer; settle a window's leases only after its
 * trigger has emitted the aggregate. If the pipeline dies before the
 * trigger, the leases are released (on destroy) or expire, and are redelivered.
 * Triggers run one at a time, in window order; the last partial window
 * triggers when the stream ends.
 */
export function createWindowTransform<T extends JsonValue, A = Lease<T>[], R = unknown>(
  options: WindowTransformOptions<T, A, R>,
): WindowTransform<T, A, R> {
  return new WindowTransform(options);
}

/** Typed overloads for the transform's own events. */
// eslint-disable-next-line @typescript-eslint/no-unused-vars -- merged with the class, so it repeats its type parameters
export interface WindowTransform<T extends JsonValue, A, R> {
  on<E extends keyof WindowTransformEvents<T>>(event: E, listener: (...args: WindowTransformEvents<T>[E]) => void): this;
  on(event: 'data', listener: (output: R) => void): this;
  on(event: string | symbol, listener: (...args: unknown[]) => void): this;
}

// Declaration merging adds typed event overloads; the interface declares no fields.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class WindowTransform<T extends JsonValue, A, R> extends Transform {
  readonly #producer: LeaseSettler<T>;
  readonly #initial: () => A;
  readonly #reduce: (accumulator: A, lease: Lease<T>) => A;
  readonly #trigger: WindowTransformOptions<T, A, R>['trigger'];
  readonly #collector: BatchCollector<Lease<T>>;
  readonly #shutdown = new AbortController();
  #accumulator: A;
  /** Triggers run one after another, in window order. */
  #chain: Promise<void> = Promise.resolve();

  constructor(options: WindowTransformOptions<T, A, R>) {
    if (options === null || typeof options !== 'object' || typeof options.trigger !== 'function' || !options.producer) {
      throw invalidArgument('createWindowTransform expects { producer, trigger(acc, leases), every?, everyMs?, initial?, reduce? }');
    }
    const maxDemand = options.producer.maxDemand;
    if (options.everyMs === undefined && options.every !== undefined && maxDemand !== undefined && options.every > maxDemand) {
      throw new RheoError(
        'invalid_argument',
        `window every ${options.every} can never fill: the producer holds at most maxDemand ${maxDemand} leases; raise maxDemand or add everyMs`,
      );
    }
    super({ objectMode: true });
    this.#producer = options.producer;
    this.#initial = options.initial ?? (() => [] as unknown as A);
    this.#reduce = options.reduce ?? ((acc, lease) => [...(acc as unknown as Lease<T>[]), lease] as unknown as A);
    this.#trigger = options.trigger;
    this.#accumulator = this.#initial();
    this.#collector = new BatchCollector<Lease<T>>({
      size: options.every,
      intervalMs: options.everyMs,
      timers: options.timers ?? options.producer.timers,
      onFlush: (leases, reason) => this.#close(leases, reason),
    });
  }

  override _transform(lease: Lease<T>, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    try {
      this.#accumulator = this.#reduce(this.#accumulator, lease);
    } catch (error) {
      this.emit('handler-error', { lease, error });
      this.#settleAll([lease], thrownSettlement(error));
      return callback();
    }
    this.#collector.add(lease);
    callback();
  }

  override _flush(callback: (error?: Error | null) => void): void {
    this.#collector.flush('end');
    this.#chain.then(() => callback(), callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#shutdown.abort(error ?? new Error('window transform destroyed'));
    const open = this.#collector.take();
    Promise.all(open.map((lease) => settleLease(this.#producer, lease, { kind: 'release' }, this))).then(() =>
      callback(error),
    );
  }

  #close(leases: Lease<T>[], reason: FlushReason): void {
    const accumulator = this.#accumulator;
    this.#accumulator = this.#initial();
    this.#chain = this.#chain.then(() => this.#runTrigger(accumulator, leases, reason));
  }

  async #runTrigger(accumulator: A, leases: Lease<T>[], reason: FlushReason): Promise<void> {
    let output: R | undefined;
    try {
      output = await this.#trigger(accumulator, leases, { signal: this.#shutdown.signal, reason });
    } catch (error) {
      if (this.#shutdown.signal.aborted) return this.#settleAll(leases, { kind: 'release' });
      this.emit('trigger-error', { leases, error });
      return this.#settleAll(leases, thrownSettlement(error));
    }
    if (this.destroyed) return this.#settleAll(leases, { kind: 'release' });
    if (output !== undefined) this.push(output);
    await this.#settleAll(leases, { kind: 'ack' });
  }

  async #settleAll(leases: Lease<T>[], settlement: Settlement): Promise<void> {
    await Promise.all(leases.map((lease) => settleLease(this.#producer, lease, settlement, this)));
  }
}
