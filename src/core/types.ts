import type { RheoError } from './errors.js';

/**
 * Cancellation, accepted by every facade call in its last options argument
 * (docs/semantics.md, "Cancellation").
 */
export interface CallOptions {
  /**
   * Aborting rejects the call with `signal.reason`; an already-aborted
   * signal sends nothing. A write aborted after it was sent rejects with
   * `ambiguous` instead (it may have been applied).
   */
  signal?: AbortSignal;
  /** Aborts the call, as `signal` would, with a `RheoError` of code `timeout` once it has run this long (milliseconds). */
  timeoutMs?: number;
}

/** A value that survives `JSON.stringify` / `JSON.parse` unchanged. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** One immutable entry of the log. */
export interface RheoEvent<T = JsonValue> {
  /** Unique within the stream; generated (UUIDv7) when the producer gives none. */
  readonly id: string;
  readonly stream: string;
  readonly partition: number;
  /** Starts at 1 and is contiguous per (stream, partition). */
  readonly sequence: number;
  readonly type: string;
  readonly key: string | null;
  readonly payload: T;
  readonly metadata: JsonObject;
  readonly timestamp: Date;
}

/**
 * What `append` and `appendBatch` resolve to: the stored event plus
 * `existed`. `read`, `query` and leases carry plain `RheoEvent`s.
 */
export interface AppendedEvent<T = JsonValue> extends RheoEvent<T> {
  /**
   * `true` when the input's `id` was already stored (or came earlier in the
   * same batch), so nothing was written for it and this is the stored event.
   * After an `ambiguous` failure, retry with the same `id`: `existed: true`
   * means the first attempt landed.
   */
  readonly existed: boolean;
}

export interface AppendInput<T = JsonValue> {
  payload: T;
  /** Defaults to `"event"`. */
  type?: string;
  /** Routes to `murmur2(key) % partitions` when no explicit partition is given. */
  key?: string;
  metadata?: JsonObject;
  /** Idempotency key: appending an id that already exists returns the stored event. */
  id?: string;
  partition?: number;
  timestamp?: Date;
  /**
   * The event this one answers: sets `metadata.causationId` to its id and
   * `metadata.correlationId` to its `correlationId`, or its id when it has
   * none. Keys already in `metadata` win over these, and `correlationId` /
   * `causationId` below win over both.
   */
  causedBy?: LineageSource;
  /** Stored as `metadata.correlationId`: 1-200 characters, no U+0000, no lone surrogate. */
  correlationId?: string;
  /** Stored as `metadata.causationId`, same rule. */
  causationId?: string;
}

/** A stored event, or just the part of one that lineage reads. */
export interface LineageSource {
  readonly id: string;
  readonly metadata?: JsonObject;
}

/**
 * Permission to process one event for one group until `expiresAt`. `leaseId`
 * is the fencing token: every settle and renew must present it.
 */
export interface Lease<T = JsonValue> {
  readonly leaseId: string;
  /** Stable name of the delivery (`stream/group/partition/sequence`), the same across attempts. */
  readonly receipt: string;
  readonly stream: string;
  readonly group: string;
  readonly consumerId: string;
  /** 1 on first delivery, +1 on every claim. */
  readonly attempt: number;
  readonly leasedAt: Date;
  readonly expiresAt: Date;
  readonly event: RheoEvent<T>;
}

export interface StreamInfo {
  name: string;
  partitions: number;
  createdAt: Date;
  /** The stream's retention policy, `null` when it keeps everything. */
  retention: RetentionPolicy | null;
  /**
   * Per partition: the first retained sequence (`highWatermark + 1` when the
   * partition holds no event) and the highest sequence ever appended.
   * Sequences below the low watermark were trimmed and are never reused.
   */
  watermarks: Record<number, { lowWatermark: number; highWatermark: number }>;
}

/**
 * How long a stream keeps events (docs/semantics.md, "Retention"): an event
 * may be trimmed once it is older than `maxAgeMs` (by its timestamp) OR once
 * more than `maxEvents` newer events follow it in its partition, and only
 * when every group has settled it. Give at least one of the two.
 */
export interface Retention {
  maxAgeMs?: number | null;
  maxEvents?: number | null;
}

export interface StreamOptions extends CallOptions {
  partitions?: number;
  /** Trim in the background by age and/or count (see `Retention`). */
  retention?: Retention | null;
}

export interface TrimOptions extends CallOptions {
  /** Trim events with a timestamp before this (from the front of each partition). */
  before?: Date;
  /** Per partition, keep at most this many newest events. */
  keep?: number;
  /** Delete even events some group has not settled; the report says what each group lost. */
  force?: boolean;
}

export interface DeleteOptions extends CallOptions {
  confirm: true;
}

/** Where a group starts: after a sequence (one for all partitions, or per partition), or at a time. */
export interface GroupOptions extends CallOptions {
  startAfter?: number | Record<number, number>;
  startAt?: Date;
  maxAttempts?: number;
  /**
   * Cover only these partitions (default: all of the stream's). Fetch, lag,
   * the frontier, replay, reset and the group's stored state are restricted
   * to them; fetching from another partition is `invalid_partition`.
   */
  partitions?: number[];
}

export interface ReadOptions extends CallOptions {
  partition?: number;
  after?: number;
  limit?: number;
  /**
   * Byte budget (payload plus metadata, as for `fetch`); default
   * `defaults.maxFetchBytes`. A page shorter than `limit` is therefore not
   * the end of the partition: an empty one is.
   */
  maxBytes?: number;
}

