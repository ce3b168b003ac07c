import type { AppendOutcome, Backend, BackendCapabilities, LeaseRef, SettleOp, TransactionClient } from './core/backend.js';
import { requireCapability } from './core/capabilities.js';
import { RheoTransaction } from './transaction/rheo-transaction.js';
import type { PingResult } from './core/health.js';
import { queryPages } from './core/query-pages.js';
import {
  MAX_LEASE_MS,
  MAX_LIMIT,
  MAX_PARTITIONS,
  assertBatchSize,
  assertOptions,
  leaseRef,
  messageOf,
  normalizeEventIds,
  normalizePartitions,
  normalizeQuery,
  normalizeReplay,
  normalizeStart,
  prepareAppend,
  settleOp,
} from './core/arguments.js';
import { systemClock, type Clock } from './core/clock.js';
import {
  DEFAULT_MAX_BATCH_BYTES,
  DEFAULT_MAX_EVENT_BYTES,
  DEFAULT_MAX_FETCH_BYTES,
  MAX_CONFIGURABLE_BYTES,
  type RheoLimits,
} from './core/limits.js';
import { RheoError, invalidArgument, isRheoError } from './core/errors.js';
import type {
  AppendInput,
  AppendedEvent,
  DeadLetter,
  DeadLetterOptions,
  FetchOptions,
  GroupInfo,
  GroupOptions,
  JsonValue,
  LagReport,
  Lease,
  NackOptions,
  QueryOptions,
  QueryResult,
  ReadOptions,
  RedriveOptions,
  RenewOptions,
  ReplayOptions,
  ReplaySpec,
  ResetOptions,
  RheoEvent,
  SettleRequest,
  SettleResult,
  StreamInfo,
  StreamOptions,
} from './core/types.js';
import { assertName, assertString, describe, optionalInteger } from './core/validation.js';
import { memoryBackend } from './backends/memory/memory-backend.js';
import { RheoProducer } from './producer/rheo-producer.js';
import type { ProducerOptions } from './producer/producer-options.js';
import { createConsumer, type Consumer } from './consumer/consumer.js';
import type { ConsumeOptions } from './consumer/consumer-types.js';

export interface RheoDefaults {
  leaseMs: number;
  maxAttempts: number;
  maxDemand: number;
  pollMs: number;
  /**
   * Byte budget of a `fetch`, `read`, `query` or `deadLetters` without its own `maxBytes`:
   * the events' sizes (payload plus metadata, core/json-size.ts) add up to at
   * most this, except that one event always comes back if any is there.
   * Default 16 MiB.
   */
  maxFetchBytes: number;
}

export interface RheoOptions {
  /** Defaults to a fresh in-memory backend using `clock`. */
  backend?: Backend;
  defaults?: Partial<RheoDefaults>;
  /** Time source for the default memory backend and for rheo's own timers. */
  clock?: Clock;
  /** Event and batch size limits (core/limits.ts); defaults 1 MiB per event, 64 MiB per batch. */
  limits?: Partial<RheoLimits>;
}

export type { SettleRequest } from './core/types.js';

export function createRheo(options: RheoOptions = {}): Rheo {
  return new Rheo(options);
}

/**
 * The facade: validates and normalises every argument, then delegates to the
 * backend. A call that fails validation reaches no backend, so it writes nothing.
 */
export class Rheo {
  readonly backend: Backend;
  readonly clock: Clock;
  readonly defaults: Readonly<RheoDefaults>;
  /** How to end each producer and consumer this instance made; `close()` runs them all. */
  readonly #attached = new Set<() => Promise<void>>();
  readonly limits: Readonly<RheoLimits>;
  #closed = false;
  /** Settles outlive `#closed` until the attached producers and consumers have ended. */
  #settlesClosed = false;
  #closing: Promise<void> | null = null;

