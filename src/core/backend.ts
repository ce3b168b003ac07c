import type { Clock } from './clock.js';
import type { Logger } from './logger.js';
import type { DeadLetter, GroupInfo, GroupMembership, LagReport, Lease, QueryResult, RheoEvent, StreamInfo, RetentionPolicy } from './types.js';
import type {
  AppendOutcome,
  CommitOp,
  BlockingFetchResult,
  BlockingReadResult,
  FetchRequest,
  GroupSpec,
  GroupStart,
  GroupStorageStats,
  HeartbeatRequest,
  LeaseRef,
  MemberView,
  NormalizedQuery,
  NormalizedReplay,
  OwnedTransaction,
  OwnershipFence,
  PreparedAppend,
  RenewResult,
  SettleOp,
  SettleOutcome,
  TransactionClient,
  TransactionScope,
  TrimReport,
  TrimRequest,
} from './backend-types.js';

export * from './backend-types.js';

/*
 * The backend contract, in capability-sized interfaces. Every backend is a
 * `StoreBase` with a `LogStore`, a `LeaseStore` and a `ProgressStore`; the
 * optional interfaces match the capability flags one to one
 * (`notifications` → `NotificationStore`, `partitionOwnership` →
 * `OwnershipStore`, `transactions` → `TransactionStore`, `retention` →
 * `RetentionStore`), and a backend that declares a flag implements the whole
 * interface. Callers reach an optional interface through `capability()` in
 * core/capabilities.ts, which checks the flag once and hands back the typed
 * interface, so no caller asserts that a method exists.
 *
 * The facade validates and normalises every argument before calling in, so a
 * backend receives only well-formed values: names already match the name
 * rule, limits are positive integers, payloads are JSON. Backends check what
 * only they can know (existence, partition ranges, fencing) and throw
 * `RheoError`s with the codes the contract names. A call that throws must
 * leave no partial write behind.
 *
 * Cancellation: the facade runs each backend call under the caller's abort
 * signal, which a backend may read with `currentCallSignal()`
 * (core/call-options.ts) to stop work in flight (PostgreSQL cancels the
 * running statement). A backend that ignores it is still correct: the
 * facade rejects the aborted call itself and drops the late outcome.
 */

/** What every backend has, whatever it stores. */
export interface StoreBase {
  readonly name: string;

  readonly capabilities: BackendCapabilities;

  /**
   * Names the data this backend reaches, for a shared store: two backend
   * objects with one `storeId` read and write the same streams and groups
   * (PostgreSQL: server, database and schema; Redis: server or cluster
   * nodes, database and key prefix). Absent for a process-local store, which
   * only its own object reaches.
   */
  readonly storeId?: string;

  /** Idempotent; safe when several processes race. Memory: no-op. */
  migrate(): Promise<void>;

  /** Idempotent. Ends only what the backend itself created. */
  close(): Promise<void>;

  /**
   * One cheap round trip to the store: resolves the installed schema
   * version (`null` where the backend has no schema, or it is not migrated
   * yet). An unreachable store is `backend_unavailable`.
   */
  ping(): Promise<number | null>;

  /**
   * The facade hands over its `logger` once, at `createRheo`, so a
   * backend can report what happens outside any call (a LISTEN connection
   * dropped and reopened, migrations applied). Optional: a backend with
   * nothing of the kind to say leaves it out. Never throws.
   */
  useLogger?(logger: Logger): void;
}

/** Streams and their immutable, partitioned log. */
export interface LogStore {
  /** `already_exists` when the name is taken. The stream and its retention are created in one step. */
  createStream(name: string, partitions: number, retention?: RetentionPolicy | null): Promise<void>;

  listStreams(): Promise<StreamInfo[]>;

