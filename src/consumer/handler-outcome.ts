import { describe } from '../core/validation.js';
import type { HandlerErrorKind } from '../observability/lease-events.js';

/** How the consumer settles a lease once its handler is done. */
export type Settlement =
  | { kind: 'ack' }
  | { kind: 'nack'; reason: string; delayMs: number; failure: HandlerFailure | null }
  | { kind: 'reject'; reason: string };

/** Why a nack was not the handler's own choice. */
export interface HandlerFailure {
  kind: HandlerErrorKind;
  error: unknown;
}

const MAX_DELAY_MS = 7 * 24 * 3600_000;
const EXPECTED = "expected nothing, 'ack', { retry: reason, delayMs? } or { reject: reason }";

/**
 * Maps a handler's return value to a settlement. Strict on purpose: a typo
 * such as `{ retyr: 'x' }` must not ack (and lose) the event, so anything that
 * is not exactly an outcome nacks with a reason that says what came back.
 */
export function settlementOf(value: unknown): Settlement {
  if (value === undefined || value === 'ack') return { kind: 'ack' };
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const o = value as Record<string, unknown>;
    const keys = Object.keys(o).filter((k) => o[k] !== undefined);
    if (typeof o.retry === 'string' && keys.every((k) => k === 'retry' || k === 'delayMs')) {
      const delayMs = o.delayMs ?? 0;
      if (typeof delayMs === 'number' && Number.isSafeInteger(delayMs) && delayMs >= 0 && delayMs <= MAX_DELAY_MS) {
        return { kind: 'nack', reason: o.retry, delayMs, failure: null };
      }
      return invalid(value, `retry delayMs must be an integer in 0..${MAX_DELAY_MS}, got ${describe(delayMs)}`);
    }
    if (typeof o.reject === 'string' && keys.length === 1) return { kind: 'reject', reason: o.reject };
  }
  return invalid(value, `handler returned ${describeOutcome(value)}; ${EXPECTED}`);
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

function invalid(value: unknown, reason: string): Settlement {
  const error = new TypeError(reason);
  return {
    kind: 'nack',
    reason: `invalid handler outcome: ${reason}`,
    delayMs: 0,
    failure: { kind: 'invalid-outcome', error: Object.assign(error, { value }) },
  };
}

function describeOutcome(value: unknown): string {
  if (value === null) return 'null';
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    return `an object with keys ${JSON.stringify(Object.keys(value))}`;
  }
  return describe(value);
}
