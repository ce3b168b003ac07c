import { assertKnownKeys, optionKeys } from '../core/option-keys.js';
import { Transform } from 'node:stream';
import { RheoError, invalidArgument } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import { optionalInteger } from '../core/validation.js';
import type { Timers } from '../runtime/timers.js';
import {
  failurePolicyOf,
  failureSettlement,
  settleLease,
  type FailurePolicy,
  type LeaseSettler,
  type Settlement,
  type SettlingStreamEvents,
} from '../runtime/lease-outcome.js';
import { BatchCollector, type FlushReason } from '../runtime/batch-collector.js';

export interface WindowContext {
  signal: AbortSignal;
  /** Why the window closed: `every` leases, `everyMs` passed, or the stream ended. */
  reason: FlushReason;
  /** With `key`: the key every lease of this window shares. */
  key?: string;
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
  /**
   * Flow's `partition(key:)`: one window (and accumulator) per key. A key's
   * leases settle only when its own window emits. Needs `everyMs`, since
   * windows of many keys could otherwise hold every lease the producer may
   * hold while none of them fills.
   */
  key?: (lease: Lease<T>) => string;
  /**
   * Flow's `stages: n`, with `key`: triggers of windows whose keys hash to
   * different stages run in parallel, those of one stage one at a time, in
   * window order. Default 1.
   */
  stages?: number;
  /** What a throw in `reduce` or `trigger` does to the leases: `'nack'` or `'reject'`. Default: the producer's `onFailure`, else `'nack'`. */
  onFailure?: FailurePolicy;
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

/** Every option `createWindowTransform` takes; any other key is refused. */
const OPTION_KEYS = optionKeys<WindowTransformOptions<JsonValue, unknown, unknown>>()('producer', 'every', 'everyMs', 'initial', 'reduce', 'trigger', 'key', 'stages', 'onFailure', 'timers');

/**
 * Flow-style reduce over windows of leases, with Flow's settlement rule:
 * never settle inside the reducer; settle a window's leases only after its
 * trigger has emitted the aggregate. If the pipeline dies before the
 * trigger, the leases are released (on destroy) or expire, and are redelivered.
 * Triggers run one at a time, in window order (with `key` and `stages`, one
 * at a time per stage); the last partial windows trigger when the stream ends.
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

/** One open window: its leases (in the collector) and its accumulator. */
interface OpenWindow<T extends JsonValue, A> {
  collector: BatchCollector<Lease<T>>;
  accumulator: A;
}

// Declaration merging adds typed event overloads; the interface declares no fields.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class WindowTransform<T extends JsonValue, A, R> extends Transform {
  readonly #producer: LeaseSettler<T>;
  readonly #initial: () => A;
  readonly #reduce: (accumulator: A, lease: Lease<T>) => A;
  readonly #trigger: WindowTransformOptions<T, A, R>['trigger'];
  readonly #key: ((lease: Lease<T>) => string) | null;
  readonly #onFailure: FailurePolicy;
  readonly #every: number | undefined;
  readonly #everyMs: number | undefined;
  readonly #timers: Timers;
  /** Open windows by key (`undefined` without `key`); a window leaves the map when it closes. */
  readonly #windows = new Map<string | undefined, OpenWindow<T, A>>();
  readonly #shutdown = new AbortController();
  /** Triggers of one stage run one after another, in window order. */
  readonly #chains: Array<Promise<void>>;

  constructor(options: WindowTransformOptions<T, A, R>) {
    assertKnownKeys('createWindowTransform options', options, OPTION_KEYS);
    if (options === null || typeof options !== 'object' || typeof options.trigger !== 'function' || !options.producer) {
      throw invalidArgument('createWindowTransform expects { producer, trigger(acc, leases), every?, everyMs?, initial?, reduce?, key?, stages? }');
    }
    const maxDemand = options.producer.maxDemand;
    // Without every there is no count to fill (the collector check below refuses a window with neither); without maxDemand, no bound.
    if (options.everyMs === undefined && (options.every ?? 0) > (maxDemand ?? Number.POSITIVE_INFINITY)) {
      throw new RheoError(
        'invalid_argument',
        `window every ${options.every} can never fill: the producer holds at most maxDemand ${maxDemand} leases; raise maxDemand or add everyMs`,
      );
    }
    if (options.key !== undefined && typeof options.key !== 'function') {
      throw invalidArgument('createWindowTransform: key must be a function of the lease returning a string');
    }
    if (options.key !== undefined && options.everyMs === undefined) {
      throw invalidArgument(
        'createWindowTransform: windows per key need everyMs: partial windows of many keys could hold every lease the producer may hold while none fills',
      );
    }
    const stages = optionalInteger('stages', options.stages, 1, { min: 1, max: 1_000 });
    if (stages > 1 && options.key === undefined) throw invalidArgument('createWindowTransform: stages needs key (stages run windows of different keys in parallel)');
    const onFailure = failurePolicyOf('createWindowTransform', options.onFailure, options.producer);
    // The collector checks every and everyMs; fail here, at construction, rather than at the first lease.
    // Stryker disable next-line LogicalOperator: equivalent: this collector only checks every and everyMs; it never schedules on its timers
    new BatchCollector<never>({ size: options.every, intervalMs: options.everyMs, timers: options.timers ?? options.producer.timers, onFlush: () => undefined });
    super({ objectMode: true });
    this.#producer = options.producer;
    this.#initial = options.initial ?? (() => [] as unknown as A);
    this.#reduce = options.reduce ?? ((acc, lease) => [...(acc as unknown as Lease<T>[]), lease] as unknown as A);
    this.#trigger = options.trigger;
    this.#key = options.key ?? null;
    this.#onFailure = onFailure;
    this.#every = options.every;
    this.#everyMs = options.everyMs;
    this.#timers = options.timers ?? options.producer.timers;
    this.#chains = Array.from({ length: stages }, () => Promise.resolve());
  }

