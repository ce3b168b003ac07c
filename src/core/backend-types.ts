import type { RheoError } from './errors.js';
import type { JsonObject, JsonValue, Lease, RheoEvent } from './types.js';

/*
 * The values that cross the backend contract (core/backend.ts): requests the
 * facade has already normalised, and the answers backends give. Kept apart
 * from the interfaces so each capability-sized interface reads on one screen.
 */

export type { GroupMembership, MemberInfo, RetentionPolicy } from './types.js';

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
  /**
   * Only in a transaction (`TransactionScope.commit`): the commit must move
   * the frontier forward. When the frontier is already at or past `upTo` it
   * is refused with `already_exists` and the transaction can only roll back:
   * an earlier run of the same handler whose COMMIT answer was lost
   * (`ambiguous`) did commit, and a second commit would write its effect twice.
   */
  once?: boolean;
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

/** What `fetchAfterAppend` claimed, and whether an append (rather than the timeout or an abort) ended its wait. */
export interface BlockingFetchResult {
  leases: Lease[];
  appended: boolean;
}

/** What `readOwnedAfterAppend` read, and whether an append (rather than the timeout or an abort) ended its wait. */
export interface BlockingReadResult {
  events: RheoEvent[];
  appended: boolean;
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