  /**
   * All or nothing. Each input routes with `routePartition` from core.
   * One result per input, in order. An input whose `id` already exists
   * returns the stored event with `existed: true` and writes nothing for that
   * input (the others still append). Within one batch a repeated id yields
   * the event of its first occurrence, `existed: true` from the second
   * occurrence on, as if the inputs were appended one by one.
   */
  append(stream: string, inputs: PreparedAppend[]): Promise<AppendOutcome[]>;

  /**
   * Events with `sequence > after` in one partition, ascending: at most
   * `limit`, and only while their sizes add up to at most `maxBytes` (the
   * first one always). `invalid_partition`.
   */
  read(stream: string, partition: number, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]>;

  query(stream: string, query: NormalizedQuery): Promise<QueryResult>;
}

/** Groups and the per-event leases of competing consumers. */
export interface LeaseStore {
  /**
   * `stream_not_found`, `already_exists`, `invalid_partition` (a partition
   * of `options.partitions` outside the stream, or a start map naming a
   * partition outside the group).
   */
  createGroup(stream: string, group: string, options: GroupSpec): Promise<void>;

  /** `stream_not_found`. Names sorted ascending. */
  listGroups(stream: string): Promise<string[]>;

  /**
   * Claims at most `limit` claimable deliveries (never offered; nacked or
   * released and past their delay; leased with `expiresAt <= now`). Lowest
   * sequence first within a partition, round-robin across partitions starting
   * at a rotating partition. Claims past `maxAttempts` dead-letter instead.
   * `request.partitions: null` means the group's partitions; naming one the
   * group does not cover is `invalid_partition`.
   */
  fetch(stream: string, group: string, request: FetchRequest): Promise<Lease[]>;

  /** One result per ref, in order. Fenced: `stale_lease` unless leased under that exact id. */
  renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]>;

  /** One result per op, in order; a failed op changes nothing. */
  settle(ops: SettleOp[]): Promise<SettleOutcome[]>;

  /**
   * How many claims a competing consumer splits a full demand into (default
   * 1: one claim of all the room it has). A store that runs one call at a
   * time (Redis) drains faster when the consumer handles one claim's leases
   * while the store answers the next claim and the last settle; a store that
   * runs them side by side (PostgreSQL) drains faster with fewer, larger claims.
   * Only a throughput hint: `maxDemand` bounds the leases held either way.
   */
  readonly claimsInFlight?: number;
}

/** A group's progress: lag, frontier moves, dead letters, and what it stores. */
export interface ProgressStore {
  /**
   * Reports the group's partitions, or only `partitions` (each covered by
   * the group, else `invalid_partition`); `lag` is the sum over those reported.
   */
  lag(stream: string, group: string, partitions?: number[] | null): Promise<LagReport>;

  /**
   * Reopens deliveries (never copies events). `partitions: null` means all
   * of the group's; naming one the group does not cover is `invalid_partition`.
   * A `query` spec reopens exactly the settled events that match it.
   */
  replay(stream: string, group: string, spec: NormalizedReplay, partitions: number[] | null): Promise<void>;

  /**
   * Drops delivery state and dead letters of the group's partitions (or only
   * of `partitions`, each covered by the group, else `invalid_partition`);
   * their frontier restarts at `start`, the other partitions keep theirs.
   */
  resetGroup(stream: string, group: string, start: GroupStart, partitions?: number[] | null): Promise<void>;

  groupInfo(stream: string, group: string): Promise<GroupInfo>;

  /**
   * Ordered by dead-letter id ascending; `cursor_not_found` when `after`
   * names no current dead letter. At most `limit`, and only while their
   * events' sizes add up to at most `maxBytes` (the first one always).
   */
  deadLetters(stream: string, group: string, limit: number, after: string | null, maxBytes: number): Promise<DeadLetter[]>;

  /** Reopens dead letters (all, or those of the given event ids) with attempts reset; returns how many. */
  redrive(stream: string, group: string, eventIds: string[] | null): Promise<number>;

  /** Introspection gauge: how much delivery state a group holds right now. */
  storageStats(stream: string, group: string): Promise<GroupStorageStats>;
}

