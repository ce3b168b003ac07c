import type {
  Backend,
  BackendCapabilities,
  FetchRequest,
  GroupMembership,
  LeaseRef,
  MemberView,
  RenewResult,
  SettleOp,
  SettleOutcome,
} from '../core/backend.js';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import type { CommitInput, HeartbeatOptions, OwnershipFenceInput } from '../core/ownership-arguments.js';
import type {
  GroupInfo,
  JsonValue,
  Lease,
  ReadOptions,
  RheoEvent,
  SettleResult,
} from '../core/types.js';

/*
 * The narrow interfaces the runtime (producer, sinks, transforms, consumer)
 * calls the store through. They are declared here, below the runtime, and
 * the facade implements them; nothing in the runtime imports the facade.
 *
 * Arguments are validated once, at the public boundary: a source call takes
 * values the runtime already holds in normalised form (it built them from
 * validated options, or from leases the store handed out) and checks
 * nothing again.
 */

/** The instance defaults (`rheo.defaults`) every runtime part resolves its options against. */
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

/** The runtime's name for `RheoDefaults`. */
export type RuntimeDefaults = RheoDefaults;

/**
 * What competing consumption (the consumer, and the producer of a
 * pipeline) needs: claim, renew and settle per-event
 * leases, and hear of appends. Requests are normalised (`FetchRequest`,
 * `LeaseRef`, `SettleOp`), so no call validates; each is traced and runs
 * under the instance's lifecycle (`closed` once rheo is closed).
 */
export interface LeaseSource {
  readonly defaults: Readonly<RheoDefaults>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly capabilities: Readonly<BackendCapabilities>;
  /** The store, for what only it can give the runtime: its name, and transactions in `transaction: true` mode. */
  readonly backend: Backend;
  claim<T extends JsonValue = JsonValue>(stream: string, group: string, request: FetchRequest): Promise<Lease<T>[]>;
  renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]>;
  settle(ops: SettleOp[]): Promise<SettleOutcome[]>;
  /** Resolves `true` on an append to `stream`, `false` at the timeout or on abort; `false` at once without notifications. */
  waitForAppend(stream: string, timeoutMs: number, signal: AbortSignal): Promise<boolean>;
  /**
   * The store's `fetchAfterAppend` (capability `blockingFetch`), traced as
   * `claim`: the idle wait and the claim after it in one step. `null` at
   * once without the capability, or when the store cannot wait so now.
   */
  claimAfterAppend<T extends JsonValue = JsonValue>(
    stream: string,
    group: string,
    request: FetchRequest,
    timeoutMs: number,
    signal: AbortSignal,
  ): Promise<{ leases: Lease<T>[]; appended: boolean } | null>;
}

/**
 * What partition ownership needs: membership, fenced reads of owned
 * partitions, offset commits, and the store for notifications and
 * transactions.
 */
export interface OwnershipSource {
  readonly backend: Pick<Backend, 'waitForAppend' | 'readOwnedAfterAppend' | 'capabilities' | 'name' | 'beginTransaction'>;
  readonly defaults: { readonly pollMs: number; readonly maxFetchBytes: number };
  heartbeat(stream: string, group: string, options: HeartbeatOptions): Promise<MemberView>;
  leaveGroup(stream: string, group: string, memberId: string): Promise<void>;
  releasePartitions(fences: OwnershipFenceInput[]): Promise<SettleResult[]>;
  readOwned<U extends JsonValue = JsonValue>(fence: OwnershipFenceInput, options?: ReadOptions): Promise<RheoEvent<U>[]>;
  commit(ops: CommitInput[]): Promise<SettleResult[]>;
  groupInfo(stream: string, group: string): Promise<GroupInfo>;
  members(stream: string, group: string): Promise<GroupMembership>;
}