  constructor(options: RheoOptions = {}) {
    if (options === null || typeof options !== 'object') throw invalidArgument('createRheo options must be an object');
    this.clock = options.clock ?? systemClock;
    const d = options.defaults ?? {};
    this.defaults = Object.freeze({
      leaseMs: optionalInteger('defaults.leaseMs', d.leaseMs, 30_000, { min: 1, max: MAX_LEASE_MS }),
      maxAttempts: optionalInteger('defaults.maxAttempts', d.maxAttempts, 5, { min: 1, max: 1_000_000 }),
      maxDemand: optionalInteger('defaults.maxDemand', d.maxDemand, 10, { min: 1, max: MAX_LIMIT }),
      pollMs: optionalInteger('defaults.pollMs', d.pollMs, 200, { min: 1, max: 3600_000 }),
      maxFetchBytes: optionalInteger('defaults.maxFetchBytes', d.maxFetchBytes, DEFAULT_MAX_FETCH_BYTES, {
        min: 1,
        max: MAX_CONFIGURABLE_BYTES,
      }),
    });
    const l = options.limits ?? {};
    assertOptions('limits', l);
    this.limits = Object.freeze({
      maxEventBytes: optionalInteger('limits.maxEventBytes', l.maxEventBytes, DEFAULT_MAX_EVENT_BYTES, {
        min: 2,
        max: MAX_CONFIGURABLE_BYTES,
      }),
      maxBatchBytes: optionalInteger('limits.maxBatchBytes', l.maxBatchBytes, DEFAULT_MAX_BATCH_BYTES, {
        min: 2,
        max: MAX_CONFIGURABLE_BYTES,
      }),
    });
    this.backend = options.backend ?? memoryBackend({ clock: this.clock });
  }

  get closed(): boolean {
    return this.#closed;
  }

  async migrate(): Promise<void> {
    this.#assertOpen();
    await this.#call(() => this.backend.migrate());
  }

  /** What the backend supports (read-only); see `BackendCapabilities`. */
  get capabilities(): Readonly<BackendCapabilities> {
    return this.backend.capabilities;
  }

  /**
   * Health check: one cheap round trip to the store (memory: a no-op),
   * timed on the monotonic clock, never the injectable one, which a test
   * may hold still. An unreachable store is `backend_unavailable`.
   */
  async ping(): Promise<PingResult> {
    this.#assertOpen();
    const started = performance.now();
    const schemaVersion = await this.#call(() => this.backend.ping());
    return { backend: this.backend.name, roundTripMs: performance.now() - started, schemaVersion };
  }

