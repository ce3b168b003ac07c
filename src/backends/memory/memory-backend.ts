import { assertKnownKeys, optionKeys } from '../../core/option-keys.js';
import type {
  Backend,
  BackendCapabilities,
  AppendOutcome,
  CommitOp,
  GroupMembership,
  HeartbeatRequest,
  MemberView,
  OwnershipFence,
  FetchRequest,
  GroupSpec,
  GroupStart,
  GroupStorageStats,
  LeaseRef,
  NormalizedQuery,
  NormalizedReplay,
  PreparedAppend,
  RenewResult,
  RetentionPolicy,
  SettleOp,
  SettleOutcome,
  TrimReport,
  TrimRequest,
} from '../../core/backend.js';
import { systemClock, type Clock } from '../../core/clock.js';
import type { DeadLetter, GroupInfo, LagReport, Lease, QueryResult, RheoEvent, StreamInfo } from '../../core/types.js';
import { MemoryLeases } from './leases.js';
import { MemoryLog } from './log.js';
import { MemoryOwnership } from './ownership.js';
import { MemoryProgress } from './progress.js';
import { MemoryRetention } from './retention.js';
import { MemoryStore } from './store.js';

export interface MemoryBackendOptions {
  /** Lease expiry and event timestamps read this clock. Default: the system clock. */
  clock?: Clock;
}

/**
 * The in-memory backend: the reference implementation of the contract and the
 * zero-setup default. Single-process, not durable. Every operation costs
 * O(log n) or better in the log length; settled state below the frontier is
 * deleted, so a group's memory is bounded by its unsettled window plus its
 * dead letters.
 */
export function memoryBackend(options: MemoryBackendOptions = {}): Backend {
  assertKnownKeys('memoryBackend options', options, optionKeys<MemoryBackendOptions>()('clock'));
  return new MemoryBackend(options.clock ?? systemClock);
}

/**
 * The backend assembled from its concerns over one `MemoryStore`: log.ts
 * (with notifications), leases.ts, progress.ts, ownership.ts and
 * retention.ts, each of which implements its part of the contract.
 */
class MemoryBackend implements Backend {
  readonly name = 'memory';
  readonly capabilities: BackendCapabilities = Object.freeze({
    durable: false,
    distributed: false,
    notifications: true,
    blockingFetch: false,
    transactions: false,
    partitionOwnership: true,
    retention: true,
    cluster: false,
  });
  readonly #store: MemoryStore;
  readonly #log: MemoryLog;
  readonly #leases: MemoryLeases;
  readonly #progress: MemoryProgress;
  readonly #ownership: MemoryOwnership;
  readonly #retention: MemoryRetention;

  constructor(clock: Clock) {
    this.#store = new MemoryStore(clock);
    this.#log = new MemoryLog(this.#store);
    this.#leases = new MemoryLeases(this.#store);
    this.#progress = new MemoryProgress(this.#store);
    this.#ownership = new MemoryOwnership(this.#store);
    this.#retention = new MemoryRetention(this.#store);
  }

  async migrate(): Promise<void> {
    this.#store.assertOpen();
  }

  /** Nothing to reach: a no-op that still refuses once closed, and has no schema. */
  async ping(): Promise<number | null> {
    this.#store.assertOpen();
    return null;
  }

  async close(): Promise<void> {
    this.#store.close();
  }

  // ---- log (log.ts) ------------------------------------------------------

  createStream(name: string, partitions: number, retention: RetentionPolicy | null = null): Promise<void> {
    return this.#log.createStream(name, partitions, retention);
  }

  listStreams(): Promise<StreamInfo[]> {
    return this.#log.listStreams();
  }

  append(stream: string, inputs: PreparedAppend[]): Promise<AppendOutcome[]> {
    return this.#log.append(stream, inputs);
  }

  read(stream: string, partition: number, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    return this.#log.read(stream, partition, after, limit, maxBytes);
  }

  query(stream: string, query: NormalizedQuery): Promise<QueryResult> {
    return this.#log.query(stream, query);
  }

  waitForAppend(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    return this.#log.waitForAppend(stream, timeoutMs, signal);
  }

  // ---- leases (leases.ts) ------------------------------------------------

  createGroup(stream: string, group: string, spec: GroupSpec): Promise<void> {
    return this.#leases.createGroup(stream, group, spec);
  }

  listGroups(stream: string): Promise<string[]> {
    return this.#leases.listGroups(stream);
  }

  fetch(stream: string, group: string, request: FetchRequest): Promise<Lease[]> {
    return this.#leases.fetch(stream, group, request);
  }

  renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    return this.#leases.renew(refs, leaseMs);
  }

  settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    return this.#leases.settle(ops);
  }

  // ---- progress (progress.ts) --------------------------------------------

  lag(stream: string, group: string, only: number[] | null = null): Promise<LagReport> {
    return this.#progress.lag(stream, group, only);
  }

  replay(stream: string, group: string, spec: NormalizedReplay, only: number[] | null): Promise<void> {
    return this.#progress.replay(stream, group, spec, only);
  }

  resetGroup(stream: string, group: string, start: GroupStart, only: number[] | null = null): Promise<void> {
    return this.#progress.resetGroup(stream, group, start, only);
  }

  groupInfo(stream: string, group: string): Promise<GroupInfo> {
    return this.#progress.groupInfo(stream, group);
  }

  deadLetters(stream: string, group: string, limit: number, after: string | null, maxBytes: number): Promise<DeadLetter[]> {
    return this.#progress.deadLetters(stream, group, limit, after, maxBytes);
  }

  redrive(stream: string, group: string, eventIds: string[] | null): Promise<number> {
    return this.#progress.redrive(stream, group, eventIds);
  }

  storageStats(stream: string, group: string): Promise<GroupStorageStats> {
    return this.#progress.storageStats(stream, group);
  }

  // ---- retention (retention.ts) ------------------------------------------

  setRetention(stream: string, retention: RetentionPolicy | null): Promise<void> {
    return this.#retention.setRetention(stream, retention);
  }

  trim(stream: string, request: TrimRequest): Promise<TrimReport> {
    return this.#retention.trim(stream, request);
  }

  deleteGroup(stream: string, group: string): Promise<void> {
    return this.#retention.deleteGroup(stream, group);
  }

  deleteStream(stream: string): Promise<void> {
    return this.#retention.deleteStream(stream);
  }

  // ---- partition ownership (ownership.ts; src/core/membership.ts) --------

  heartbeat(stream: string, group: string, request: HeartbeatRequest): Promise<MemberView> {
    return this.#ownership.heartbeat(stream, group, request);
  }

  leaveGroup(stream: string, group: string, memberId: string): Promise<void> {
    return this.#ownership.leaveGroup(stream, group, memberId);
  }

  releasePartitions(fences: OwnershipFence[]): Promise<SettleOutcome[]> {
    return this.#ownership.releasePartitions(fences);
  }

  readOwned(fence: OwnershipFence, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    return this.#ownership.readOwned(fence, after, limit, maxBytes);
  }

  commit(ops: CommitOp[]): Promise<SettleOutcome[]> {
    return this.#ownership.commit(ops);
  }

  members(stream: string, group: string): Promise<GroupMembership> {
    return this.#ownership.members(stream, group);
  }
}