/** Capability `notifications`. */
export interface NotificationStore {
  /**
   * Resolves `true` as soon as an append to `stream` is observed, `false` at
   * the timeout or on abort. Only when `capabilities.notifications`; a lost
   * wakeup only costs latency because callers still poll.
   */
  waitForAppend(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean>;
}

/** Capability `blockingFetch`. */
export interface BlockingFetchStore {
  /**
   * An idle consumer's wait and its next fetch in one step, inside the store:
   * waits until an append to `stream` lands after the log's end as this
   * process's last short fetch from the group saw it (that fetch took
   * everything claimable then), or `timeoutMs` passes, or `signal` aborts,
   * then fetches as `fetch` does, with no round trip between the append and
   * the claim. `appended` says whether an append ended the wait. Resolves
   * `null` without claiming anything when it cannot wait this way for this
   * request now (the caller waits with `waitForAppend` and fetches); after
   * an abort it still resolves what the fetch claimed, which the caller gives
   * back. Errors as `fetch`.
   */
  fetchAfterAppend(stream: string, group: string, request: FetchRequest, timeoutMs: number, signal: AbortSignal): Promise<BlockingFetchResult | null>;

  /**
   * The same for an owned partition (with `partitionOwnership`): waits for an
   * event past `after` in the fenced partition (at most `timeoutMs`, or until
   * `signal` aborts), then reads as `readOwned` does, in the same step.
   * `null` when it cannot wait so now. Errors as `readOwned`.
   */
  readOwnedAfterAppend(
    fence: OwnershipFence,
    after: number,
    limit: number,
    maxBytes: number,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<BlockingReadResult | null>;
}

/** Capability `partitionOwnership`. */
export interface OwnershipStore {
  /**
   * Partition ownership (capability `partitionOwnership`). The
   * first heartbeat of a member id joins it. Every heartbeat, in one atomic
   * step on the store: refreshes the caller's session to `now + sessionMs`
   * (store clock), drops members whose session expired (their partitions are
   * free at once), runs the sticky assignor of `core/assignor.ts` over the
   * live members when membership changed, and returns the caller's view.
   *
   * A partition moves in two steps so two live members never own it at once:
   * the assignor marks it `revoking` on its owner; the owner finishes, commits
   * and calls `releasePartitions`; only then (or once `rebalanceTimeoutMs`
   * has passed since the revoke, or the owner's session expired) is it given
   * to its new member with `generation + 1`, fencing the old owner.
   * `group_not_found`; `group_mode_conflict` while competing-consumer leases
   * of the group are live.
   */
  heartbeat(stream: string, group: string, request: HeartbeatRequest): Promise<MemberView>;

  /** Gives up everything the member owns and ends its session. Idempotent; never fails for an unknown member. */
  leaveGroup(stream: string, group: string, memberId: string): Promise<void>;

  /** Hands back partitions (normally `revoking` ones). One result per fence; `stale_generation` changes nothing. */
  releasePartitions(fences: OwnershipFence[]): Promise<SettleOutcome[]>;

  /**
   * Range read of an owned partition: events with `sequence > after`, like
   * `read`, but fenced: `stale_generation` unless `fence` is the partition's
   * current owner and generation.
   */
  readOwned(fence: OwnershipFence, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]>;

  /**
   * Offset commits: one small write per op. Dead-letters `op.deadLetters`
   * (which must lie in `(frontier, upTo]`) and advances the partition's
   * frontier to `upTo`, in one atomic step, fenced: a stale generation fails
   * with `stale_generation` and changes nothing. A commit never moves the
   * frontier backwards (an `upTo` at or below it is a no-op success).
   */
  commit(ops: CommitOp[]): Promise<SettleOutcome[]>;

