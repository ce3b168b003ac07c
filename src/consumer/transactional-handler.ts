import type { Backend, CommitOp, SettleOp, TransactionClient } from '../core/backend.js';
import { RheoError, isRheoError } from '../core/errors.js';
import { settleOp } from '../core/arguments.js';
import type { JsonValue, Lease, RheoEvent } from '../core/types.js';
import { parseOutcome } from '../runtime/lease-outcome.js';
import type { ConsumerHandler, HandlerContext, HandlerOutcome } from './consumer-types.js';
import type { PartitionHandler, PartitionHandlerContext } from './partition-options.js';

/** What happened to a lease whose handler ran in a transaction, once the handler's promise settled. */
export type TransactionalSettlement =
  /** The settle and the handler's writes committed together. */
  | { kind: 'committed'; settle: 'ack' | 'reject'; reason: string | null }
  /** The settle in the transaction failed or the commit did: the writes did not commit (or, if `ambiguous`, may have, together with the settle). */
  | { kind: 'uncommitted'; error: RheoError };

/**
 * The outcome a transactional handler resolves to once rheo has already
 * settled in its transaction; the consumer's reading (`CONSUMER_READING`,
 * handler-run.ts) passes it through instead of reading it as a handler's return value.
 */
export class SettledInTransaction {
  readonly settlement: TransactionalSettlement;

  constructor(settlement: TransactionalSettlement) {
    this.settlement = settlement;
  }
}

/** A handler's context with the transaction's client. */
class TransactionContext<T> implements HandlerContext<T> {
  readonly lease: Lease<T>;
  readonly attempt: number;
  readonly client: TransactionClient;
  readonly #outer: HandlerContext<T>;

  constructor(outer: HandlerContext<T>, client: TransactionClient) {
    this.lease = outer.lease;
    this.attempt = outer.attempt;
    this.client = client;
    this.#outer = outer;
  }

  get signal(): AbortSignal {
    return this.#outer.signal;
  }
}

/**
 * `consume({ transaction: true })`: runs `handler` inside a transaction on a
 * connection of the backend's pool and hands it the client. When the handler
 * acks (returns nothing or `'ack'`) or rejects, the settle joins that
 * transaction and commits with the handler's writes: both or neither. A
 * throw, a `retry`, an invalid outcome, or a run cut short (timeout, lease
 * lost, drain) rolls the writes back, and the consumer then nacks outside
 * the transaction as usual.
 *
 * The transaction ends only when the handler's own promise settles, even
 * after a timeout: the client stays the handler's until then, and handing
 * it back to the pool earlier would let the handler's later statements run
 * outside any transaction on someone else's connection.
 */
export function transactionalHandler<T extends JsonValue>(backend: Backend, handler: ConsumerHandler<T>): ConsumerHandler<T> {
  const begin = backend.beginTransaction?.bind(backend);
  if (!begin) throw new RheoError('unsupported', `the ${backend.name} backend has no beginTransaction()`);
  return async (event: RheoEvent<T>, context: HandlerContext<T>): Promise<HandlerOutcome> => {
    const tx = await begin();
    let outcome: HandlerOutcome;
    try {
      outcome = await handler(event, new TransactionContext(context, tx.client));
    } catch (error) {
      await tx.rollback();
      throw error;
    }
    const op = settleOpOf(context.lease, outcome);
    // Cut short meanwhile: the consumer has already settled (or given up) the lease outside.
    if (op === null || context.signal.aborted) {
      await tx.rollback();
      return outcome;
    }
    return commitWith(tx, () => tx.scope.settle([op]), 'settle', {
      kind: 'committed',
      settle: op.kind === 'reject' ? 'reject' : 'ack',
      reason: op.kind === 'reject' ? op.reason : null,
    });
  };
}

/** The settle to commit with the writes (read as the consumer reads outcomes), or `null` when the outcome rolls them back. */
function settleOpOf(lease: Lease<unknown>, outcome: unknown): SettleOp | null {
  const parsed = parseOutcome(outcome);
  if (parsed.kind === 'ack') return settleOp({ kind: 'ack', lease }, 'ack');
  if (parsed.kind === 'reject') return settleOp({ kind: 'reject', lease, reason: parsed.reason }, 'reject');
  return null;
}

/**
 * The end of a transactional handler call whose outcome commits: `step`
 * (the settle or offset commit) runs in the transaction, then COMMIT. A
 * step that throws or is refused rolls the writes back; either way the
 * answer is what the consumer reads as the lease's settlement.
 */
