/*
 * Past ~400 lines on purpose: this is the whole public surface of an
 * instance, 48 members that each delegate in one line to their area under
 * facade/, and the JSDoc on them is the API reference users read. Splitting
 * the class would split that reference; the work itself lives in facade/.
 */
import type { Backend, BackendCapabilities, GroupMembership, MemberView, TransactionClient, TrimReport } from './core/backend.js';
import { requireCapability } from './core/capabilities.js';
import type { CommitInput, HeartbeatOptions, OwnershipFenceInput } from './core/ownership-arguments.js';
import type { RheoTransaction } from './transaction/rheo-transaction.js';
import type { PingResult } from './core/health.js';
import type { Clock } from './core/clock.js';
import type { RheoLimits } from './core/limits.js';
import { RheoError, invalidArgument } from './core/errors.js';
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
import { describe } from './core/validation.js';
import { memoryBackend } from './backends/memory/memory-backend.js';
import { RheoProducer } from './producer/rheo-producer.js';
import type { ProducerOptions } from './producer/producer-options.js';
import { createConsumer, type Consumer } from './consumer/consumer.js';
import { createLeaseSource } from './facade/lease-source.js';
import type { LeaseSource } from './runtime/sources.js';
import type { ConsumeOptions } from './consumer/consumer-types.js';
import { BackgroundTrimmer } from './retention/background-trimmer.js';
import { PartitionConsumer } from './consumer/partition-consumer.js';
import type { PartitionConsumeOptions } from './consumer/partition-options.js';
import { trackGroupReader } from './observability/same-group-warning.js';
import { observePartitionConsumer } from './observability/partition-diagnostics.js';
import { FacadeCalls } from './facade/calls.js';
import { resolveOptions, type RheoDefaults, type RheoOptions } from './facade/options.js';
import * as admin from './facade/admin.js';
import * as log from './facade/log.js';
import * as leaseCalls from './facade/leases.js';
import * as operations from './facade/operations.js';
import * as ownership from './facade/ownership.js';

export type { RheoDefaults, RheoOptions, RetentionTrimmerOptions } from './facade/options.js';
export type { SettleRequest } from './core/types.js';

export function createRheo(options: RheoOptions = {}): Rheo {
  return new Rheo(options);
}

/**
 * The lease source of `rheo` (what its producers and consumers claim, renew
 * and settle through), for a stage built outside `rheo.producer()`, which
 * `close()` then does not end: it learns `closed` from its own next call.
 * Not exported from the package.
 */
// Assigned once, by Rheo's static block, which alone can read the private source.
export let leaseSourceOf: (rheo: Rheo) => LeaseSource;

/**
 * The facade: validates and normalises every argument, then delegates to the
 * backend. A call that fails validation reaches no backend, so it writes nothing.
 *
 * Each area lives in its own file under `facade/` (admin, log, leases,
 * operations, ownership) over the call machinery of `facade/calls.ts`; this
 * class holds the instance's state and delegates.
 */
export class Rheo {
  static {
    leaseSourceOf = (rheo) => rheo.#leaseSource();
  }

  readonly backend: Backend;
  readonly clock: Clock;
  readonly defaults: Readonly<RheoDefaults>;
  /** How to end each producer and consumer this instance made; `close()` runs them all. */
  readonly #attached = new Set<() => Promise<void>>();
  readonly limits: Readonly<RheoLimits>;
  /** The background trimmer; `null` when disabled. `runOnce()` runs a pass now. */
  readonly trimmer: BackgroundTrimmer | null;
  /** Where rheo's own diagnostics go (`options.logger`; silent by default). */
  readonly logger: Logger;
  readonly #telemetry: RheoTelemetry | null;
  readonly #calls: FacadeCalls;
  #closing: Promise<void> | null = null;
  #leases: LeaseSource | null = null;