export interface QueryOptions extends CallOptions {
  type?: string | string[];
  key?: string;
  /** JSON containment, like PostgreSQL's `@>`: `{ payload: { status: 'paid' } }`. */
  where?: { payload?: JsonValue; metadata?: JsonObject };
  /** Only the events of one flow: shorthand for `where: { metadata: { correlationId } }`. */
  correlationId?: string;
  /** Inclusive lower bound on `timestamp`. */
  from?: Date;
  /** Exclusive upper bound on `timestamp`. */
  to?: Date;
  /** Exclusive lower bound on `sequence`. */
  afterSequence?: number;
  /** Inclusive upper bound on `sequence`. */
  untilSequence?: number;
  partition?: number;
  /** By `(timestamp, partition, sequence)`. Default `'asc'`. */
  order?: 'asc' | 'desc';
  /** Default 100, at most 1000. */
  limit?: number;
  /** `nextCursor` of a previous page of the same query. */
  cursor?: string;
  /**
   * Byte budget of the page (payload plus metadata, as for `fetch`); default
   * `defaults.maxFetchBytes`. A page cut by it still carries a `nextCursor`.
   */
  maxBytes?: number;
}

export interface QueryResult<T = JsonValue> {
  events: RheoEvent<T>[];
  /** `null` when there is no further page. */
  nextCursor: string | null;
}

export interface FetchOptions extends CallOptions {
  limit?: number;
  consumerId?: string;
  leaseMs?: number;
  /** Claim only from these partitions. */
  partitions?: number[];
  /**
   * Byte budget: the claimed events' sizes (payload plus metadata) add up to
   * at most this; the first claimable event is claimed whatever its size.
   * Default `defaults.maxFetchBytes` (16 MiB).
   */
  maxBytes?: number;
}

export interface RenewOptions extends CallOptions {
  leaseMs?: number;
}

export interface NackOptions extends CallOptions {
  delayMs?: number;
}

export type SettleResult = { ok: true } | { ok: false; error: RheoError };

export interface PartitionLag {
  /** First retained sequence of the partition (trimmed ones below it are gone); 1 until a trim. */
  lowWatermark: number;
  frontier: number;
  highWatermark: number;
  lag: number;
  /** Timestamp of the oldest event above the frontier, `null` when fully caught up. */
  oldestUnsettledAt: Date | null;
}

export interface LagReport {
  stream: string;
  group: string;
  lag: number;
  partitions: Record<number, PartitionLag>;
  /** Only for a group consumed by partition ownership: members, owners and the group generation. */
  membership?: GroupMembership;
}

/**
 * What to replay: every settled event from a sequence on, from a time on,
 * the given events, or exactly the events matching a query (its `type`,
 * `key`, `where`, `correlationId`, `from` and `to`, as for `rheo.query`).
 */
export type ReplaySpec = { fromSequence: number } | { from: Date } | { eventIds: string[] } | { query: ReplayQueryOptions };

/** The filters of `QueryOptions` that a replay by query accepts. */
export type ReplayQueryOptions = Pick<QueryOptions, 'type' | 'key' | 'where' | 'correlationId' | 'from' | 'to'>;

export interface ReplayOptions extends CallOptions {
  /** Replay only in these partitions of the group (default: all of the group's). */
  partitions?: number[];
}

export interface LagOptions extends CallOptions {
  /** Report only these partitions of the group (default: all of the group's); `lag` sums those. */
  partitions?: number[];
}

export interface ResetOptions extends CallOptions {
  confirm: true;
  /** Reset only these partitions of the group (default: all of the group's); the others keep their progress. */
  partitions?: number[];
  startAfter?: number | Record<number, number>;
  startAt?: Date;
}

export interface GroupInfo {
  stream: string;
  group: string;
  maxAttempts: number;
  lag: LagReport;
  /** Deliveries currently leased (live or expired-but-unclaimed). */
  inflight: number;
  deadLetters: number;
  /** The same two counts per partition. */
  partitions: Record<number, { inflight: number; deadLetters: number }>;
  /** Only for a group consumed by partition ownership: members, owners and the group generation. */
  membership?: GroupMembership;
}

export interface DeadLetter<T = JsonValue> {
  /** Position in this group's dead-letter list; pass as `after` to page. */
  readonly id: string;
  readonly stream: string;
  readonly group: string;
  readonly attempt: number;
  readonly reason: string | null;
  readonly deadLetteredAt: Date;
  readonly event: RheoEvent<T>;
}

export interface DeadLetterOptions extends CallOptions {
  limit?: number;
  after?: string;
  /** Byte budget of the page's events, as for `read`; default `defaults.maxFetchBytes`. */
  maxBytes?: number;
}

export interface RedriveOptions extends CallOptions {
  eventIds?: string[];
}

/** One settle of a mixed batch (`rheo.settleMany`). */
export type SettleRequest =
  | { kind: 'ack'; lease: Lease<unknown> }
  | { kind: 'nack'; lease: Lease<unknown>; reason?: string | null; delayMs?: number }
  | { kind: 'reject'; lease: Lease<unknown>; reason?: string | null }
  | { kind: 'release'; lease: Lease<unknown> };

// ----- Shared with the backend contract (core/backend-types.ts re-exports them) -----

export interface RetentionPolicy {
  /** Events older than this (by event timestamp) may be trimmed. */
  maxAgeMs: number | null;
  /** At most this many events are kept per partition. */
  maxEvents: number | null;
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
