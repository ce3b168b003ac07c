import type { AppendOutcome, Backend, OwnershipStore, RetentionStore, BackendCapabilities, GroupMembership, LeaseRef, MemberView, SettleOp, TransactionClient, TrimReport } from './core/backend.js';
import { capability, hasCapability, requireCapability } from './core/capabilities.js';
import {
  assertDistinctPartitions,
  assertMemberId,
  commitOp,
  heartbeatRequest,
  ownershipFence,
  type CommitInput,
  type HeartbeatOptions,
  type OwnershipFenceInput,
} from './core/ownership-arguments.js';
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
  normalizeRetention,
  normalizeStart,
  normalizeTrim,
  prepareAppend,
  settleOp,
} from './core/arguments.js';
import { systemClock, type Clock } from './core/clock.js';
import { callScope, runCancellable, type CallScope, type CallTarget } from './core/call-options.js';
import {
  DEFAULT_MAX_BATCH_BYTES,
  DEFAULT_MAX_EVENT_BYTES,
  DEFAULT_MAX_FETCH_BYTES,
  MAX_CONFIGURABLE_BYTES,
  type RheoLimits,
} from './core/limits.js';
import { RheoError, invalidArgument, isRheoError } from './core/errors.js';
import { resolveLogger, silentLogger, type Logger } from './core/logger.js';
import { attachTelemetry, createTelemetry, type RheoTelemetry } from './observability/telemetry.js';
import type {
  AppendInput,
  AppendedEvent,
  CallOptions,
  DeadLetter,
  DeleteOptions,
  DeadLetterOptions,
  FetchOptions,
  GroupInfo,
  GroupOptions,
  JsonValue,
  LagOptions,
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
  Retention,
  StreamInfo,
  StreamOptions,
  TrimOptions,
} from './core/types.js';
import { assertName, assertString, describe, optionalInteger } from './core/validation.js';
import { memoryBackend } from './backends/memory/memory-backend.js';
import { RheoProducer } from './producer/rheo-producer.js';
import type { RuntimeDefaults } from './runtime/sources.js';
import type { ProducerOptions } from './producer/producer-options.js';
import { createConsumer, type Consumer } from './consumer/consumer.js';
import { createLeaseSource } from './facade/lease-source.js';
import type { LeaseSource } from './runtime/sources.js';
import type { ConsumeOptions } from './consumer/consumer-types.js';
import { BackgroundTrimmer } from './retention/background-trimmer.js';
import { DEFAULT_TRIM_BATCH, trimInBatches } from './retention/trim-batches.js';
import { PartitionConsumer } from './consumer/partition-consumer.js';
import type { PartitionConsumeOptions } from './consumer/partition-options.js';
import { trackGroupReader } from './observability/same-group-warning.js';
import { observePartitionConsumer } from './observability/partition-diagnostics.js';

/** The instance defaults (runtime/sources.ts). */
export type RheoDefaults = RuntimeDefaults;

export interface RheoOptions {
  /** Defaults to a fresh in-memory backend using `clock`. */
  backend?: Backend;
  defaults?: Partial<RheoDefaults>;
  /** Time source for the default memory backend and for rheo's own timers. */
  clock?: Clock;
  /** Event and batch size limits (core/limits.ts); defaults 1 MiB per event, 64 MiB per batch. */
  limits?: Partial<RheoLimits>;
  /**
   * A pino-compatible logger (`debug/info/warn/error(fields, message)`) for
   * what happens outside any call's answer: fetch failures and their
   * backoff, renewal failures, lost leases, failed settles, handler
   * failures, consumer stops, dropped and reopened connections, applied
   * migrations. Default: silent.
   */
  logger?: Logger;
  /**
   * OpenTelemetry spans and metrics (README, "Observability") when
   * `@opentelemetry/api` is installed; providers registered with the API are
   * used. `false` keeps this instance from loading or reporting anything.
   * Default `true`.
   */
  telemetry?: boolean;
  /** The background trimmer (docs/semantics.md, "Background trimming"). */
  retention?: Partial<RetentionTrimmerOptions>;
}

