import type { Clock } from './clock.js';
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
 */
export interface Backend {
  readonly name: string;
  readonly capabilities: BackendCapabilities;

  /** Idempotent; safe when several processes race. Memory: no-op. */
  migrate(): Promise<void>;
  /** Idempotent. Ends only what the backend itself created. */
  close(): Promise<void>;

  /** `already_exists` when the name is taken. */
  createStream(name: string, partitions: number): Promise<void>;
  listStreams(): Promise<StreamInfo[]>;
  /** `stream_not_found`, `already_exists`, `invalid_partition` (a start map naming a missing partition). */
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
   */
  fetch(stream: string, group: string, request: FetchRequest): Promise<Lease[]>;
  /** One result per ref, in order. Fenced: `stale_lease` unless leased under that exact id. */
  renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]>;
  /** One result per op, in order; a failed op changes nothing. */
  settle(ops: SettleOp[]): Promise<SettleOutcome[]>;

  lag(stream: string, group: string): Promise<LagReport>;
  /** Reopens deliveries (never copies events). `partitions: null` means all. */
  replay(stream: string, group: string, spec: NormalizedReplay, partitions: number[] | null): Promise<void>;
  /** Drops all delivery state and dead letters; the frontier restarts at `start`. */
  resetGroup(stream: string, group: string, start: GroupStart): Promise<void>;
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
  /** Calls can join a transaction the application owns (outbox append, settle with the app's writes). None does yet. */
  readonly transactions: boolean;
  /** Partition-ownership consumption (members, assignments, generations; DESIGN.md §7). None does yet. */
  readonly partitionOwnership: boolean;
  /** Runs across a sharded cluster of the store (e.g. Redis Cluster slots). None does yet. */
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
  | { kind: 'eventIds'; eventIds: string[] };

export interface GroupStorageStats {
  /** Rows/entries of per-delivery state (leased, pending, delayed). */
  deliveries: number;
  deadLetters: number;
}

export function receiptOf(stream: string, group: string, partition: number, sequence: number): string {
  return `${stream}/${group}/${partition}/${sequence}`;
}
