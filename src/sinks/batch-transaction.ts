import type { Backend, OwnedTransaction, SettleOp, SettleOutcome } from '../core/backend.js';
import { settleOp } from '../core/arguments.js';
import { requireCapability } from '../core/capabilities.js';
import { RheoError, invalidArgument, isRheoError } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import type { Settlement } from '../runtime/lease-outcome.js';

/*
 * The `transaction: true` path of the batch sink (batch-sink.ts): where a
 * batch's transaction comes from, and how its settles join it. It runs once
 * per batch, after the handler, and only for transactional sinks.
 */

/** What the transactional path needs of its sink. */
export interface TransactionalSink {
  /** Aborted when the sink is destroyed: the transaction rolls back and the leases are released. */
  readonly signal: AbortSignal;
  /** Confirms the leases the transaction is done with. */
  readonly producer: { confirm?(leaseId: string): unknown };
  /** The sink, which reports `lease-lost` and `settle-error`. */
  readonly events: { emit(event: string, ...args: unknown[]): boolean };
}

/**
 * Settles the batch in its transaction and commits it with the handler's
 * writes, or rolls both back. Returns what is left to settle outside the
 * transaction: `null` for a lease already done with (committed, lost, or
 * left to expire after a failed commit).
 */
export async function settleInTransaction<T extends JsonValue>(
  sink: TransactionalSink,
  tx: OwnedTransaction,
  leases: Lease<T>[],
  settlements: Settlement[],
): Promise<Array<Settlement | null>> {
  if (sink.signal.aborted) {
    await tx.rollback();
    return leases.map(() => RELEASE);
  }
  const ops: SettleOp[] = [];
  try {
    for (const [i, settlement] of settlements.entries()) {
      const lease = leases[i]!;
      if (settlement.kind === 'ack') ops.push(settleOp({ kind: 'ack', lease }, 'ack'));
      else if (settlement.kind === 'reject') ops.push(settleOp({ kind: 'reject', lease, reason: settlement.reason }, 'reject'));
    }
  } catch (error) {
    // settleOp refuses a malformed lease (one that did not come from a
    // fetch): the transaction must still end, or its connection stays held.
    await tx.rollback();
    return leases.map(() => rolledBack(`its settle failed: ${messageOf(error)}`));
  }
  if (ops.length < leases.length) {
    // A retry (or an invalid outcome) in the batch: nothing of it commits.
    await tx.rollback();
    return settlements.map((s) => (s.kind === 'nack' || s.kind === 'release' ? s : rolledBack('another lease of the batch was retried')));
  }
  let answers: SettleOutcome[];
  try {
    answers = await tx.scope.settle(ops);
  } catch (error) {
    await tx.rollback();
    return leases.map(() => rolledBack(`its settle failed: ${messageOf(error)}`));
  }
  const refused = answers.find((answer) => !answer.ok);
  if (refused || answers.length !== leases.length) {
    // A refused settle has already aborted the transaction (PostgreSQL refuses its COMMIT): roll back, as the consumer does.
    await tx.rollback();
    const why = refused && !refused.ok ? refused.error.message : 'the settle returned no result';
    return leases.map((lease, i) => {
      const answer = answers[i];
      if (answer && !answer.ok && answer.error.code === 'stale_lease') {
        sink.producer.confirm?.(lease.leaseId);
        sink.events.emit('lease-lost', { lease, error: answer.error });
        return null;
      }
      return rolledBack(why);
    });
  }
  try {
    await tx.commit();
  } catch (failure) {
    // `ambiguous` may have committed the writes with the settles: nothing more is sent, the leases expire if it did not.
    const error = isRheoError(failure) ? failure : new RheoError('internal', `commit failed: ${messageOf(failure)}`, { cause: failure });
    leases.forEach((lease, i) => {
      sink.producer.confirm?.(lease.leaseId);
      sink.events.emit('settle-error', { lease, op: settlements[i]!.kind, error });
    });
    return leases.map(() => null);
  }
  for (const lease of leases) sink.producer.confirm?.(lease.leaseId);
  return leases.map(() => null);
}

const RELEASE: Settlement = Object.freeze({ kind: 'release' });

function rolledBack(why: string): Settlement {
  return { kind: 'nack', reason: `rolled back with its batch: ${why}`, delayMs: 0 };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** `transaction: true`: the backend's `beginTransaction`, checked at construction. */
export function transactionOf(
  producer: { readonly backend?: Backend; readonly confirm?: unknown },
  transaction: unknown,
): (() => Promise<OwnedTransaction>) | null {
  if (transaction === undefined || transaction === false) return null;
  if (transaction !== true) throw invalidArgument(`createBatchSink: transaction must be a boolean, got ${typeof transaction}`);
  const backend = producer.backend;
  if (!backend || typeof producer.confirm !== 'function') {
    throw invalidArgument('createBatchSink({ transaction: true }) needs a RheoProducer (rheo.producer(...)): it settles through its backend');
  }
  requireCapability(backend, 'transactions', 'createBatchSink({ transaction: true })');
  const begin = backend.beginTransaction?.bind(backend);
  if (!begin) throw new RheoError('unsupported', `the ${backend.name} backend has no beginTransaction()`);
  return begin;
}
