import type { Clock } from './clock.js';
import type { Logger } from './logger.js';
import type { RheoError } from './errors.js';
import type {
  DeadLetter,
  GroupInfo,
  JsonObject,
  JsonValue,
  LagReport,
  Lease,
  QueryResult,
  RheoEvent,
  StreamInfo,
} from './types.js';

/**
 * The backend contract. The facade (`src/rheo.ts`) validates and normalises
 * every argument before calling in, so a backend receives only well-formed
 * values: names already match the name rule, limits are positive integers,
 * payloads are JSON. Backends check what only they can know (existence,
 * partition ranges, fencing) and throw `RheoError`s with the codes the
 * contract names. A call that throws must leave no partial write behind.
 *
 * Cancellation: the facade runs each backend call under the caller's abort
 * signal, which a backend may read with `currentCallSignal()`
 * (core/call-options.ts) to stop work in flight (PostgreSQL cancels the
 * running statement). A backend that ignores it is still correct: the
 * facade rejects the aborted call itself and drops the late outcome.
 */
export interface Backend {
  readonly name: string;
  readonly capabilities: BackendCapabilities;

  /** Idempotent; safe when several processes race. Memory: no-op. */
  migrate(): Promise<void>;
  /** Idempotent. Ends only what the backend itself created. */
  close(): Promise<void>;

  /** `already_exists` when the name is taken. The stream and its retention are created in one step. */
  createStream(name: string, partitions: number, retention?: RetentionPolicy | null): Promise<void>;
  listStreams(): Promise<StreamInfo[]>;
  /**
   * `stream_not_found`, `already_exists`, `invalid_partition` (a partition
   * of `options.partitions` outside the stream, or a start map naming a
   * partition outside the group).
   */
  createGroup(stream: string, group: string, options: GroupSpec): Promise<void>;
  /** `stream_not_found`. Names sorted ascending. */
  listGroups(stream: string): Promise<string[]>;

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

