import { parseOutcome } from '../runtime/lease-outcome.js';
import type { HandlerErrorKind } from '../observability/lease-events.js';
import { SettledInTransaction, type TransactionalSettlement } from './transactional-handler.js';

/** How the consumer settles a lease once its handler is done. */
export type Settlement =
  | { kind: 'ack' }
  | { kind: 'nack'; reason: string; delayMs: number; failure: HandlerFailure | null }
  | { kind: 'reject'; reason: string }
  /** `consume({ transaction: true })`: already settled (or not) in the handler's transaction. */
  | TransactionalSettlement;

/** Why a nack was not the handler's own choice. */
export interface HandlerFailure {
  kind: HandlerErrorKind;
  error: unknown;
}

/**
 * Maps a handler's return value to a settlement, by the sinks' strict reading
 * (`parseOutcome`); an invalid value nacks and is reported as a handler error.
 */
export function settlementOf(value: unknown): Settlement {
  if (value instanceof SettledInTransaction) return value.settlement;
  const parsed = parseOutcome(value);
  if (parsed.kind === 'nack') return { ...parsed, failure: null };
  if (parsed.kind !== 'invalid') return parsed;
  const error = Object.assign(new TypeError(parsed.problem), { value });
  return {
    kind: 'nack',
    reason: `invalid handler outcome: ${parsed.problem}`,
    delayMs: 0,
    failure: { kind: 'invalid-outcome', error },
  };
}

/** The settlement after a handler threw: nack with the error as reason. */
export function thrownSettlement(error: unknown): Settlement {
  const message = error instanceof Error ? error.message || error.name : String(error);
  return { kind: 'nack', reason: `handler threw: ${message}`, delayMs: 0, failure: { kind: 'threw', error } };
}

/** The settlement after `handlerTimeoutMs`. */
export function timeoutSettlement(timeoutMs: number): Settlement {
  const error = new Error(`handler timed out after ${timeoutMs} ms`);
  error.name = 'TimeoutError';
  return { kind: 'nack', reason: error.message, delayMs: 0, failure: { kind: 'timeout', error } };
}