  /** Live members and their partitions, for `groupInfo`, `lag` and the CLI. Empty in competing mode. */
  members(stream: string, group: string): Promise<GroupMembership>;
}

/** Capability `transactions`. */
export interface TransactionStore {
  /**
   * Transactions the application owns (capability `transactions`). Binds the
   * transactional subset to `client`, a connection on which the application
   * has run `BEGIN`; rheo never commits, rolls back or releases it. Appends
   * are invisible until the application commits, and a rollback leaves no
   * trace (invariant 3 still holds: no gap, no burned sequence). A fenced
   * settle holds the delivery until the transaction ends, so a stale holder's
   * transaction fails instead of committing its effects.
   */
  transaction(client: TransactionClient): TransactionScope;

  /** A transaction on a connection rheo checks out itself, for `consume({ transaction: true })` and sinks. */
  beginTransaction(): Promise<OwnedTransaction>;
}

/** Capability `retention`. */
export interface RetentionStore {
  /**
   * Retention and deletion (docs/semantics.md, "Retention"): a backend declares the capability exactly when it implements
   * these four calls. Without it the facade refuses them, and `createStream`
   * with a retention policy, with `unsupported`, and a backend is only ever
   * handed `createStream(..., null)`.
   *
   * Sets or clears a
   * stream's policy; trimming obeys it in the background. `stream_not_found`.
   */
  setRetention(stream: string, retention: RetentionPolicy | null): Promise<void>;

  /**
   * Deletes events from the front of each partition, at most `request.limit`
   * per call so callers can loop in bounded batches. Without `force` it
   * deletes only events at or below every group's frontier. Never reuses a
   * sequence. Dead letters of deleted events go with them. `stream_not_found`.
   */
  trim(stream: string, request: TrimRequest): Promise<TrimReport>;

  /** Deletes a group's progress, leases and dead letters. `stream_not_found`, `group_not_found`. */
  deleteGroup(stream: string, group: string): Promise<void>;

  /** Deletes a stream, its events and its groups; the name can be created again, fresh. `stream_not_found`. */
  deleteStream(stream: string): Promise<void>;
}

/** The optional interface behind each optional capability flag. */
export interface CapabilityStores {
  notifications: NotificationStore;
  blockingFetch: BlockingFetchStore;
  partitionOwnership: OwnershipStore;
  transactions: TransactionStore;
  retention: RetentionStore;
}

export type OptionalCapability = keyof CapabilityStores;

/**
 * A backend: the stores every backend has, and the optional ones its
 * capability flags declare (present exactly when the flag is `true`).
 */
export interface Backend
  extends StoreBase,
    LogStore,
    LeaseStore,
    ProgressStore,
    Partial<NotificationStore>,
    Partial<BlockingFetchStore>,
    Partial<OwnershipStore>,
    Partial<TransactionStore>,
    Partial<RetentionStore> {}

/**
 * What a backend supports, so callers can pick a code path before calling
 * (`requireCapability` in core/capabilities.ts refuses with `unsupported`).
 */
export interface BackendCapabilities {
  /** Survives a process restart. */
  readonly durable: boolean;
  /** Many processes can share it safely. */
  readonly distributed: boolean;
  /** Implements `waitForAppend`. */
  readonly notifications: boolean;
  /** Implements `fetchAfterAppend`: an idle consumer's claim runs in the store as the append lands (Redis on one server). */
  readonly blockingFetch: boolean;
  /** Calls can join a transaction the application owns (outbox append, settle with the app's writes): `transaction`, `beginTransaction`. */
  readonly transactions: boolean;
  /** Partition-ownership consumption (members, assignments, generations): `heartbeat` and the calls after it. */
  readonly partitionOwnership: boolean;
  /** Retention policies, trimming and deletion: `setRetention`, `trim`, `deleteGroup`, `deleteStream`. */
  readonly retention: boolean;
  /** Runs across a sharded cluster of the store (e.g. Redis Cluster slots). */
  readonly cluster: boolean;
}

export type BackendCapability = keyof BackendCapabilities;

export interface BackendOptions {
  clock?: Clock;
}