  /**
   * Idempotent. From the call on, every new call fails with `closed`. Every
   * producer and consumer this instance made ends at once: a producer is
   * destroyed with a `closed` error (without one when nothing listens for
   * errors), a consumer stops as after `stop({ timeoutMs: 0 })`. Settles they
   * issue meanwhile, and the release of leases never handed out, still go
   * through. Then the backend closes, ending only what rheo created (a
   * borrowed pool stays open), and no rheo timer or connection is left to
   * keep the process alive.
   */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown();
    return this.#closing;
  }

  async #shutdown(): Promise<void> {
    this.#closed = true;
    try {
      await Promise.allSettled([...this.#attached].map((end) => end()));
    } finally {
      this.#settlesClosed = true;
      await this.backend.close();
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ---- streams and groups -------------------------------------------------

  async createStream(name: string, options: StreamOptions = {}): Promise<void> {
    this.#assertOpen();
    assertName('stream', name);
    assertOptions('createStream options', options);
    const partitions = optionalInteger('partitions', options.partitions, 1, { min: 1, max: MAX_PARTITIONS });
    await this.#call(() => this.backend.createStream(name, partitions));
  }

  async listStreams(): Promise<StreamInfo[]> {
    this.#assertOpen();
    return this.#call(() => this.backend.listStreams());
  }

  async createGroup(stream: string, group: string, options: GroupOptions = {}): Promise<void> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('createGroup options', options);
    const start = normalizeStart(options.startAfter, options.startAt);
    const maxAttempts = optionalInteger('maxAttempts', options.maxAttempts, this.defaults.maxAttempts, {
      min: 1,
      max: 1_000_000,
    });
    await this.#call(() => this.backend.createGroup(stream, group, { start, maxAttempts }));
  }

  async listGroups(stream: string): Promise<string[]> {
    this.#assertOpen();
    assertName('stream', stream);
    return this.#call(() => this.backend.listGroups(stream));
  }

  async groupInfo(stream: string, group: string): Promise<GroupInfo> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    return this.#call(() => this.backend.groupInfo(stream, group));
  }

  // ---- the log ------------------------------------------------------------

  /** Resolves to the stored event with `existed`: whether an event with the input's `id` was already stored. */
  async append<T extends JsonValue = JsonValue>(stream: string, input: AppendInput<T>): Promise<AppendedEvent<T>> {
    this.#assertOpen();
    assertName('stream', stream);
    const prepared = prepareAppend(this.clock, input, 'append input', {
      stream,
      maxEventBytes: this.limits.maxEventBytes,
    });
    const [outcome] = await this.#call(() => this.backend.append(stream, [prepared]));
    if (!outcome) throw new RheoError('internal', `append to stream "${stream}" returned no event`, { stream });
    return appended<T>(outcome);
  }

  /**
   * All or nothing: one bad input rejects the whole batch before anything is
   * written. One event per input, in order, each with `existed`.
   */
  async appendBatch<T extends JsonValue = JsonValue>(
    stream: string,
    inputs: AppendInput<T>[],
  ): Promise<AppendedEvent<T>[]> {
    this.#assertOpen();
    assertName('stream', stream);
    if (!Array.isArray(inputs)) throw invalidArgument(`appendBatch expects an array of inputs, got ${describe(inputs)}`);
    if (inputs.length > 100_000) throw invalidArgument('appendBatch accepts at most 100000 inputs per call');
    const limits = { stream, maxEventBytes: this.limits.maxEventBytes };
    const prepared = inputs.map((input, i) => prepareAppend(this.clock, input, `appendBatch input [${i}]`, limits));
    if (prepared.length === 0) return [];
    assertBatchSize(stream, prepared, this.limits.maxBatchBytes);
    const outcomes = await this.#call(() => this.backend.append(stream, prepared));
    return outcomes.map((outcome) => appended<T>(outcome));
  }

  async read<T extends JsonValue = JsonValue>(stream: string, options: ReadOptions = {}): Promise<RheoEvent<T>[]> {
    this.#assertOpen();
    assertName('stream', stream);
    assertOptions('read options', options);
    const partition = optionalInteger('partition', options.partition, 0, { max: MAX_PARTITIONS });
    const after = optionalInteger('after', options.after, 0);
    const limit = optionalInteger('limit', options.limit, 100, { min: 1, max: MAX_LIMIT });
    const maxBytes = this.#maxBytes(options.maxBytes);
    return (await this.#call(() => this.backend.read(stream, partition, after, limit, maxBytes))) as RheoEvent<T>[];
  }

  async query<T extends JsonValue = JsonValue>(stream: string, options: QueryOptions = {}): Promise<QueryResult<T>> {
    this.#assertOpen();
    assertName('stream', stream);
    assertOptions('query options', options);
    const q = normalizeQuery(stream, options, this.defaults.maxFetchBytes);
    return (await this.#call(() => this.backend.query(stream, q))) as QueryResult<T>;
  }

  /**
   * Every event of a query, page after page, without handling cursors: the
   * options are those of `query` (`limit` and `maxBytes` size each page) and
   * are checked at once, so bad input throws here. A page is fetched only
   * when iteration needs an event past the previous one, and leaving a
   * `for await` early fetches nothing more.
   */
  queryAll<T extends JsonValue = JsonValue>(stream: string, options: QueryOptions = {}): AsyncIterable<RheoEvent<T>> {
    this.#assertOpen();
    assertName('stream', stream);
    assertOptions('query options', options);
    const first = normalizeQuery(stream, options, this.defaults.maxFetchBytes);
    return queryPages<T>(first, async (q) => {
      this.#assertOpen();
      return (await this.#call(() => this.backend.query(stream, q))) as QueryResult<T>;
    }, stream);
  }

  /**
   * rheo's writes bound to a transaction the application owns: `client` is
   * a `pg` client (a checked-out `pg.PoolClient` or a `pg.Client`) on which
   * the application ran `BEGIN`. Returns append/appendBatch and every settle
   * (ack, nack, reject, release and their `*Many` forms) with the same
   * validation and errors as here; their writes commit or roll back with the
   * application's own (see `RheoTransaction`). rheo never commits, rolls back
   * or releases the client. `unsupported` on a backend without the
   * `transactions` capability (memory).
   */
  transaction(client: TransactionClient): RheoTransaction {
    this.#assertOpen();
    requireCapability(this.backend, 'transactions', 'transaction');
    if (client === null || typeof client !== 'object' || typeof (client as { query?: unknown }).query !== 'function') {
      throw invalidArgument(`transaction expects a pg client with a transaction begun on it, got ${describe(client)}`);
    }
    const backend = this.backend;
    if (typeof backend.transaction !== 'function') {
      throw new RheoError('unsupported', `the ${backend.name} backend declares transactions but does not implement transaction()`);
    }
    return new RheoTransaction(this, backend.transaction(client));
  }

  // ---- consuming ----------------------------------------------------------

  /**
   * An object-mode `Readable` of leases for `stream.pipeline`, with demand
   * bounded by `maxDemand` (see `RheoProducer`). Defaults come from `defaults`.
   */
  producer<T extends JsonValue = JsonValue>(options: ProducerOptions): RheoProducer<T> {
    this.#assertOpen();
    const producer = new RheoProducer<T>(this, options);
    const end = (): Promise<void> => endProducer(producer);
    this.#attached.add(end);
    producer.once('close', () => this.#attached.delete(end));
    return producer;
  }

  /**
   * The one-call runtime: runs `handler` for every event of the group with
   * bounded concurrency, lease renewal, optional per-key ordering and
   * timeouts, and settles by the handler's outcome. Returns the `Consumer`
   * at once (options are validated synchronously); `consumer.stop()` drains.
   */
  consume<T extends JsonValue = JsonValue>(options: ConsumeOptions<T>): Consumer<T> {
    this.#assertOpen();
    const consumer = createConsumer<T>(this, options);
    const end = (): Promise<void> => consumer.stop({ timeoutMs: 0 });
    this.#attached.add(end);
    consumer.done.then(
      () => this.#attached.delete(end),
      () => this.#attached.delete(end),
    );
    return consumer;
  }

  async fetch<T extends JsonValue = JsonValue>(
    stream: string,
    group: string,
    options: FetchOptions = {},
  ): Promise<Lease<T>[]> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('fetch options', options);
    const limit = optionalInteger('limit', options.limit, 10, { min: 1, max: MAX_LIMIT });
    const leaseMs = optionalInteger('leaseMs', options.leaseMs, this.defaults.leaseMs, { min: 1, max: MAX_LEASE_MS });
    let consumerId = 'anonymous';
    if (options.consumerId !== undefined) {
      assertString('consumerId', options.consumerId);
      consumerId = options.consumerId;
    }
    const partitions = normalizePartitions(options.partitions);
    const maxBytes = this.#maxBytes(options.maxBytes);
    return (await this.#call(() =>
      this.backend.fetch(stream, group, { limit, consumerId, leaseMs, partitions, maxBytes }),
    )) as Lease<T>[];
  }

  /** Extends a live lease. Fenced: `stale_lease` unless the lease is still held under this `leaseId`. */
  async renew<T>(lease: Lease<T>, options: RenewOptions = {}): Promise<Lease<T>> {
    this.#assertOpen();
    const { ref, copy } = renewable(lease, 'renew');
    assertOptions('renew options', options);
    const leaseMs = optionalInteger('leaseMs', options.leaseMs, this.defaults.leaseMs, { min: 1, max: MAX_LEASE_MS });
    const [result] = await this.#call(() => this.backend.renew([ref], leaseMs));
    if (!result?.ok) throw result?.error ?? new RheoError('internal', 'renew returned no result');
    return { ...copy, expiresAt: result.expiresAt };
  }

  /** Renews many leases in one backend call; one result per lease, in order. */
  async renewMany<T>(
    leases: Lease<T>[],
    options: RenewOptions = {},
  ): Promise<Array<{ ok: true; lease: Lease<T> } | { ok: false; error: RheoError }>> {
    this.#assertOpen();
    assertOptions('renew options', options);
    const leaseMs = optionalInteger('leaseMs', options.leaseMs, this.defaults.leaseMs, { min: 1, max: MAX_LEASE_MS });
    return this.#perItem(
      'renewMany',
      leases,
      (lease) => renewable(lease, 'renewMany'),
      async (valid) => {
        const results = await this.backend.renew(
          valid.map((v) => v.ref),
          leaseMs,
        );
        return results.map((r, i) => (r.ok ? { ok: true as const, lease: { ...valid[i]!.copy, expiresAt: r.expiresAt } } : r));
      },
    );
  }

  async ack(lease: Lease<unknown>): Promise<void> {
    await this.#settleOne(settleOp({ kind: 'ack', lease }, 'ack'));
  }

  /** Retry later (after `delayMs`, default 0). At `attempt >= maxAttempts` this dead-letters. */
  async nack(lease: Lease<unknown>, reason?: string | null, options: NackOptions = {}): Promise<void> {
    assertOptions('nack options', options);
    await this.#settleOne(settleOp({ kind: 'nack', lease, reason, delayMs: options.delayMs }, 'nack'));
  }

  /** Dead-letter now. */
  async reject(lease: Lease<unknown>, reason?: string | null): Promise<void> {
    await this.#settleOne(settleOp({ kind: 'reject', lease, reason }, 'reject'));
  }

  /** Give the delivery back unprocessed, without spending an attempt. */
  async release(lease: Lease<unknown>): Promise<void> {
    await this.#settleOne(settleOp({ kind: 'release', lease }, 'release'));
  }

  ackMany(leases: Lease<unknown>[]): Promise<SettleResult[]> {
    return this.#settleEach('ackMany', leases, (lease) => ({ kind: 'ack', lease }));
  }

  nackMany(leases: Lease<unknown>[], reason?: string | null, options: NackOptions = {}): Promise<SettleResult[]> {
    assertOptions('nack options', options);
    return this.#settleEach('nackMany', leases, (lease) => ({ kind: 'nack', lease, reason, delayMs: options.delayMs }));
  }

  rejectMany(leases: Lease<unknown>[], reason?: string | null): Promise<SettleResult[]> {
    return this.#settleEach('rejectMany', leases, (lease) => ({ kind: 'reject', lease, reason }));
  }

  releaseMany(leases: Lease<unknown>[]): Promise<SettleResult[]> {
    return this.#settleEach('releaseMany', leases, (lease) => ({ kind: 'release', lease }));
  }

  /**
   * Mixed settles in one backend round trip, one result per op. Used by the
   * producer to coalesce settles issued close together.
   */
  settleMany(ops: SettleRequest[]): Promise<SettleResult[]> {
    return this.#settleEach('settleMany', ops, (op) => op);
  }

  // ---- progress and operations -------------------------------------------

  async lag(stream: string, group: string): Promise<LagReport> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    return this.#call(() => this.backend.lag(stream, group));
  }

  /** Reopens deliveries for redelivery; the log itself never changes. */
  async replay(stream: string, group: string, spec: ReplaySpec, options: ReplayOptions = {}): Promise<void> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('replay options', options);
    const normalized = normalizeReplay(spec);
    const partitions = normalizePartitions(options.partitions);
    await this.#call(() => this.backend.replay(stream, group, normalized, partitions));
  }

  /** Forgets all progress of the group. Requires `{ confirm: true }`. */
  async resetGroup(stream: string, group: string, options: ResetOptions): Promise<void> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    if (options === null || typeof options !== 'object' || options.confirm !== true) {
      throw new RheoError(
        'confirm_required',
        `resetGroup on stream "${stream}", group "${group}" drops all progress; pass { confirm: true }`,
        { stream, group },
      );
    }
    const start = normalizeStart(options.startAfter, options.startAt);
    await this.#call(() => this.backend.resetGroup(stream, group, start));
  }

  async deadLetters<T extends JsonValue = JsonValue>(
    stream: string,
    group: string,
    options: DeadLetterOptions = {},
  ): Promise<DeadLetter<T>[]> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('deadLetters options', options);
    const limit = optionalInteger('limit', options.limit, 100, { min: 1, max: MAX_LIMIT });
    let after: string | null = null;
    if (options.after !== undefined) {
      assertString('after', options.after, { min: 1, max: 64 });
      after = options.after;
    }
    const maxBytes = this.#maxBytes(options.maxBytes);
    return (await this.#call(() => this.backend.deadLetters(stream, group, limit, after, maxBytes))) as DeadLetter<T>[];
  }

  /** Reopens dead letters (all, or the given event ids) with attempts reset. Returns how many. */
  async redrive(stream: string, group: string, options: RedriveOptions = {}): Promise<number> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('redrive options', options);
    const eventIds = options.eventIds === undefined ? null : normalizeEventIds(options.eventIds);
    return this.#call(() => this.backend.redrive(stream, group, eventIds));
  }

  // ---- internals ----------------------------------------------------------

  #maxBytes(value: unknown): number {
    return optionalInteger('maxBytes', value, this.defaults.maxFetchBytes, { min: 1, max: MAX_CONFIGURABLE_BYTES });
  }

  #assertOpen(): void {
    if (this.#closed) throw new RheoError('closed', 'this rheo instance is closed');
  }

  /** Settles are refused only once `close()` has ended the producers and consumers that may still issue them. */
  #assertCanSettle(): void {
    if (this.#settlesClosed) throw new RheoError('closed', 'this rheo instance is closed');
  }

  async #settleOne(op: SettleOp): Promise<void> {
    this.#assertCanSettle();
    const [result] = await this.#call(() => this.backend.settle([op]));
    if (!result?.ok) throw result?.error ?? new RheoError('internal', 'settle returned no result');
  }

  #settleEach<I>(what: string, items: I[], toRequest: (item: I) => SettleRequest): Promise<SettleResult[]> {
    this.#assertCanSettle();
    return this.#perItem(what, items, (item) => settleOp(toRequest(item), what), (ops) => this.backend.settle(ops));
  }

  /**
   * Batch calls validate each item on its own: an invalid item gets its own
   * `invalid_argument` result while the valid ones go to the backend in one call.
   */
  async #perItem<I, P, R>(
    what: string,
    items: I[],
    prepare: (item: I) => P,
    call: (prepared: P[]) => Promise<R[]>,
  ): Promise<Array<R | { ok: false; error: RheoError }>> {
    const count = arrayLength(what, items);
    // Plain loops: this runs once per settled or renewed lease of every pipeline.
    const valid: P[] = [];
    let invalid: Map<number, RheoError> | null = null;
    for (let i = 0; i < count; i++) {
      try {
        valid.push(prepare(items[i]!));
      } catch (error) {
        // A getter or proxy trap of the caller's item threw: that item is bad input, the others still go.
        const problem = isRheoError(error)
          ? error
          : invalidArgument(`${what} item [${i}] could not be read: ${messageOf(error)}`, { cause: error });
        (invalid ??= new Map()).set(i, problem);
      }
    }
    const results = valid.length ? await this.#call(() => call(valid)) : [];
    if (invalid === null && results.length === count) return results;
    const out: Array<R | { ok: false; error: RheoError }> = [];
    let j = 0;
    for (let i = 0; i < count; i++) {
      const error = invalid?.get(i);
      if (error) out.push({ ok: false, error });
      else out.push(results[j++] ?? { ok: false, error: new RheoError('internal', `${what}: the backend returned too few results`) });
    }
    return out;
  }

  /** Backends classify their own driver errors; anything else that escapes is wrapped, never leaked. */
  async #call<R>(fn: () => Promise<R>): Promise<R> {
    try {
      return await fn();
    } catch (error) {
      if (error instanceof RheoError) throw error;
      throw new RheoError('internal', `unexpected backend failure: ${(error as Error)?.message ?? String(error)}`, {
        cause: error,
      });
    }
  }
}


