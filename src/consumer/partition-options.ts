import { assertKnownKeys, optionKeys } from '../core/option-keys.js';
import type { TransactionClient } from '../core/backend.js';
import { invalidArgument } from '../core/errors.js';
import type { JsonValue, RheoEvent } from '../core/types.js';
import { assertName, assertPlainObject, assertString, describe, optionalInteger } from '../core/validation.js';
import { resolveMaxPollMs } from '../runtime/append-wait.js';
import type { BackoffOptions } from '../runtime/backoff.js';
import type { Timers } from '../runtime/timers.js';
import type { HandlerOutcome } from './consumer-types.js';

const MAX_MS = 7 * 24 * 3600_000;

/** What a partition handler gets besides the event. */
export interface PartitionHandlerContext {
  /** 1 on the first run of this event by this member; grows with every retry. A new owner starts again at 1. */
  readonly attempt: number;
  readonly partition: number;
  /** The generation under which the member owns the partition. */
  readonly generation: number;
  readonly memberId: string;
  /**
   * Aborted when the handler times out, when the partition is lost or its
   * revocation stops waiting, and when `stop()` gives up waiting.
   */
  readonly signal: AbortSignal;
  /**
   * Only with `transaction: true`: the client of the transaction this call
   * runs in. Write with it; an ack (or reject) commits the partition's
   * offset in the same transaction.
   */
  readonly client?: TransactionClient;
}

export type PartitionHandler<T = JsonValue> = (
  event: RheoEvent<T>,
  context: PartitionHandlerContext,
) => HandlerOutcome | Promise<HandlerOutcome>;

/**
 * `rheo.consume({ assignment: 'partitions', ... })`: Kafka-style ownership.
 * The member owns a share of the partitions, reads each in sequence order
 * and commits progress once per batch.
 */
export interface PartitionConsumeOptions<T = JsonValue> {
  stream: string;
  group: string;
  assignment: 'partitions';
  handler: PartitionHandler<T>;
  /**
   * Order inside an owned partition. `'partition'` (default): one event at
   * a time, in sequence order. `'key'`: events of different keys run in
   * parallel (up to `concurrency`), one at a time per key in sequence order;
   * events without a key are unordered.
   */
  orderBy?: 'partition' | 'key';
  /**
   * Handlers running at once across all owned partitions (with `orderBy:
   * 'partition'` at most one per partition). Default 10.
   */
  concurrency?: number;
  /** Events read (and committed) per batch. Default 100. */
  batchSize?: number;
  /**
   * What a failing event (thrown, `{ retry }`, timed out) does to its
   * partition. `'dead-letter'` (default): retry with backoff up to
   * `maxAttempts` runs, then dead-letter it and go on. `'block'`: retry with
   * backoff forever; the partition waits (order is never broken).
   */
  onFailure?: 'dead-letter' | 'block';
  /** Runs before dead-lettering. Default: the group's `maxAttempts`. */
  maxAttempts?: number;
  /** Backoff between runs of a failing event (`{ retry, delayMs }` overrides it). Default `{ initialMs: 100, maxMs: 30_000 }`. */
  retryBackoff?: Partial<BackoffOptions>;
  /** Unique per process. Default `member-<random>`. */
  memberId?: string;
  /** The member's partitions move elsewhere this long after its last heartbeat. Default 10 000. */
  sessionMs?: number;
  /** Heartbeat period. Default a third of `sessionMs`. */
  heartbeatMs?: number;
  /**
   * How long a revoked partition waits for its owner's release before the
   * new owner may take it anyway (fenced). The owner waits half of it for
   * running handlers before aborting them. Default 30 000.
   */
  rebalanceTimeoutMs?: number;
  /** Wait after reading nothing (cut short by backend notifications). Default `rheo.defaults.pollMs`. */
  pollMs?: number;
  /**
   * While the store's notifications announce appends, each further empty
   * read of a partition doubles its wait from `pollMs` up to this; a
   * notification or a read that finds events starts it at `pollMs` again,
   * and so does a read that finds events no notification announced (then
   * the wait stays at `pollMs` until one arrives). Default `5 × pollMs`;
   * `pollMs` turns the backoff off.
   */
  maxPollMs?: number;
  /** Abort a handler's signal and count a failure after this long. Default: none. */
  handlerTimeoutMs?: number;
  signal?: AbortSignal;
  /** How long `stop()` waits for running handlers before aborting them. Default 30 000. */
  stopTimeoutMs?: number;
  /** Timer source (tests). Default real timers. */
  timers?: Timers;
  /**
   * Exactly-once effects (backends with the `transactions` capability,
   * PostgreSQL): every handler call runs in its own transaction on a pooled
   * connection and gets its `client` in the context; an ack (or reject)
   * commits the partition's offset up to the event in that transaction,
   * fenced by the partition's generation, so the writes and the progress
   * commit together or not at all, and a stale owner's writes roll back.
   * A throw, a `retry`, a timeout or a lost partition rolls them back and
   * `onFailure` applies. Only with `orderBy: 'partition'` (the offset is a
   * contiguous frontier: a transaction can only commit it once every
   * earlier event is done). Default `false`. `unsupported` on other backends.
   */
  transaction?: boolean;
}

/** What the partition consumer calls: the facade's ownership calls, never a concrete backend. */
/** What partition ownership needs from rheo (runtime/sources.ts). */
export type { OwnershipSource as PartitionSource } from '../runtime/sources.js';