  /**
   * Resolves `true` as soon as an append to `stream` is observed, `false` at
   * the timeout or on abort. Only when `capabilities.notifications`; a lost
   * wakeup only costs latency because callers still poll.
   */
  waitForAppend?(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean>;

  /** Introspection gauge: how much delivery state a group holds right now. */
  storageStats(stream: string, group: string): Promise<GroupStorageStats>;

  /**
   * One cheap round trip to the store: resolves the installed schema
   * version (`null` where the backend has no schema, or it is not migrated
   * yet). An unreachable store is `backend_unavailable`.
   */
  ping(): Promise<number | null>;

  /**
   * Issue 15: the facade hands over its `logger` once, at `createRheo`, so a
   * backend can report what happens outside any call (a LISTEN connection
   * dropped and reopened, migrations applied). Optional: a backend with
   * nothing of the kind to say leaves it out. Never throws.
   */
  useLogger?(logger: Logger): void;

  // ---------------------------------------------------------------------------
  // Contract additions agreed for issues 11, 13 and 14 (see the types below).
  // They are optional; each backend that declares the matching capability
  // (`partitionOwnership`, `transactions`, `retention`) implements the whole set.
  // ---------------------------------------------------------------------------

  /**
   * Partition ownership (capability `partitionOwnership`, DESIGN.md §7). The
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
  heartbeat?(stream: string, group: string, request: HeartbeatRequest): Promise<MemberView>;
  /** Gives up everything the member owns and ends its session. Idempotent; never fails for an unknown member. */
  leaveGroup?(stream: string, group: string, memberId: string): Promise<void>;
  /** Hands back partitions (normally `revoking` ones). One result per fence; `stale_generation` changes nothing. */
  releasePartitions?(fences: OwnershipFence[]): Promise<SettleOutcome[]>;
  /**
   * Range read of an owned partition: events with `sequence > after`, like
   * `read`, but fenced: `stale_generation` unless `fence` is the partition's
   * current owner and generation.
   */
  readOwned?(fence: OwnershipFence, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]>;
  /**
   * Offset commits: one small write per op. Dead-letters `op.deadLetters`
   * (which must lie in `(frontier, upTo]`) and advances the partition's
   * frontier to `upTo`, in one atomic step, fenced: a stale generation fails
   * with `stale_generation` and changes nothing. A commit never moves the
   * frontier backwards (an `upTo` at or below it is a no-op success).
   */
  commit?(ops: CommitOp[]): Promise<SettleOutcome[]>;
  /** Live members and their partitions, for `groupInfo`, `lag` and the CLI. Empty in competing mode. */
  members?(stream: string, group: string): Promise<GroupMembership>;

  /**
   * Transactions the application owns (capability `transactions`). Binds the
   * transactional subset to `client`, a connection on which the application
   * has run `BEGIN`; rheo never commits, rolls back or releases it. Appends
   * are invisible until the application commits, and a rollback leaves no
   * trace (invariant 3 still holds: no gap, no burned sequence). A fenced
   * settle holds the delivery until the transaction ends, so a stale holder's
   * transaction fails instead of committing its effects.
   */
  transaction?(client: TransactionClient): TransactionScope;
  /** A transaction on a connection rheo checks out itself, for `consume({ transaction: true })` and sinks. */
  beginTransaction?(): Promise<OwnedTransaction>;

  /**
   * Retention and deletion (issue 14, capability `retention`; docs/semantics.md
   * "Retention"): a backend declares the capability exactly when it implements
   * these four calls. Without it the facade refuses them, and `createStream`
   * with a retention policy, with `unsupported`, and a backend is only ever
   * handed `createStream(..., null)`.
   *
   * Sets or clears a
   * stream's policy; trimming obeys it in the background. `stream_not_found`.
   */
  setRetention?(stream: string, retention: RetentionPolicy | null): Promise<void>;
  /**
   * Deletes events from the front of each partition, at most `request.limit`
   * per call so callers can loop in bounded batches. Without `force` it
   * deletes only events at or below every group's frontier. Never reuses a
   * sequence. Dead letters of deleted events go with them. `stream_not_found`.
   */
  trim?(stream: string, request: TrimRequest): Promise<TrimReport>;
  /** Deletes a group's progress, leases and dead letters. `stream_not_found`, `group_not_found`. */
  deleteGroup?(stream: string, group: string): Promise<void>;
  /** Deletes a stream, its events and its groups; the name can be created again, fresh. `stream_not_found`. */
  deleteStream?(stream: string): Promise<void>;
}

// ----- Partition ownership -----------------------------------------------------

export interface HeartbeatRequest {
  /** Unique per consumer instance (a fresh id per process start). */
  memberId: string;
  /** The session ends this long after the heartbeat unless renewed. */
  sessionMs: number;
  /** How long a revoked partition waits for its owner's release before it moves anyway. */
  rebalanceTimeoutMs: number;
}

/** Fences an ownership call exactly as a lease id fences a settle. */
export interface OwnershipFence {
  stream: string;
  group: string;
  partition: number;
  memberId: string;
  /** Bumped every time the partition changes owner (and on replay/reset of it). */
  generation: number;
}

export interface OwnedPartition {
  partition: number;
  generation: number;
  /** The group's frontier for the partition when the view was taken: read after it. */
  frontier: number;
}

export interface MemberView {
  memberId: string;
  /** Bumped on every rebalance of the group; informational (fencing is per partition). */
  groupGeneration: number;
  /** Partitions the member owns now, including those it is asked to give up. */
  owned: OwnedPartition[];
  /** Owned partitions the assignor moved elsewhere: finish, commit, then `releasePartitions`. */
  revoking: number[];
  expiresAt: Date;
}

export interface CommitOp extends OwnershipFence {
  /** New frontier for the partition: every sequence up to it is settled. */
  upTo: number;
  /** Events in `(frontier, upTo]` that failed for good: dead-lettered in the same write. */
  deadLetters: Array<{ sequence: number; attempt: number; reason: string | null }>;
}

export interface MemberInfo {
  memberId: string;
  expiresAt: Date;
  partitions: number[];
  revoking: number[];
}

export interface GroupMembership {
  groupGeneration: number;
  members: MemberInfo[];
  /** Partition → owner member id, or `null` while unowned. */
  owners: Record<number, string | null>;
}

// ----- Transactions ------------------------------------------------------------

/** The least of a `pg` client that rheo uses inside an application's transaction. */
export interface TransactionClient {
  query(text: string, values?: unknown[]): Promise<unknown>;
}

/** The calls that join a transaction; same contracts as the `Backend` methods of the same names. */
export interface TransactionScope {
  append(stream: string, inputs: PreparedAppend[]): Promise<AppendOutcome[]>;
  settle(ops: SettleOp[]): Promise<SettleOutcome[]>;
  /** Present when the backend also has `partitionOwnership`: the offset commit joins the transaction. */
  commit?(ops: CommitOp[]): Promise<SettleOutcome[]>;
}

export interface OwnedTransaction {
  readonly client: TransactionClient;
  readonly scope: TransactionScope;
  /** Commits and returns the connection. A failed commit is `ambiguous` or `backend_unavailable`. */
  commit(): Promise<void>;
  /** Rolls back and returns the connection; never throws. */
  rollback(): Promise<void>;
}

// ----- Retention -----------------------------------------------------------------

export interface RetentionPolicy {
  /** Events older than this (by event timestamp) may be trimmed. */
  maxAgeMs: number | null;
  /** At most this many events are kept per partition. */
  maxEvents: number | null;
}

export interface TrimRequest {
  /** Trim what the stream's retention allows (`null` policy: nothing), or these explicit bounds. */
  before: Date | null;
  /** Per partition: keep at most this many newest events. */
  keep: number | null;
  /** Delete even what some group has not settled; the report says what each group lost. */
  force: boolean;
  /** At most this many events per call, across partitions. */
  limit: number;
  /**
   * When another trim of the same stream is running (in any process), return
   * an empty report at once instead of waiting for it: the background
   * trimmer sets it so that one trimmer at a time works on a stream.
   */
  skipIfBusy?: boolean;
}

export interface TrimReport {
  deleted: number;
  /** Per partition: events deleted and the new low watermark (first retained sequence). */
  partitions: Record<number, { deleted: number; lowWatermark: number }>;
  /** Only with `force`: per group, unsettled events removed; they count as dead-lettered-and-gone (frontier moves past them). */
  forced: Array<{ group: string; partition: number; unsettled: number }>;
}

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
  /** Calls can join a transaction the application owns (outbox append, settle with the app's writes): `transaction`, `beginTransaction`. */
  readonly transactions: boolean;
  /** Partition-ownership consumption (members, assignments, generations; DESIGN.md §7): `heartbeat` and the calls after it. */
  readonly partitionOwnership: boolean;
  /** Retention policies, trimming and deletion (issue 14): `setRetention`, `trim`, `deleteGroup`, `deleteStream`. */
  readonly retention: boolean;
  /** Runs across a sharded cluster of the store (e.g. Redis Cluster slots). */
  readonly cluster: boolean;
}