/** An array's length, read once; an array-like Proxy whose traps throw is bad input, not a crash. */
function arrayLength(what: string, items: unknown): number {
  try {
    if (Array.isArray(items)) return items.length;
  } catch (error) {
    throw invalidArgument(`${what} could not read its array: ${messageOf(error)}`, { cause: error });
  }
  throw invalidArgument(`${what} expects an array, got ${describe(items)}`);
}

/**
 * A lease to renew: the ref checked, and a plain copy taken while reading it,
 * so the renewed lease handed back is built from values already read.
 */
function renewable<T>(lease: Lease<T>, what: string): { ref: LeaseRef; copy: Lease<T> } {
  const ref = leaseRef(lease, what);
  try {
    return { ref, copy: { ...lease } };
  } catch (error) {
    throw invalidArgument(`${what} could not read the lease: ${messageOf(error)}`, { cause: error });
  }
}

/** A new object per result: a backend may hand out the (frozen) event it stores. */
function appended<T>({ event, existed }: AppendOutcome): AppendedEvent<T> {
  return { ...(event as RheoEvent<T>), existed };
}

/**
 * Ends a producer for `close()`. An `'error'` nobody listens for would crash
 * the host, so only a producer whose errors are watched (a pipeline, a
 * `for await`, a listener) is destroyed with `closed`.
 */
function endProducer<T extends JsonValue>(producer: RheoProducer<T>): Promise<void> {
  if (!producer.destroyed) {
    const watched = producer.listenerCount('error') > 0;
    producer.destroy(watched ? new RheoError('closed', `rheo was closed while producing from stream "${producer.stream}"`, {
      stream: producer.stream,
      group: producer.group,
    }) : undefined);
  }
  return producer.close();
}