export interface ResolvedPartitionOptions<T> {
  stream: string;
  group: string;
  handler: PartitionHandler<T>;
  byKey: boolean;
  concurrency: number;
  batchSize: number;
  onFailure: 'dead-letter' | 'block';
  maxAttempts: number | null;
  retryBackoff: BackoffOptions;
  memberId: string;
  sessionMs: number;
  heartbeatMs: number;
  rebalanceTimeoutMs: number;
  pollMs: number;
  maxPollMs: number;
  handlerTimeoutMs: number | null;
  signal: AbortSignal | undefined;
  stopTimeoutMs: number;
  timers: Timers | undefined;
  transaction: boolean;
}

const PARTITION_OPTION_KEYS = optionKeys<PartitionConsumeOptions>()(
  'stream',
  'group',
  'assignment',
  'handler',
  'orderBy',
  'concurrency',
  'batchSize',
  'onFailure',
  'maxAttempts',
  'retryBackoff',
  'memberId',
  'sessionMs',
  'heartbeatMs',
  'rebalanceTimeoutMs',
  'pollMs',
  'maxPollMs',
  'handlerTimeoutMs',
  'signal',
  'stopTimeoutMs',
  'timers',
  'transaction',
);

export function resolvePartitionOptions<T>(
  options: PartitionConsumeOptions<T>,
  defaults: { pollMs: number },
  randomId: () => string,
): ResolvedPartitionOptions<T> {
  assertPlainObject('consume options', options);
  assertKnownKeys("consume({ assignment: 'partitions' }) options", options, PARTITION_OPTION_KEYS);
  assertName('stream', options.stream);
  assertName('group', options.group);
  if (typeof options.handler !== 'function') {
    throw invalidArgument(`consume handler must be a function (event, { attempt, partition, signal }) => outcome, got ${describe(options.handler)}`);
  }
  const orderBy = options.orderBy ?? 'partition';
  if (orderBy !== 'partition' && orderBy !== 'key') {
    throw invalidArgument(`with assignment 'partitions', orderBy must be 'partition' or 'key', got ${describe(orderBy)}`);
  }
  const onFailure = options.onFailure ?? 'dead-letter';
  if (onFailure !== 'dead-letter' && onFailure !== 'block') {
    throw invalidArgument(`onFailure must be 'dead-letter' or 'block', got ${describe(onFailure)}`);
  }
  if (options.transaction !== undefined && typeof options.transaction !== 'boolean') {
    throw invalidArgument(`transaction must be true or false, got ${describe(options.transaction)}`);
  }
  if (options.transaction === true && orderBy === 'key') {
    throw invalidArgument(
      "transaction: true needs orderBy: 'partition': the offset committed in a handler's transaction covers every earlier event of the partition, which with orderBy: 'key' may still be running",
    );
  }
  let memberId = `member-${randomId()}`;
  if (options.memberId !== undefined) {
    assertString('memberId', options.memberId);
    memberId = options.memberId;
  }
  const sessionMs = optionalInteger('sessionMs', options.sessionMs, 10_000, { min: 3, max: MAX_MS });
  const heartbeatMs = optionalInteger('heartbeatMs', options.heartbeatMs, Math.max(1, Math.floor(sessionMs / 3)), { min: 1, max: sessionMs - 1 });
  const backoff = options.retryBackoff ?? {};
  assertPlainObject('retryBackoff', backoff);
  const initialMs = optionalInteger('retryBackoff.initialMs', backoff.initialMs, 100, { min: 1, max: 3600_000 });
  const maxMs = optionalInteger('retryBackoff.maxMs', backoff.maxMs, Math.max(30_000, initialMs), { min: initialMs, max: 3600_000 });
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw invalidArgument(`signal must be an AbortSignal, got ${describe(options.signal)}`);
  }
  if (options.timers !== undefined && (options.timers === null || typeof options.timers.schedule !== 'function')) {
    throw invalidArgument(`timers must be an object with schedule(ms, callback), got ${describe(options.timers)}`);
  }
  const pollMs = optionalInteger('pollMs', options.pollMs, defaults.pollMs, { min: 1, max: 3600_000 });
  return {
    stream: options.stream,
    group: options.group,
    handler: options.handler,
    byKey: orderBy === 'key',
    concurrency: optionalInteger('concurrency', options.concurrency, 10, { min: 1, max: 10_000 }),
    batchSize: optionalInteger('batchSize', options.batchSize, 100, { min: 1, max: 10_000 }),
    onFailure,
    maxAttempts: options.maxAttempts === undefined ? null : optionalInteger('maxAttempts', options.maxAttempts, 1, { min: 1, max: 1_000_000 }),
    retryBackoff: { initialMs, maxMs },
    memberId,
    sessionMs,
    heartbeatMs,
    rebalanceTimeoutMs: optionalInteger('rebalanceTimeoutMs', options.rebalanceTimeoutMs, 30_000, { min: 0, max: MAX_MS }),
    pollMs,
    maxPollMs: resolveMaxPollMs(options.maxPollMs, pollMs),
    handlerTimeoutMs: options.handlerTimeoutMs === undefined ? null : optionalInteger('handlerTimeoutMs', options.handlerTimeoutMs, 1, { min: 1, max: MAX_MS }),
    signal: options.signal,
    stopTimeoutMs: optionalInteger('stopTimeoutMs', options.stopTimeoutMs, 30_000, { max: MAX_MS }),
    timers: options.timers,
    transaction: options.transaction === true,
  };
}