export type BackendCapability = keyof BackendCapabilities;

export interface BackendOptions {
  clock?: Clock;
}

/** A normalised group start: after a sequence everywhere, per partition, or at a time. */
export type GroupStart =
  | { kind: 'after'; after: number; perPartition: Record<number, number> }
  | { kind: 'at'; at: Date };

export interface GroupSpec {
  start: GroupStart;
  maxAttempts: number;
  /**
   * The partitions the group covers, ascending and distinct; absent or
   * `null`: all of the stream's. Fetch, lag, frontier, replay, reset and
   * stored state are all restricted to them; the set never changes.
   */
  partitions?: number[] | null;
}

export interface PreparedAppend {
  id: string | null;
  type: string;
  key: string | null;
  payload: JsonValue;
  metadata: JsonObject;
  partition: number | null;
  timestamp: Date;
  /** Payload plus metadata in bytes, by the size rule of core/json-size.ts. */
  size: number;
}

export interface AppendOutcome {
  event: RheoEvent;
  /** The input's id was already stored (or came earlier in the batch): nothing was written for it. */
  existed: boolean;
}

export interface NormalizedQuery {
  types: string[] | null;
  key: string | null;
  wherePayload: JsonValue | undefined;
  whereMetadata: JsonObject | undefined;
  from: Date | null;
  to: Date | null;
  afterSequence: number | null;
  untilSequence: number | null;
  partition: number | null;
  order: 'asc' | 'desc';
  limit: number;
  /**
   * Byte budget: the page ends before the first event that would take its
   * total size past `maxBytes` (the first event always fits); `nextCursor`
   * is set when the page was cut by `limit` or by `maxBytes`.
   */
  maxBytes: number;
  /** Decoded cursor: the last `(timestamp, partition, sequence)` already returned. */
  cursor: QueryPosition | null;
}

export interface QueryPosition {
  timestampMs: number;
  partition: number;
  sequence: number;
}

export interface FetchRequest {
  limit: number;
  consumerId: string;
  leaseMs: number;
  partitions: number[] | null;
  /**
   * Byte budget, by the size rule of core/json-size.ts: the claim walks its
   * usual order and stops before the first delivery whose event would take
   * the claimed events' total size past `maxBytes`, except that it always
   * claims the first one. Deliveries past the stop stay claimable.
   */
  maxBytes: number;
}

export interface LeaseRef {
  stream: string;
  group: string;
  partition: number;
  sequence: number;
  leaseId: string;
}

export type SettleOp =
  | (LeaseRef & { kind: 'ack' })
  | (LeaseRef & { kind: 'nack'; reason: string | null; delayMs: number })
  | (LeaseRef & { kind: 'reject'; reason: string | null })
  | (LeaseRef & { kind: 'release' });

export type SettleOutcome = { ok: true } | { ok: false; error: RheoError };
export type RenewResult = { ok: true; expiresAt: Date } | { ok: false; error: RheoError };

export type NormalizedReplay =
  | { kind: 'fromSequence'; fromSequence: number }
  | { kind: 'from'; from: Date }
  | { kind: 'eventIds'; eventIds: string[] }
  | { kind: 'query'; query: ReplayQuery };

/**
 * The filter of a replay by query: the fields of `NormalizedQuery` that
 * select events (no paging, order or partition: the replay's partitions
 * scope it). An event matches as it would match `query`.
 */
export type ReplayQuery = Pick<NormalizedQuery, 'types' | 'key' | 'wherePayload' | 'whereMetadata' | 'from' | 'to'>;

export interface GroupStorageStats {
  /** Rows/entries of per-delivery state (leased, pending, delayed). */
  deliveries: number;
  deadLetters: number;
}

export function receiptOf(stream: string, group: string, partition: number, sequence: number): string {
  return `${stream}/${group}/${partition}/${sequence}`;
}
