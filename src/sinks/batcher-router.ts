import { assertKnownKeys, optionKeys } from '../core/option-keys.js';
import { Writable } from 'node:stream';
import { RheoError, invalidArgument } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import { optionalInteger } from '../core/validation.js';
import { intakeOf, settleLease, type LeaseSettler, type SettlingStreamEvents } from '../runtime/lease-outcome.js';

/** Options of `createBatcherRouter`. */
export interface BatcherRouterOptions<T extends JsonValue = JsonValue> {
  /** Releases leases routed to a batcher but not yet written to it, when the router is destroyed. */
  producer: Pick<LeaseSettler<T>, 'release'>;
  /**
   * The named batchers (usually `createBatchSink`s, each with its own
   * `batchSize`, `batchTimeoutMs` and `concurrency`). The router ends them
   * when it ends, and destroys them when it is destroyed.
   */
  batchers: Record<string, Writable>;
  /** Broadway's `put_batcher`: the name of the batcher for a lease (a processor's `{ lease, value }` routes by its lease). */
  route(lease: Lease<T>): string;
  /**
   * Items routed and not yet taken by their batcher, across batchers,
   * before the router's own writes wait. Leases from a producer are already
   * bounded by its `maxDemand`; this only guards other sources. Default 10000.
   */
  maxQueued?: number;
}

/** Every option `createBatcherRouter` takes; any other key is refused. */
const OPTION_KEYS = optionKeys<BatcherRouterOptions>()('producer', 'batchers', 'route', 'maxQueued');

/**
 * Fan-out to several batchers (Broadway's `put_batcher`): a `Writable` that
 * hands each lease, or a processor's `{ lease, value }`, to the batcher
 * `route` names. Backpressure holds per batcher: a batcher that is not
 * taking writes gets its items queued here while the others go on, so a
 * slow batcher stalls only the leases routed to it, until the producer
 * holds `maxDemand` of them. Settling is the batchers' own. A `route` that
 * throws or names no batcher, or an item that is no lease, fails the
 * stream with `invalid_argument`.
 */
export function createBatcherRouter<T extends JsonValue = JsonValue>(options: BatcherRouterOptions<T>): BatcherRouter<T> {
  return new BatcherRouter(options);
}

interface Lane {
  readonly name: string;
  readonly batcher: Writable;
  /** Items waiting for the batcher's `'drain'`, oldest first. */
  readonly queue: unknown[];
  /** Leases of `queue`, in the same order (for release on destroy). */
  readonly leases: Lease<JsonValue>[];
  routed: number;
}

/** Typed overloads for the router's own events. */
export interface BatcherRouter<T extends JsonValue = JsonValue> {
  on<E extends keyof SettlingStreamEvents<T>>(event: E, listener: (...args: SettlingStreamEvents<T>[E]) => void): this;
  on(event: string | symbol, listener: (...args: unknown[]) => void): this;
}