  constructor(options: RheoOptions = {}) {
    const resolved = resolveOptions(options);
    this.clock = resolved.clock;
    this.defaults = resolved.defaults;
    this.limits = resolved.limits;
    this.logger = resolveLogger(options.logger);
    this.backend = options.backend ?? memoryBackend({ clock: this.clock });
    if (this.logger !== silentLogger) this.backend.useLogger?.(this.logger);
    this.#telemetry = resolved.telemetry ? createTelemetry(this.clock, (stream, group) => this.backend.lag(stream, group)) : null;
    attachTelemetry(this, this.#telemetry);
    this.#calls = new FacadeCalls({
      backend: this.backend,
      clock: this.clock,
      defaults: this.defaults,
      limits: this.limits,
      logger: this.logger,
      telemetry: this.#telemetry,
      trimBatchSize: resolved.trimmer.batchSize,
    });
    // Last: nothing after this may throw, or the constructor would leave a timer behind.
    const { enabled, intervalMs, batchSize } = resolved.trimmer;
    this.trimmer = enabled ? new BackgroundTrimmer(this.backend, { intervalMs, batchSize, maxBatchesPerPass: 100 }) : null;
    this.trimmer?.start();
  }

  get closed(): boolean {
    return this.#calls.closed;
  }

  // ---- administration (facade/admin.ts) ----------------------------------

  migrate(options: CallOptions = {}): Promise<void> {
    return admin.migrate(this.#calls, options);
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
  ping(options: CallOptions = {}): Promise<PingResult> {
    return admin.ping(this.#calls, options);
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
    this.#closing ??= admin.shutdown(this.#calls, this.#attached, this.trimmer);
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  createStream(name: string, options: StreamOptions = {}): Promise<void> {
    return admin.createStream(this.#calls, name, options);
  }

  /**
   * Sets (or with `null` clears) the stream's retention; the background
   * trimmer applies it. See docs/semantics.md, "Retention".
   */
  setRetention(stream: string, retention: Retention | null, options: CallOptions = {}): Promise<void> {
    return admin.setRetention(this.#calls, stream, retention, options);
  }

  /**
   * Deletes events from the front of each partition: those `before` a time
   * and/or beyond the newest `keep` per partition, or what the stream's
   * retention allows when neither is given; only what every group has settled
   * unless `force`. Runs in bounded batches until nothing more may go.
   */
  trim(stream: string, options: TrimOptions = {}): Promise<TrimReport> {
    return admin.trim(this.#calls, stream, options);
  }

  /** Deletes a group's progress, leases and dead letters. Requires `{ confirm: true }`. */
  deleteGroup(stream: string, group: string, options: DeleteOptions): Promise<void> {
    return admin.deleteGroup(this.#calls, stream, group, options);
  }

  /** Deletes a stream with its events and groups; the name can be created again. Requires `{ confirm: true }`. */
  deleteStream(stream: string, options: DeleteOptions): Promise<void> {
    return admin.deleteStream(this.#calls, stream, options);
  }

  listStreams(options: CallOptions = {}): Promise<StreamInfo[]> {
    return admin.listStreams(this.#calls, options);
  }

  createGroup(stream: string, group: string, options: GroupOptions = {}): Promise<void> {
    return admin.createGroup(this.#calls, stream, group, options);
  }

  listGroups(stream: string, options: CallOptions = {}): Promise<string[]> {
    return admin.listGroups(this.#calls, stream, options);
  }

  groupInfo(stream: string, group: string, options: CallOptions = {}): Promise<GroupInfo> {
    return admin.groupInfo(this.#calls, stream, group, options);
  }

  // ---- the log (facade/log.ts) -------------------------------------------

  /** Resolves to the stored event with `existed`: whether an event with the input's `id` was already stored. */
  append<T extends JsonValue = JsonValue>(stream: string, input: AppendInput<T>, options: CallOptions = {}): Promise<AppendedEvent<T>> {
    return log.append(this.#calls, stream, input, options);
  }

  /**
   * All or nothing: one bad input rejects the whole batch before anything is
   * written. One event per input, in order, each with `existed`.
   */
  appendBatch<T extends JsonValue = JsonValue>(
    stream: string,
    inputs: AppendInput<T>[],
    options: CallOptions = {},
  ): Promise<AppendedEvent<T>[]> {
    return log.appendBatch(this.#calls, stream, inputs, options);
  }

  read<T extends JsonValue = JsonValue>(stream: string, options: ReadOptions = {}): Promise<RheoEvent<T>[]> {
    return log.read<T>(this.#calls, stream, options);
  }

  query<T extends JsonValue = JsonValue>(stream: string, options: QueryOptions = {}): Promise<QueryResult<T>> {
    return log.query<T>(this.#calls, stream, options);
  }

  /**
   * Every event of a query, page after page, without handling cursors: the
   * options are those of `query` (`limit` and `maxBytes` size each page) and
   * are checked at once, so bad input throws here. A page is fetched only
   * when iteration needs an event past the previous one, and leaving a
   * `for await` early fetches nothing more.
   */
  queryAll<T extends JsonValue = JsonValue>(stream: string, options: QueryOptions = {}): AsyncIterable<RheoEvent<T>> {
    return log.queryAll<T>(this.#calls, stream, options);
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
    return log.transaction(this.#calls, client);
  }

  // ---- consuming ----------------------------------------------------------

  /**
   * An object-mode `Readable` of leases for `stream.pipeline`, with demand
   * bounded by `maxDemand` (see `RheoProducer`). Defaults come from `defaults`.
   */
  producer<T extends JsonValue = JsonValue>(options: ProducerOptions): RheoProducer<T> {
    this.#assertOpen();
    const producer = new RheoProducer<T>(this.#leaseSource(), options);
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
   * of partition ownership instead (Kafka's model, docs/design.md#two-ways-to-consume-a-group): it owns a
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

  // ---- leases (facade/leases.ts) -----------------------------------------

  fetch<T extends JsonValue = JsonValue>(stream: string, group: string, options: FetchOptions = {}): Promise<Lease<T>[]> {
    return leaseCalls.fetch<T>(this.#calls, stream, group, options);
  }

  /** Extends a live lease. Fenced: `stale_lease` unless the lease is still held under this `leaseId`. */
  renew<T>(lease: Lease<T>, options: RenewOptions = {}): Promise<Lease<T>> {
    return leaseCalls.renew(this.#calls, lease, options);
  }

  /** Renews many leases in one backend call; one result per lease, in order. */
  renewMany<T>(leases: Lease<T>[], options: RenewOptions = {}): Promise<Array<{ ok: true; lease: Lease<T> } | { ok: false; error: RheoError }>> {
    return leaseCalls.renewMany(this.#calls, leases, options);
  }

  ack(lease: Lease<unknown>, options: CallOptions = {}): Promise<void> {
    return leaseCalls.ack(this.#calls, lease, options);
  }

  /** Retry later (after `delayMs`, default 0). At `attempt >= maxAttempts` this dead-letters. */
  nack(lease: Lease<unknown>, reason?: string | null, options: NackOptions = {}): Promise<void> {
    return leaseCalls.nack(this.#calls, lease, reason, options);
  }

  /** Dead-letter now. */
  reject(lease: Lease<unknown>, reason?: string | null, options: CallOptions = {}): Promise<void> {
    return leaseCalls.reject(this.#calls, lease, reason, options);
  }

  /** Give the delivery back unprocessed, without spending an attempt. */
  release(lease: Lease<unknown>, options: CallOptions = {}): Promise<void> {
    return leaseCalls.release(this.#calls, lease, options);
  }

  ackMany(leases: Lease<unknown>[], options: CallOptions = {}): Promise<SettleResult[]> {
    return leaseCalls.ackMany(this.#calls, leases, options);
  }

  nackMany(leases: Lease<unknown>[], reason?: string | null, options: NackOptions = {}): Promise<SettleResult[]> {
    return leaseCalls.nackMany(this.#calls, leases, reason, options);
  }

  rejectMany(leases: Lease<unknown>[], reason?: string | null, options: CallOptions = {}): Promise<SettleResult[]> {
    return leaseCalls.rejectMany(this.#calls, leases, reason, options);
  }

  releaseMany(leases: Lease<unknown>[], options: CallOptions = {}): Promise<SettleResult[]> {
    return leaseCalls.releaseMany(this.#calls, leases, options);
  }

  /**
   * Mixed settles in one backend round trip, one result per op. Used by the
   * producer to coalesce settles issued close together.
   */
  settleMany(ops: SettleRequest[], options: CallOptions = {}): Promise<SettleResult[]> {
    return leaseCalls.settleMany(this.#calls, ops, options);
  }

  // ---- progress and operations (facade/operations.ts) --------------------

  /**
   * Frontier, high watermark, lag and age of the oldest unsettled event per
   * partition of the group (or only of `partitions`, which the group must
   * cover); `lag` is the sum over the partitions reported.
   */
  lag(stream: string, group: string, options: LagOptions = {}): Promise<LagReport> {
    return operations.lag(this.#calls, stream, group, options);
  }

  /** Reopens deliveries for redelivery; the log itself never changes. */
  replay(stream: string, group: string, spec: ReplaySpec, options: ReplayOptions = {}): Promise<void> {
    return operations.replay(this.#calls, stream, group, spec, options);
  }

  /**
   * Forgets the group's progress in all its partitions, or only in
   * `partitions`: their delivery state and dead letters are dropped and
   * their frontier restarts at the given start. Requires `{ confirm: true }`.
   */
  resetGroup(stream: string, group: string, options: ResetOptions): Promise<void> {
    return operations.resetGroup(this.#calls, stream, group, options);
  }

  deadLetters<T extends JsonValue = JsonValue>(stream: string, group: string, options: DeadLetterOptions = {}): Promise<DeadLetter<T>[]> {
    return operations.deadLetters<T>(this.#calls, stream, group, options);
  }

  /** Reopens dead letters (all, or the given event ids) with attempts reset. Returns how many. */
  redrive(stream: string, group: string, options: RedriveOptions = {}): Promise<number> {
    return operations.redrive(this.#calls, stream, group, options);
  }

  // ---- partition ownership (facade/ownership.ts) -------------------------

  /**
   * Joins (first call) or keeps a member in the group and returns what it
   * owns: partitions with their generation and frontier, and those it is
   * asked to give up (`revoking`). `group_mode_conflict` while
   * competing-consumer leases of the group are live. `rheo.consume({
   * assignment: 'partitions' })` calls this on a timer; call it yourself
   * only to build your own runtime.
   */
  heartbeat(stream: string, group: string, options: HeartbeatOptions): Promise<MemberView> {
    return ownership.heartbeat(this.#calls, stream, group, options);
  }

  /** Ends the member's session and frees what it owns. Idempotent. */
  leaveGroup(stream: string, group: string, memberId: string, options: CallOptions = {}): Promise<void> {
    return ownership.leaveGroup(this.#calls, stream, group, memberId, options);
  }

  /** Hands owned partitions back (normally revoking ones, after their last commit). One result per fence. */
  releasePartitions(fences: OwnershipFenceInput[], options: CallOptions = {}): Promise<SettleResult[]> {
    return ownership.releasePartitions(this.#calls, fences, options);
  }

  /** Reads an owned partition after `after`, fenced: `stale_generation` once it moved on. */
  readOwned<T extends JsonValue = JsonValue>(fence: OwnershipFenceInput, options: ReadOptions = {}): Promise<RheoEvent<T>[]> {
    return ownership.readOwned<T>(this.#calls, fence, options);
  }

  /**
   * Offset commits, fenced by generation: each moves its partition's
   * frontier up to `upTo` (never back) and dead-letters `deadLetters` in the
   * same write. One result per op; a failed op changes nothing.
   */
  commit(ops: CommitInput[], options: CallOptions = {}): Promise<SettleResult[]> {
    return ownership.commit(this.#calls, ops, options);
  }

  /** Live members, the owner of each partition and the group generation. */
  members(stream: string, group: string, options: CallOptions = {}): Promise<GroupMembership> {
    return ownership.members(this.#calls, stream, group, options);
  }

  /** What competing consumers claim, renew and settle through (facade/lease-source.ts); made on first use. */
  #leaseSource(): LeaseSource {
    const calls = this.#calls;
    this.#leases ??= createLeaseSource({
      backend: this.backend,
      defaults: this.defaults,
      clock: this.clock,
      logger: this.logger,
      telemetry: this.#telemetry,
      assertOpen: () => this.#assertOpen(),
      assertCanSettle: () => calls.assertCanSettle(),
      call: (fn, target) => calls.call(fn, undefined, target),
    });
    return this.#leases;
  }

  #assertOpen(): void {
    this.#calls.assertOpen();
  }
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