export interface RetentionTrimmerOptions {
  /** Run the background trimmer at all. Default true. */
  enabled: boolean;
  /** Time between passes over the streams that have retention. Default 60 s. */
  intervalMs: number;
  /** Events deleted per backend call (one short transaction on PostgreSQL). Default 10,000. */
  batchSize: number;
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
  /** The background trimmer; `null` when disabled. `runOnce()` runs a pass now. */
  readonly trimmer: BackgroundTrimmer | null;
  readonly #trimBatchSize: number;
  /** Where rheo's own diagnostics go (`options.logger`; silent by default). */
  readonly logger: Logger;
  readonly #telemetry: RheoTelemetry | null;
  #closed = false;
  /** Settles outlive `#closed` until the attached producers and consumers have ended. */
  #settlesClosed = false;
  #closing: Promise<void> | null = null;
  #leases: LeaseSource | null = null;

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
    const r = options.retention ?? {};
    assertOptions('retention', r);
    if (r.enabled !== undefined && typeof r.enabled !== 'boolean') {
      throw invalidArgument(`retention.enabled must be a boolean, got ${describe(r.enabled)}`);
    }
    const intervalMs = optionalInteger('retention.intervalMs', r.intervalMs, 60_000, { min: 1, max: 2_147_483_647 });
    const batchSize = optionalInteger('retention.batchSize', r.batchSize, DEFAULT_TRIM_BATCH, { min: 1, max: 1_000_000 });
    this.#trimBatchSize = batchSize;
    if (options.telemetry !== undefined && typeof options.telemetry !== 'boolean') {
      throw invalidArgument(`telemetry must be true or false, got ${describe(options.telemetry)}`);
    }
    this.logger = resolveLogger(options.logger);
    this.backend = options.backend ?? memoryBackend({ clock: this.clock });
    if (this.logger !== silentLogger) this.backend.useLogger?.(this.logger);
    this.#telemetry = options.telemetry === false ? null : createTelemetry(this.clock, (stream, group) => this.backend.lag(stream, group));
    attachTelemetry(this, this.#telemetry);
    // Last: nothing after this may throw, or the constructor would leave a timer behind.
    this.trimmer =
      r.enabled === false ? null : new BackgroundTrimmer(this.backend, { intervalMs, batchSize, maxBatchesPerPass: 100 });
    this.trimmer?.start();
  }

  get closed(): boolean {
    return this.#closed;
  }

  async migrate(options: CallOptions = {}): Promise<void> {
    this.#assertOpen();
    const scope = this.#scope('migrate options', options);
    await this.#call(() => this.backend.migrate(), scope, { action: 'migrate', writes: true });
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
  async ping(options: CallOptions = {}): Promise<PingResult> {
    this.#assertOpen();
    const scope = this.#scope('ping options', options);
    const started = performance.now();
    const schemaVersion = await this.#call(() => this.backend.ping(), scope, { action: 'ping', writes: false });
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
      await Promise.allSettled([...[...this.#attached].map((end) => end()), this.trimmer?.close()]);
    } finally {
      this.#settlesClosed = true;
      this.#telemetry?.close();
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
    const retention = options.retention === undefined ? null : normalizeRetention(options.retention);
    if (options.retention !== undefined) requireCapability(this.backend, 'retention', 'createStream with a retention option');
    await this.#call(() => this.backend.createStream(name, partitions, retention), this.#scope('createStream options', options), {
      action: `create stream "${name}"`,
      writes: true,
      stream: name,
    });
  }

  /**
   * Sets (or with `null` clears) the stream's retention; the background
   * trimmer applies it. See docs/semantics.md, "Retention".
   */
  async setRetention(stream: string, retention: Retention | null, options: CallOptions = {}): Promise<void> {
    this.#assertOpen();
    assertName('stream', stream);
    const policy = normalizeRetention(retention);
    const scope = this.#scope('setRetention options', options);
    const backend = this.#retention('setRetention');
    await this.#call(() => backend.setRetention(stream, policy), scope, { action: `set retention of stream "${stream}"`, writes: true, stream });
  }

  /**
   * Deletes events from the front of each partition: those `before` a time
   * and/or beyond the newest `keep` per partition, or what the stream's
   * retention allows when neither is given; only what every group has settled
   * unless `force`. Runs in bounded batches until nothing more may go.
   */
  async trim(stream: string, options: TrimOptions = {}): Promise<TrimReport> {
    this.#assertOpen();
    assertName('stream', stream);
    const request = normalizeTrim(options);
    const scope = this.#scope('trim options', options);
    this.#retention('trim');
    return this.#call(() => trimInBatches(this.backend, stream, { ...request, limit: this.#trimBatchSize }), scope, {
      action: `trim stream "${stream}"`,
      writes: true,
      stream,
    });
  }

