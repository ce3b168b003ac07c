import type { TransactionClient } from '../core/backend.js';
import type { JsonValue, Lease, RheoEvent } from '../core/types.js';
import type { BackoffOptions } from '../runtime/backoff.js';
import type { Timers } from '../runtime/timers.js';

/** What a handler gets besides the event. */
export interface HandlerContext<T = JsonValue> {
  /** The lease being processed; settle it only through the handler's return value. */
  readonly lease: Lease<T>;
  /** 1 on first delivery; greater means this is a redelivery (keep handlers idempotent on `event.id`). */
  readonly attempt: number;
  /**
   * Aborted when the handler times out (`handlerTimeoutMs`), when the lease is
   * lost (renewal came back stale: someone else may hold it now) and when a
   * drain gives up waiting. Pass it to anything cancellable.
   */
  readonly signal: AbortSignal;
  /**
   * Only with `consume({ transaction: true })`: the client of the
   * transaction this handler runs in (on PostgreSQL a `pg.PoolClient`).
   * Write through it, and the writes commit together with the ack (or the
   * reject), or roll back on a throw or `retry`. Do not commit, roll back or
   * release it.
   */
  readonly client?: TransactionClient;
}

/** Retry later: the lease is nacked with `retry` as reason, visible again after `delayMs` (default 0). */
export interface RetryOutcome {
  retry: string;
  delayMs?: number;
}

/** Dead-letter now, with `reject` as reason. */
export interface RejectOutcome {
  reject: string;
}

/**
 * What a handler returns. Nothing or `'ack'` acks; `{ retry }` nacks (and
 * dead-letters at the group's `maxAttempts`); `{ reject }` dead-letters. A
 * throw nacks with the error's message; any other value nacks with a reason
 * that says the return value was invalid.
 */
// `void` so that a handler with no return statement type-checks.
export type HandlerOutcome = void | undefined | 'ack' | RetryOutcome | RejectOutcome;

export type ConsumerHandler<T = JsonValue> = (
  event: RheoEvent<T>,
  context: HandlerContext<T>,
) => HandlerOutcome | Promise<HandlerOutcome>;

/**
 * At most one handler in flight per ordering key: `'key'` (the event key;
 * events without a key are not ordered), `'partition'`, or a function of the
 * lease. Leases of one key start in the order they were fetched (sequence
 * order within a partition); a retried lease comes back later, behind the
 * ones that followed it.
 */
export type OrderBy<T = JsonValue> = 'key' | 'partition' | ((lease: Lease<T>) => string);

export interface ConsumeOptions<T = JsonValue> {
  stream: string;
  group: string;
  /**
   * `'leases'` (default): competing consumers, per-event leases. For
   * partition ownership pass `'partitions'` (see `PartitionConsumeOptions`).
   */
  assignment?: 'leases';
  handler: ConsumerHandler<T>;
  /** Handlers running at once. Default 1. */
  concurrency?: number;
  /**
   * Unsettled leases held at once (running, waiting to start, buffered).
   * Default `max(10, concurrency)`; must be at least `concurrency`. Every held
   * lease is a running clock, so keep it near `concurrency`.
   */
  maxDemand?: number;
  /** Lease length per claim and renewal. Default: `rheo.defaults.leaseMs`. */
  leaseMs?: number;
  /** Wait after an empty fetch (cut short by backend notifications). Default: `rheo.defaults.pollMs`. */
  pollMs?: number;
  /**
   * While the store's notifications announce what becomes claimable, each
   * further empty fetch doubles the wait from `pollMs` up to this (an idle
   * consumer's polls are most of what it costs). A notification or a fetch
   * that finds work starts it at `pollMs` again, and so does anything a poll
   * finds unannounced (then the wait stays at `pollMs` until a notification
   * arrives), while the consumer's own delayed retries bound it. Without
   * notifications every wait is `pollMs`. Default `5 × pollMs`; `pollMs`
   * turns the backoff off.
   */
  maxPollMs?: number;
  /** Recorded on every lease. Default: `consumer-<random>`. */
  consumerId?: string;
  /** Consume only these partitions. */
  partitions?: number[];
  /**
   * Abort the handler's signal and nack with a timeout reason after this long.
   * Default: no timeout. JavaScript cannot kill a function: a handler that
   * ignores its signal keeps running after its lease was nacked (it shows in
   * `stats().inflight`), while its concurrency slot goes to the next lease.
   */
  handlerTimeoutMs?: number;
  /** Per-key ordering; default: none (any lease may run next to any other). */
  orderBy?: OrderBy<T>;
  /** Aborting it stops the consumer, as `stop()` does (with `stopTimeoutMs`). */
  signal?: AbortSignal;
  /** How long a drain triggered by `signal` waits for running handlers. Default 30 000. */
  stopTimeoutMs?: number;
  /** Timer source for renewal, polling, backoff, handler timeouts and drains. Default: real timers. For tests. */
  timers?: Timers;
  /**
   * Fetch again only once this many leases can be taken (fewer, larger
   * claims), as the producer's `minDemand`. Default: a quarter of
   * `maxDemand`, at least 1; at most `maxDemand`.
   */
  minDemand?: number;
  /** Backoff after a failed fetch, as the producer's. Default `{ initialMs: min(pollMs, 100), maxMs: 30_000 }`. */
  fetchBackoff?: Partial<BackoffOptions>;
  /**
   * Exactly-once effects (backends with the `transactions` capability,
   * PostgreSQL): every handler call runs in its own transaction on a pooled
   * connection and gets its `client` in the context; an ack (or reject)
   * commits in that transaction with the handler's writes, while a throw,
   * a `retry`, a timeout or a lost lease rolls them back (the lease is then
   * nacked outside the transaction). Default `false`. `unsupported` on other backends.
   */
  transaction?: boolean;
}

export interface StopOptions {
  /** How long to wait for running handlers before aborting them. Default: the consumer's `stopTimeoutMs`. */
  timeoutMs?: number;
}

/** Counters since the consumer started; a snapshot, not live. */
export interface ConsumerStats {
  /** Handlers running right now. */
  inflight: number;
  /** Unsettled leases held (running, waiting, buffered). */
  held: number;
  /** Handlers that finished (any outcome, timeouts included). */
  handled: number;
  acked: number;
  /** Nacked for a retry (handler asked, threw, timed out or returned something invalid). */
  retried: number;
  /** Rejected by the handler. */
  deadLettered: number;
  /** Leases lost while held (renewal or settle answered `stale_lease`). */
  lost: number;
  /** Settles that failed. */
  settleErrors: number;
  /** Fetches that failed. */
  fetchErrors: number;
  /** The fetch backoff now in force after consecutive fetch errors; 0 when fetching normally. */
  backoffMs: number;
  /** `'running'`, `'stopping'` or `'stopped'`. */
  state: ConsumerState;
}

export type ConsumerState = 'running' | 'stopping' | 'stopped';