// Declaration merging adds typed event overloads; the interface declares no fields.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class BatcherRouter<T extends JsonValue = JsonValue> extends Writable {
  readonly #producer: Pick<LeaseSettler<T>, 'release'>;
  readonly #route: (lease: Lease<T>) => string;
  readonly #lanes = new Map<string, Lane>();
  readonly #maxQueued: number;
  #queued = 0;
  #waitingWrite: (() => void) | null = null;
  #waitingFinal: (() => void) | null = null;

  constructor(options: BatcherRouterOptions<T>) {
    assertKnownKeys('createBatcherRouter options', options, OPTION_KEYS);
    if (options === null || typeof options !== 'object' || typeof options.route !== 'function' || !options.producer) {
      throw invalidArgument('createBatcherRouter expects { producer, batchers: { name: sink, ... }, route(lease) }');
    }
    const batchers = options.batchers;
    if (batchers === null || typeof batchers !== 'object' || Object.keys(batchers).length === 0) {
      throw invalidArgument('createBatcherRouter: batchers must name at least one batcher, as { name: sink }');
    }
    for (const [name, batcher] of Object.entries(batchers)) {
      if (!(batcher instanceof Writable)) throw invalidArgument(`createBatcherRouter: batcher "${name}" must be a Writable (a batch sink)`);
    }
    const maxQueued = optionalInteger('maxQueued', options.maxQueued, 10_000, { min: 0, max: 1_000_000 });
    super({ objectMode: true, highWaterMark: 1 });
    this.#producer = options.producer;
    this.#route = options.route;
    this.#maxQueued = maxQueued;
    for (const [name, batcher] of Object.entries(batchers)) {
      const lane: Lane = { name, batcher, queue: [], leases: [], routed: 0 };
      this.#lanes.set(name, lane);
      batcher.on('drain', () => this.#flushLane(lane));
      // A batcher's failure is the router's: the pipeline fails with it.
      batcher.on('error', (error: Error) => this.destroy(error));
    }
  }

  /** Items routed to each batcher so far, by name. */
  get routedCounts(): Record<string, number> {
    return Object.fromEntries([...this.#lanes.values()].map((lane) => [lane.name, lane.routed]));
  }

  /** Items waiting for a batcher to take them, by name. */
  get queuedCounts(): Record<string, number> {
    return Object.fromEntries([...this.#lanes.values()].map((lane) => [lane.name, lane.queue.length]));
  }

  override _write(item: unknown, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    let lane: Lane | undefined;
    let lease: Lease<T>;
    try {
      lease = intakeOf<T>('createBatcherRouter', item).lease;
      const name = this.#route(lease);
      lane = typeof name === 'string' ? this.#lanes.get(name) : undefined;
      if (!lane) {
        const known = [...this.#lanes.keys()].map((n) => JSON.stringify(n)).join(', ');
        throw invalidArgument(`createBatcherRouter: route returned ${JSON.stringify(name) ?? String(name)}, which names no batcher (batchers: ${known})`);
      }
    } catch (error) {
      return callback(error instanceof RheoError ? error : invalidArgument(`createBatcherRouter: route threw: ${(error as Error)?.message ?? String(error)}`, { cause: error }));
    }
    lane.routed++;
    if (lane.queue.length === 0 && !lane.batcher.writableNeedDrain) {
      // Taken at once (a `false` answer still buffers the item: later ones wait for its 'drain').
      lane.batcher.write(item);
    } else {
      lane.queue.push(item);
      lane.leases.push(lease as Lease<JsonValue>);
      this.#queued++;
    }
    if (this.#queued <= this.#maxQueued) callback();
    else this.#waitingWrite = () => callback();
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.#waitingFinal = () => {
      const lanes = [...this.#lanes.values()];
      let open = lanes.length;
      const ended = (): void => {
        if (--open === 0) callback();
      };
      for (const lane of lanes) {
        if (lane.batcher.writableFinished) ended();
        else {
          lane.batcher.once('finish', ended);
          lane.batcher.end();
        }
      }
    };
    this.#maybeFinal();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const unwritten: Lease<JsonValue>[] = [];
    for (const lane of this.#lanes.values()) {
      unwritten.push(...lane.leases);
      lane.queue.length = 0;
      lane.leases.length = 0;
      if (!lane.batcher.destroyed) lane.batcher.destroy(error ?? undefined);
    }
    this.#queued = 0;
    const releases = unwritten.map((lease) => settleLease(this.#producer as LeaseSettler<JsonValue>, lease, { kind: 'release' }, this));
    Promise.all(releases).then(
      () => callback(error),
      () => callback(error),
    );
  }

  #flushLane(lane: Lane): void {
    while (lane.queue.length > 0 && !lane.batcher.destroyed) {
      const item = lane.queue.shift();
      lane.leases.shift();
      this.#queued--;
      if (!lane.batcher.write(item)) break;
    }
    if (this.#waitingWrite && this.#queued <= this.#maxQueued) {
      const resume = this.#waitingWrite;
      this.#waitingWrite = null;
      resume();
    }
    this.#maybeFinal();
  }

  #maybeFinal(): void {
    if (this.#waitingFinal === null || this.#queued > 0) return;
    const final = this.#waitingFinal;
    this.#waitingFinal = null;
    final();
  }
}