  /** Deletes a group's progress, leases and dead letters. Requires `{ confirm: true }`. */
  async deleteGroup(stream: string, group: string, options: DeleteOptions): Promise<void> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertConfirmed(options, `deleteGroup on stream "${stream}", group "${group}" deletes the group's progress and dead letters`, { stream, group });
    const scope = this.#scope('deleteGroup options', options);
    const backend = this.#retention('deleteGroup');
    await this.#call(() => backend.deleteGroup(stream, group), scope, { action: `delete group "${group}" of stream "${stream}"`, writes: true, stream, group });
  }

  /** Deletes a stream with its events and groups; the name can be created again. Requires `{ confirm: true }`. */
  async deleteStream(stream: string, options: DeleteOptions): Promise<void> {
    this.#assertOpen();
    assertName('stream', stream);
    assertConfirmed(options, `deleteStream on stream "${stream}" deletes its events and every group`, { stream });
    const scope = this.#scope('deleteStream options', options);
    const backend = this.#retention('deleteStream');
    await this.#call(() => backend.deleteStream(stream), scope, { action: `delete stream "${stream}"`, writes: true, stream });
  }

  async listStreams(options: CallOptions = {}): Promise<StreamInfo[]> {
    this.#assertOpen();
    const scope = this.#scope('listStreams options', options);
    return this.#call(() => this.backend.listStreams(), scope, { action: 'list streams', writes: false });
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
    const partitions = normalizePartitions(options.partitions);
    await this.#call(
      () => this.backend.createGroup(stream, group, { start, maxAttempts, partitions }),
      this.#scope('createGroup options', options),
      { action: `create group "${group}" on stream "${stream}"`, writes: true, stream, group },
    );
  }

  async listGroups(stream: string, options: CallOptions = {}): Promise<string[]> {
    this.#assertOpen();
    assertName('stream', stream);
    const scope = this.#scope('listGroups options', options);
    return this.#call(() => this.backend.listGroups(stream), scope, { action: `list groups of stream "${stream}"`, writes: false, stream });
  }

  async groupInfo(stream: string, group: string, options: CallOptions = {}): Promise<GroupInfo> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    const scope = this.#scope('groupInfo options', options);
    const info = await this.#call(() => this.backend.groupInfo(stream, group), scope, {
      action: `describe group "${group}" of stream "${stream}"`,
      writes: false,
      stream,
      group,
    });
    const membership = await this.#membershipIfOwned(stream, group);
    return membership ? { ...info, membership } : info;
  }

  // ---- the log ------------------------------------------------------------

  /** Resolves to the stored event with `existed`: whether an event with the input's `id` was already stored. */
  async append<T extends JsonValue = JsonValue>(
    stream: string,
    input: AppendInput<T>,
    options: CallOptions = {},
  ): Promise<AppendedEvent<T>> {
    this.#assertOpen();
    assertName('stream', stream);
    const prepared = prepareAppend(this.clock, input, 'append input', {
      stream,
      maxEventBytes: this.limits.maxEventBytes,
    });
    const scope = this.#scope('append options', options);
    const [outcome] = await this.#traced(
      this.#telemetry?.send(stream, [prepared], this.limits),
      () => this.backend.append(stream, [prepared]),
      scope,
      { action: `append to stream "${stream}"`, writes: true, stream },
    );
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
    options: CallOptions = {},
  ): Promise<AppendedEvent<T>[]> {
    this.#assertOpen();
    assertName('stream', stream);
    const scope = this.#scope('appendBatch options', options);
    if (!Array.isArray(inputs)) throw invalidArgument(`appendBatch expects an array of inputs, got ${describe(inputs)}`);
    if (inputs.length > 100_000) throw invalidArgument('appendBatch accepts at most 100000 inputs per call');
    const limits = { stream, maxEventBytes: this.limits.maxEventBytes };
    const prepared = inputs.map((input, i) => prepareAppend(this.clock, input, `appendBatch input [${i}]`, limits));
    if (prepared.length === 0) return [];
    assertBatchSize(stream, prepared, this.limits.maxBatchBytes);
    const outcomes = await this.#traced(
      this.#telemetry?.send(stream, prepared, this.limits),
      () => this.backend.append(stream, prepared),
      scope,
      { action: `append a batch to stream "${stream}"`, writes: true, stream },
    );
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
    const scope = this.#scope('read options', options);
    return (await this.#call(() => this.backend.read(stream, partition, after, limit, maxBytes), scope, {
      action: `read stream "${stream}"`,
      writes: false,
      stream,
    })) as RheoEvent<T>[];
  }

  async query<T extends JsonValue = JsonValue>(stream: string, options: QueryOptions = {}): Promise<QueryResult<T>> {
    this.#assertOpen();
    assertName('stream', stream);
    assertOptions('query options', options);
    const q = normalizeQuery(stream, options, this.defaults.maxFetchBytes);
    const scope = this.#scope('query options', options);
    return (await this.#call(() => this.backend.query(stream, q), scope, {
      action: `query stream "${stream}"`,
      writes: false,
      stream,
    })) as QueryResult<T>;
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
    const scope = this.#scope('query options', options);
    const target = { action: `query stream "${stream}"`, writes: false, stream };
    return queryPages<T>(first, async (q) => {
      this.#assertOpen();
      return (await this.#call(() => this.backend.query(stream, q), scope, target)) as QueryResult<T>;
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
    const untrack = trackGroupReader(this.backend, producer.stream, producer.group, 'producer', this.logger);
    producer.once('close', () => {
      this.#attached.delete(end);
      untrack();
    });
    return producer;
  }

  /**
   * The one-call runtime: runs `handler` for every event of the group with
   * bounded concurrency, lease renewal, optional per-key ordering and
   * timeouts, and settles by the handler's outcome. Returns the `Consumer`
   * at once (options are validated synchronously); `consumer.stop()` drains.
   *
   * With `assignment: 'partitions'` the process joins the group as a member
   * of partition ownership instead (Kafka's model, DESIGN.md §7): it owns a
   * share of the partitions, handles each in sequence order and commits once
   * per batch; the returned `PartitionConsumer` leaves the group on `stop()`.
   */
  consume<T extends JsonValue = JsonValue>(options: PartitionConsumeOptions<T>): PartitionConsumer<T>;
  consume<T extends JsonValue = JsonValue>(options: ConsumeOptions<T>): Consumer<T>;
  consume<T extends JsonValue = JsonValue>(options: ConsumeOptions<T> | PartitionConsumeOptions<T>): Consumer<T> | PartitionConsumer<T> {
    this.#assertOpen();
    const assignment = options !== null && typeof options === 'object' ? (options as { assignment?: unknown }).assignment : undefined;
    if (assignment !== undefined && assignment !== 'partitions' && assignment !== 'leases') {
      throw invalidArgument(`consume assignment must be 'leases' (competing consumers, the default) or 'partitions', got ${describe(assignment)}`);
    }
    if (assignment === 'partitions') {
      requireCapability(this.backend, 'partitionOwnership', "consume({ assignment: 'partitions' })");
      const consumer = new PartitionConsumer<T>(this, options as PartitionConsumeOptions<T>);
      // Before its first heartbeat (a timer away), so the join is seen.
      const unobserve = observePartitionConsumer(consumer, this.logger, this.#telemetry);
      const end = (): Promise<void> => consumer.stop({ timeoutMs: 0 });
      this.#attached.add(end);
      void consumer.done.then(() => {
        this.#attached.delete(end);
        unobserve();
      });
      return consumer;
    }
    const consumer = createConsumer<T>(this.#leaseSource(), options as ConsumeOptions<T>);
    const end = (): Promise<void> => consumer.stop({ timeoutMs: 0 });
    this.#attached.add(end);
    const untrack = trackGroupReader(this.backend, consumer.stream, consumer.group, 'consumer', this.logger);
    const ended = (): void => {
      this.#attached.delete(end);
      untrack();
    };
    consumer.done.then(ended, ended);
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
    const scope = this.#scope('fetch options', options);
    return (await this.#traced(
      this.#telemetry?.receive(stream, group, consumerId),
      () => this.backend.fetch(stream, group, { limit, consumerId, leaseMs, partitions, maxBytes }),
      scope,
      { action: `fetch from group "${group}" of stream "${stream}"`, writes: true, stream, group },
    )) as Lease<T>[];
  }

  /** Extends a live lease. Fenced: `stale_lease` unless the lease is still held under this `leaseId`. */
  async renew<T>(lease: Lease<T>, options: RenewOptions = {}): Promise<Lease<T>> {
    this.#assertOpen();
    const { ref, copy } = renewable(lease, 'renew');
    assertOptions('renew options', options);
    const leaseMs = optionalInteger('leaseMs', options.leaseMs, this.defaults.leaseMs, { min: 1, max: MAX_LEASE_MS });
    const scope = this.#scope('renew options', options);
    const [result] = await this.#call(() => this.backend.renew([ref], leaseMs), scope, () => leaseTarget('renew', ref));
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
    const scope = this.#scope('renew options', options);
    return this.#perItem(
      'renewMany',
      scope,
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

  async ack(lease: Lease<unknown>, options: CallOptions = {}): Promise<void> {
    await this.#settleOne(settleOp({ kind: 'ack', lease }, 'ack'), this.#scope('ack options', options));
  }

  /** Retry later (after `delayMs`, default 0). At `attempt >= maxAttempts` this dead-letters. */
  async nack(lease: Lease<unknown>, reason?: string | null, options: NackOptions = {}): Promise<void> {
    assertOptions('nack options', options);
    await this.#settleOne(settleOp({ kind: 'nack', lease, reason, delayMs: options.delayMs }, 'nack'), this.#scope('nack options', options));
  }

  /** Dead-letter now. */
  async reject(lease: Lease<unknown>, reason?: string | null, options: CallOptions = {}): Promise<void> {
    await this.#settleOne(settleOp({ kind: 'reject', lease, reason }, 'reject'), this.#scope('reject options', options));
  }

  /** Give the delivery back unprocessed, without spending an attempt. */
  async release(lease: Lease<unknown>, options: CallOptions = {}): Promise<void> {
    await this.#settleOne(settleOp({ kind: 'release', lease }, 'release'), this.#scope('release options', options));
  }

  ackMany(leases: Lease<unknown>[], options: CallOptions = {}): Promise<SettleResult[]> {
    return this.#settleEach('ackMany', leases, (lease) => ({ kind: 'ack', lease }), options);
  }

  nackMany(leases: Lease<unknown>[], reason?: string | null, options: NackOptions = {}): Promise<SettleResult[]> {
    assertOptions('nack options', options);
    const delayMs = options.delayMs;
    return this.#settleEach('nackMany', leases, (lease) => ({ kind: 'nack', lease, reason, delayMs }), options);
  }

  rejectMany(leases: Lease<unknown>[], reason?: string | null, options: CallOptions = {}): Promise<SettleResult[]> {
    return this.#settleEach('rejectMany', leases, (lease) => ({ kind: 'reject', lease, reason }), options);
  }

  releaseMany(leases: Lease<unknown>[], options: CallOptions = {}): Promise<SettleResult[]> {
    return this.#settleEach('releaseMany', leases, (lease) => ({ kind: 'release', lease }), options);
  }

  /**
   * Mixed settles in one backend round trip, one result per op. Used by the
   * producer to coalesce settles issued close together.
   */
  settleMany(ops: SettleRequest[], options: CallOptions = {}): Promise<SettleResult[]> {
    return this.#settleEach('settleMany', ops, (op) => op, options);
  }

  // ---- progress and operations -------------------------------------------

  /**
   * Frontier, high watermark, lag and age of the oldest unsettled event per
   * partition of the group (or only of `partitions`, which the group must
   * cover); `lag` is the sum over the partitions reported.
   */
  async lag(stream: string, group: string, options: LagOptions = {}): Promise<LagReport> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('lag options', options);
    const partitions = normalizePartitions(options.partitions);
    const scope = this.#scope('lag options', options);
    const lag = await this.#call(() => this.backend.lag(stream, group, partitions), scope, {
      action: `lag of group "${group}" on stream "${stream}"`,
      writes: false,
      stream,
      group,
    });
    const membership = await this.#membershipIfOwned(stream, group);
    return membership ? { ...lag, membership } : lag;
  }

  /** Reopens deliveries for redelivery; the log itself never changes. */
  async replay(stream: string, group: string, spec: ReplaySpec, options: ReplayOptions = {}): Promise<void> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('replay options', options);
    const normalized = normalizeReplay(stream, spec);
    const partitions = normalizePartitions(options.partitions);
    const scope = this.#scope('replay options', options);
    await this.#call(() => this.backend.replay(stream, group, normalized, partitions), scope, {
      action: `replay group "${group}" of stream "${stream}"`,
      writes: true,
      stream,
      group,
    });
  }

  /**
   * Forgets the group's progress in all its partitions, or only in
   * `partitions`: their delivery state and dead letters are dropped and
   * their frontier restarts at the given start. Requires `{ confirm: true }`.
   */
  async resetGroup(stream: string, group: string, options: ResetOptions): Promise<void> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertConfirmed(options, `resetGroup on stream "${stream}", group "${group}" drops all progress`, { stream, group });
    const start = normalizeStart(options.startAfter, options.startAt);
    const partitions = normalizePartitions(options.partitions);
    const scope = this.#scope('resetGroup options', options);
    await this.#call(() => this.backend.resetGroup(stream, group, start, partitions), scope, {
      action: `reset group "${group}" of stream "${stream}"`,
      writes: true,
      stream,
      group,
    });
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
    const scope = this.#scope('deadLetters options', options);
    return (await this.#call(() => this.backend.deadLetters(stream, group, limit, after, maxBytes), scope, {
      action: `list dead letters of group "${group}" on stream "${stream}"`,
      writes: false,
      stream,
      group,
    })) as DeadLetter<T>[];
  }

  /** Reopens dead letters (all, or the given event ids) with attempts reset. Returns how many. */
  async redrive(stream: string, group: string, options: RedriveOptions = {}): Promise<number> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('redrive options', options);
    const eventIds = options.eventIds === undefined ? null : normalizeEventIds(options.eventIds);
    const scope = this.#scope('redrive options', options);
    return this.#call(() => this.backend.redrive(stream, group, eventIds), scope, {
      action: `redrive dead letters of group "${group}" on stream "${stream}"`,
      writes: true,
      stream,
      group,
    });
  }

  // ---- partition ownership (DESIGN.md §7) ---------------------------------

  /**
   * Joins (first call) or keeps a member in the group and returns what it
   * owns: partitions with their generation and frontier, and those it is
   * asked to give up (`revoking`). `group_mode_conflict` while
   * competing-consumer leases of the group are live. `rheo.consume({
   * assignment: 'partitions' })` calls this on a timer; call it yourself
   * only to build your own runtime.
   */
  async heartbeat(stream: string, group: string, options: HeartbeatOptions): Promise<MemberView> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    const request = heartbeatRequest(options);
    const backend = this.#ownership('heartbeat');
    const scope = this.#scope('heartbeat options', options);
    return this.#call(() => backend.heartbeat(stream, group, request), scope, { action: `heartbeat in group "${group}" of stream "${stream}"`, writes: true, stream, group });
  }

  /** Ends the member's session and frees what it owns. Idempotent. */
  async leaveGroup(stream: string, group: string, memberId: string, options: CallOptions = {}): Promise<void> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertMemberId(memberId);
    const backend = this.#ownership('leaveGroup');
    const scope = this.#scope('leaveGroup options', options);
    await this.#call(() => backend.leaveGroup(stream, group, memberId), scope, { action: `leave group "${group}" of stream "${stream}"`, writes: true, stream, group });
  }

  /** Hands owned partitions back (normally revoking ones, after their last commit). One result per fence. */
  releasePartitions(fences: OwnershipFenceInput[], options: CallOptions = {}): Promise<SettleResult[]> {
    this.#assertCanSettle();
    const backend = this.#ownership('releasePartitions');
    const scope = this.#scope('releasePartitions options', options);
    return this.#perItem('releasePartitions', scope, fences, (f) => ownershipFence(f, 'releasePartitions'), (valid) =>
      backend.releasePartitions(valid),
    );
  }

  /** Reads an owned partition after `after`, fenced: `stale_generation` once it moved on. */
  async readOwned<T extends JsonValue = JsonValue>(fence: OwnershipFenceInput, options: ReadOptions = {}): Promise<RheoEvent<T>[]> {
    this.#assertOpen();
    const f = ownershipFence(fence, 'readOwned');
    assertOptions('readOwned options', options);
    const after = optionalInteger('after', options.after, 0);
    const limit = optionalInteger('limit', options.limit, 100, { min: 1, max: MAX_LIMIT });
    const maxBytes = this.#maxBytes(options.maxBytes);
    const backend = this.#ownership('readOwned');
    const scope = this.#scope('readOwned options', options);
    return (await this.#call(() => backend.readOwned(f, after, limit, maxBytes), scope)) as RheoEvent<T>[];
  }

  /**
   * Offset commits, fenced by generation: each moves its partition's
   * frontier up to `upTo` (never back) and dead-letters `deadLetters` in the
   * same write. One result per op; a failed op changes nothing.
   */
  commit(ops: CommitInput[], options: CallOptions = {}): Promise<SettleResult[]> {
    this.#assertCanSettle();
    const backend = this.#ownership('commit');
    const scope = this.#scope('commit options', options);
    return this.#perItem('commit', scope, ops, (op) => commitOp(op, 'commit'), (valid) => {
      assertDistinctPartitions(valid, 'commit');
      return backend.commit(valid);
    });
  }

  /** Live members, the owner of each partition and the group generation. */
  async members(stream: string, group: string, options: CallOptions = {}): Promise<GroupMembership> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    const backend = this.#ownership('members');
    const scope = this.#scope('members options', options);
    return this.#call(() => backend.members(stream, group), scope, { action: `members of group "${group}" of stream "${stream}"`, writes: false, stream, group });
  }

  // ---- internals ----------------------------------------------------------

  #ownership(call: string): OwnershipStore {
    return capability(this.backend, 'partitionOwnership', call);
  }

  /** Retention and deletion (issue 14) are a capability: a backend without it answers `unsupported` and is never called. */
  #retention(call: string): RetentionStore {
    return capability(this.backend, 'retention', call);
  }

  /** The group's membership when it is consumed by partition ownership (members or owners present). */
  async #membershipIfOwned(stream: string, group: string): Promise<GroupMembership | null> {
    if (!hasCapability(this.backend, 'partitionOwnership')) return null;
    const backend = this.backend;
    const m = await this.#call(() => backend.members(stream, group));
    return m.members.length > 0 || Object.values(m.owners).some((o) => o !== null) ? m : null;
  }

  #maxBytes(value: unknown): number {
    return optionalInteger('maxBytes', value, this.defaults.maxFetchBytes, { min: 1, max: MAX_CONFIGURABLE_BYTES });
  }

  /** What competing consumers claim, renew and settle through (facade/lease-source.ts); made on first use. */
  #leaseSource(): LeaseSource {
    this.#leases ??= createLeaseSource({
      backend: this.backend,
      defaults: this.defaults,
      clock: this.clock,
      logger: this.logger,
      telemetry: this.#telemetry,
      assertOpen: () => this.#assertOpen(),
      assertCanSettle: () => this.#assertCanSettle(),
      call: (fn, target) => this.#call(fn, NO_CANCEL, target),
    });
    return this.#leases;
  }

  #assertOpen(): void {
    if (this.#closed) throw new RheoError('closed', 'this rheo instance is closed');
  }

  /** Settles are refused only once `close()` has ended the producers and consumers that may still issue them. */
  #assertCanSettle(): void {
    if (this.#settlesClosed) throw new RheoError('closed', 'this rheo instance is closed');
  }

  async #settleOne(op: SettleOp, scope: CallScope): Promise<void> {
    this.#assertCanSettle();
    const [result] = await this.#traced(this.#telemetry?.settle([op]), () => this.backend.settle([op]), scope, () => leaseTarget(op.kind, op));
    if (!result?.ok) throw result?.error ?? new RheoError('internal', 'settle returned no result');
  }

  #settleEach<I>(what: string, items: I[], toRequest: (item: I) => SettleRequest, options: CallOptions): Promise<SettleResult[]> {
    this.#assertCanSettle();
    const scope = this.#scope(what, options);
    return this.#perItem(what, scope, items, (item) => settleOp(toRequest(item), what), (ops) => {
      const finish = this.#telemetry?.settle(ops);
      if (!finish) return this.backend.settle(ops);
      return this.backend.settle(ops).then(
        (results) => {
          finish(results);
          return results;
        },
        (error: unknown) => {
          finish(null, error);
          throw error;
        },
      );
    });
  }

  /**
   * Batch calls validate each item on its own: an invalid item gets its own
   * `invalid_argument` result while the valid ones go to the backend in one call.
   */
  async #perItem<I, P, R>(
    what: string,
    scope: CallScope,
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
    const results = valid.length ? await this.#call(() => call(valid), scope, { action: what, writes: true }) : [];
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

  /** `#call`, reporting the answer to a telemetry finisher when there is one. */
  async #traced<R>(
    finish: ((result: R | null, error?: unknown) => void) | undefined,
    fn: () => Promise<R>,
    scope: CallScope = NO_CANCEL,
    target: CallTarget | (() => CallTarget) = UNNAMED,
  ): Promise<R> {
    if (!finish) return this.#call(fn, scope, target);
    let result: R;
    try {
      result = await this.#call(fn, scope, target);
    } catch (error) {
      finish(null, error);
      throw error;
    }
    finish(result);
    return result;
  }

  /** `signal` and `timeoutMs` of a call's last options argument, checked before anything is sent. */
  #scope(what: string, options: unknown): CallScope {
    assertOptions(what, options);
    return callScope(what, options);
  }

  /**
   * Runs one backend call under the caller's cancellation (core/call-options.ts).
   * Backends classify their own driver errors; anything else that escapes is
   * wrapped, never leaked. An abort reason is the caller's own value and
   * passes through unchanged.
   */
  #call<R>(fn: () => Promise<R>, scope: CallScope = NO_CANCEL, target: CallTarget | (() => CallTarget) = UNNAMED): Promise<R> {
    return runCancellable(scope, target, async () => {
      try {
        return await fn();
      } catch (error) {
        if (error instanceof RheoError) throw error;
        throw new RheoError('internal', `unexpected backend failure: ${(error as Error)?.message ?? String(error)}`, {
          cause: error,
        });
      }
    });
  }
}

/** Destructive calls need `{ confirm: true }`; anything else is `confirm_required` and changes nothing. */
function assertConfirmed(options: unknown, what: string, details: { stream: string; group?: string }): void {
  let confirmed = false;
  try {
    confirmed = options !== null && typeof options === 'object' && (options as { confirm?: unknown }).confirm === true;
  } catch {
    confirmed = false;
  }
  if (!confirmed) throw new RheoError('confirm_required', `${what}; pass { confirm: true }`, details);
}

const NO_CANCEL = callScope('', undefined);
const UNNAMED: CallTarget = { action: 'the call', writes: true };

/** Names a settle or renewal in cancellation errors: they always write. */
function leaseTarget(what: string, ref: LeaseRef): CallTarget {
  return {
    action: `${what} of delivery ${ref.partition}/${ref.sequence} in group "${ref.group}" of stream "${ref.stream}"`,
    writes: true,
    stream: ref.stream,
    group: ref.group,
  };
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