  /** Windows open now (one per key with `key`). */
  get openWindows(): number {
    return this.#windows.size;
  }

  override _transform(lease: Lease<T>, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    let key: string | undefined;
    let window: OpenWindow<T, A>;
    try {
      if (this.#key) {
        key = this.#key(lease);
        if (typeof key !== 'string') throw invalidArgument(`createWindowTransform: key must return a string, got ${typeof key}`);
      }
      window = this.#windows.get(key) ?? this.#open(key);
      window.accumulator = this.#reduce(window.accumulator, lease);
    } catch (error) {
      this.emit('handler-error', { lease, error });
      this.#settleAll([lease], failureSettlement(error, this.#onFailure));
      return callback();
    }
    window.collector.add(lease);
    callback();
  }

  override _flush(callback: (error?: Error | null) => void): void {
    for (const window of [...this.#windows.values()]) window.collector.flush('end');
    Promise.all(this.#chains).then(() => callback(), callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#shutdown.abort(error ?? new Error('window transform destroyed'));
    const open = [...this.#windows.values()].flatMap((window) => window.collector.take());
    this.#windows.clear();
    Promise.all(open.map((lease) => settleLease(this.#producer, lease, { kind: 'release' }, this))).then(() =>
      callback(error),
    );
  }

  #open(key: string | undefined): OpenWindow<T, A> {
    const window: OpenWindow<T, A> = {
      accumulator: this.#initial(),
      collector: new BatchCollector<Lease<T>>({
        size: this.#every,
        intervalMs: this.#everyMs,
        timers: this.#timers,
        onFlush: (leases, reason) => this.#close(key, window, leases, reason),
      }),
    };
    this.#windows.set(key, window);
    return window;
  }

  #close(key: string | undefined, window: OpenWindow<T, A>, leases: Lease<T>[], reason: FlushReason): void {
    // The next lease of this key opens a fresh window (with a fresh accumulator).
    // Stryker disable next-line ConditionalExpression: equivalent for `true`: a window closes only while it is its key's open window (size and end flushes reach the current one, destroy cancels the timers)
    if (this.#windows.get(key) === window) this.#windows.delete(key);
    // Stryker disable next-line ConditionalExpression: equivalent for `false`: without key there is one stage, and stageOf answers 0 for one stage before reading the key
    const stage = key === undefined ? 0 : stageOf(key, this.#chains.length);
    this.#chains[stage] = this.#chains[stage]!.then(() => this.#runTrigger(window.accumulator, leases, reason, key));
  }

  async #runTrigger(accumulator: A, leases: Lease<T>[], reason: FlushReason, key: string | undefined): Promise<void> {
    let output: R | undefined;
    try {
      const context: WindowContext = key === undefined ? { signal: this.#shutdown.signal, reason } : { signal: this.#shutdown.signal, reason, key };
      output = await this.#trigger(accumulator, leases, context);
    } catch (error) {
      if (this.#shutdown.signal.aborted) return this.#settleAll(leases, { kind: 'release' });
      this.emit('trigger-error', { leases, error });
      return this.#settleAll(leases, failureSettlement(error, this.#onFailure));
    }
    if (this.destroyed) return this.#settleAll(leases, { kind: 'release' });
    if (output !== undefined) this.push(output);
    await this.#settleAll(leases, { kind: 'ack' });
  }

  async #settleAll(leases: Lease<T>[], settlement: Settlement): Promise<void> {
    await Promise.all(leases.map((lease) => settleLease(this.#producer, lease, settlement, this)));
  }
}

/** A key's stage: FNV-1a of its UTF-16 code units, so one key always lands on one stage. */
function stageOf(key: string, stages: number): number {
  // Stryker disable next-line ConditionalExpression: equivalent for `false`: any hash modulo 1 is 0; the early return only skips the hashing
  if (stages === 1) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % stages;
}