async function commitWith(
  tx: { rollback(): Promise<void>; commit(): Promise<void> },
  step: () => Promise<{ ok: boolean; error?: RheoError }[]>,
  what: 'settle' | 'commit',
  committed: TransactionalSettlement & { kind: 'committed' },
  committedBefore: (error: RheoError) => boolean = () => false,
): Promise<HandlerOutcome> {
  let answer;
  try {
    [answer] = await step();
  } catch (error) {
    await tx.rollback();
    return uncommitted(error);
  }
  if (!answer?.ok) {
    await tx.rollback();
    // This run's writes rolled back; an earlier run's committed with the same step.
    if (answer?.error && committedBefore(answer.error)) return new SettledInTransaction(committed) as unknown as HandlerOutcome;
    return uncommitted(answer?.error ?? new RheoError('internal', `${what} returned no result`));
  }
  try {
    await tx.commit();
  } catch (error) {
    return uncommitted(error);
  }
  return new SettledInTransaction(committed) as unknown as HandlerOutcome;
}

function uncommitted(error: unknown): HandlerOutcome {
  const rheoError = isRheoError(error)
    ? error
    : new RheoError('internal', `transaction failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
  return new SettledInTransaction({ kind: 'uncommitted', error: rheoError }) as unknown as HandlerOutcome;
}

/** Where a partition handler's offset commit goes: the fence without the partition's generation and member, which the context gives. */
export interface PartitionCommitTarget {
  stream: string;
  group: string;
}

/**
 * `consume({ assignment: 'partitions', transaction: true })`: as
 * `transactionalHandler`, but an ack or reject commits the partition's
 * offset up to the event (with its dead letter, for a reject) in the
 * handler's transaction instead of settling a lease. The commit is fenced
 * by the partition's generation and holds the owner row until COMMIT, so
 * a stale owner's writes roll back instead of committing (its answer is
 * `stale_generation`). The unit is one handler call: partition order runs
 * one event at a time, so each commit covers exactly the events before it.
 * After an `ambiguous` COMMIT the worker runs the event again; that run's
 * commit is `once`, so if the first run did commit, the second rolls back
 * and reports the event committed instead of writing its effect twice.
 */
export function partitionTransactionalHandler<T extends JsonValue>(
  backend: Pick<Backend, 'name' | 'beginTransaction'>,
  target: PartitionCommitTarget,
  handler: PartitionHandler<T>,
): PartitionHandler<T> {
  const begin = backend.beginTransaction?.bind(backend);
  if (!begin) throw new RheoError('unsupported', `the ${backend.name} backend has no beginTransaction()`);
  return async (event: RheoEvent<T>, context: PartitionHandlerContext): Promise<HandlerOutcome> => {
    let tx;
    try {
      tx = await begin();
    } catch (error) {
      return uncommitted(error);
    }
    let outcome: HandlerOutcome;
    try {
      outcome = await handler(event, { ...contextFields(context), client: tx.client });
    } catch (error) {
      await tx.rollback();
      throw error;
    }
    const parsed = parseOutcome(outcome);
    if ((parsed.kind !== 'ack' && parsed.kind !== 'reject') || context.signal.aborted) {
      await tx.rollback();
      return outcome;
    }
    const commitOffset = tx.scope.commit?.bind(tx.scope);
    if (!commitOffset) {
      await tx.rollback();
      return uncommitted(new RheoError('unsupported', `the ${backend.name} backend cannot commit a partition offset in a transaction`));
    }
    const op: CommitOp = {
      stream: target.stream,
      group: target.group,
      partition: context.partition,
      memberId: context.memberId,
      generation: context.generation,
      upTo: event.sequence,
      deadLetters: parsed.kind === 'reject' ? [{ sequence: event.sequence, attempt: context.attempt, reason: parsed.reason }] : [],
      // A run after an ambiguous COMMIT (the worker runs the event again)
      // must not commit a second effect when the first run did commit:
      // the offset is then already at the event, and this run rolls back.
      once: true,
    };
    return commitWith(
      tx,
      () => commitOffset([op]),
      'commit',
      { kind: 'committed', settle: parsed.kind, reason: parsed.kind === 'reject' ? parsed.reason : null },
      (error) => isRheoError(error, 'already_exists'),
    );
  };
}

/** The context's fields as a plain object (the signal read live is the same object). */
function contextFields(context: PartitionHandlerContext): PartitionHandlerContext {
  return {
    attempt: context.attempt,
    partition: context.partition,
    generation: context.generation,
    memberId: context.memberId,
    signal: context.signal,
  };
}
