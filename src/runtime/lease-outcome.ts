import type { EventEmitter } from 'node:events';
import { RheoError, isRheoError } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import { describe } from '../core/validation.js';
import type { Timers } from './timers.js';
import type { HandlerErrorKind, LeaseLostEvent } from '../observability/lease-events.js';

/**
 * What a handler returns for one lease: nothing or `'ack'` acks;
 * `{ retry: reason, delayMs? }` nacks (retried until `maxAttempts`, then
 * dead-lettered); `{ reject: reason }` dead-letters now. A throw nacks with
 * the error message as reason.
 */
export type LeaseOutcome = void | 'ack' | { retry: string; delayMs?: number } | { reject: string };

/**
 * The settle a sink or the consumer performs for one lease. A nack read in
 * the diagnosing style (the consumer's) carries `failure`: why the nack was
 * not the handler's own choice, or `null` when it was.
 */
export type Settlement =
  | { kind: 'ack' }
  | { kind: 'nack'; reason: string; delayMs: number; failure?: HandlerFailure | null }
  | { kind: 'reject'; reason: string }
  | { kind: 'release' };

/** What a handler's outcome or failure reads as: every settlement but `release`, which only a stage decides. */
export type HandlerSettlement = Exclude<Settlement, { kind: 'release' }>;

/** Why a nack was not the handler's own choice (what the consumer reports as `handler-error`). */
export interface HandlerFailure {
  kind: HandlerErrorKind;
  error: unknown;
}

/**
 * How a reader words and annotates the nacks it makes. Sinks nack a throw
 * with the bare message and attach nothing; the consumer prefixes
 * `handler threw: ` and attaches the `failure` it logs and reports.
 */
export interface OutcomeStyle {
  /** Put before a thrown error's message in the nack reason. */
  readonly threwPrefix: string;
  /** Attach `failure` to every nack (`null` on a handler's own retry). */
  readonly diagnose: boolean;
}

/** The sinks' style: a throw's bare message as reason, no `failure`. */
export const SINK_OUTCOMES: OutcomeStyle = Object.freeze({ threwPrefix: '', diagnose: false });
/** The consumer's style: `handler threw: ` before a throw's message, and the `failure` on every nack. */
export const CONSUMER_OUTCOMES: OutcomeStyle = Object.freeze({ threwPrefix: 'handler threw: ', diagnose: true });

/**
 * What sinks and settling transforms need from a producer: settle a lease
 * (which confirms it), ask whether it is still held, share its timers, and
 * hear of leases it lost. `RheoProducer` implements it; declared here so the
 * stages stand on the runtime, not on the producer.
 */
export interface LeaseSettler<T extends JsonValue = JsonValue> {
  ack(lease: Lease<T>): Promise<void>;
  nack(lease: Lease<T>, reason?: string | null, options?: { delayMs?: number }): Promise<void>;
  reject(lease: Lease<T>, reason?: string | null): Promise<void>;
  release(lease: Lease<T>): Promise<void>;
  holds(leaseId: string): boolean;
  readonly timers: Timers;
  /** Most unsettled leases the producer holds (`RheoProducer.maxDemand`); stages check their concurrency against it. */
  readonly maxDemand?: number;
  /** The producer's default for a failed lease (a throw in a stage); stages may override it. Absent: `'nack'`. */
  readonly onFailure?: FailurePolicy;
  on(event: 'lease-lost', listener: (info: LeaseLostEvent & { readonly lease: Lease<T> }) => void): unknown;
  off(event: 'lease-lost', listener: (info: LeaseLostEvent & { readonly lease: Lease<T> }) => void): unknown;
}

export interface SettleErrorInfo<T> {
  lease: Lease<T>;
  op: Settlement['kind'];
  error: RheoError;
}

export interface SinkLeaseLostInfo<T> {
  lease: Lease<T>;
  error: RheoError;
}

export interface HandlerErrorInfo<T> {
  lease: Lease<T>;
  error: unknown;
}

/** Events of sinks and of transforms that settle. None of them is `'error'`: a failed settle never breaks the pipeline. */
export interface SettlingStreamEvents<T> {
  /** A settle failed for another reason than `stale_lease` (backend down, ambiguous write). The lease is left to expire. */
  'settle-error': [info: SettleErrorInfo<T>];
  /** A settle answered `stale_lease`: the lease had already been taken away. */
  'lease-lost': [info: SinkLeaseLostInfo<T>];
  /** A handler threw (the lease is nacked with the message). */
  'handler-error': [info: HandlerErrorInfo<T>];
}

const MAX_DELAY_MS = 7 * 24 * 3600_000;
/** Shared: an ack carries nothing of its own, and it is the outcome of almost every lease. */
const ACK = Object.freeze({ kind: 'ack' as const });
const EXPECTED = "expected nothing, 'ack', { retry: reason, delayMs? } or { reject: reason }";

/** A handler's return value, read strictly: one of the outcomes, or what is wrong with it. */
export type ParsedOutcome =
  | { kind: 'ack' }
  | { kind: 'nack'; reason: string; delayMs: number }
  | { kind: 'reject'; reason: string }
  | { kind: 'invalid'; problem: string };

/**
 * Reads a handler's return value. Strict on purpose: a typo such as
 * `{ retyr: 'x' }` must not ack (and so lose) the event, so anything that is
 * not exactly an outcome is `invalid`, with a problem that says what came back.
 * Sinks and the consumer both settle by this one reading.
 */
export function parseOutcome(value: unknown): ParsedOutcome {
  if (value === undefined || value === 'ack') return ACK;
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const o = value as Record<string, unknown>;
    const keys = Object.keys(o).filter((k) => o[k] !== undefined);
    if (typeof o.retry === 'string' && keys.every((k) => k === 'retry' || k === 'delayMs')) {
      const delayMs = o.delayMs ?? 0;
      if (typeof delayMs === 'number' && Number.isSafeInteger(delayMs) && delayMs >= 0 && delayMs <= MAX_DELAY_MS) {
        return { kind: 'nack', reason: o.retry, delayMs };
      }
      return { kind: 'invalid', problem: `retry delayMs must be an integer in 0..${MAX_DELAY_MS}, got ${describe(delayMs)}` };
    }
    if (typeof o.reject === 'string' && keys.length === 1) return { kind: 'reject', reason: o.reject };
  }
  return { kind: 'invalid', problem: `handler returned ${describeOutcome(value)}; ${EXPECTED}` };
}

/**
 * The settlement for a handler's return value: an invalid one nacks with a
 * reason that says why (and, diagnosing, a `TypeError` carrying the value).
 */
export function settlementOf(outcome: unknown, style: OutcomeStyle = SINK_OUTCOMES): HandlerSettlement {
  const parsed = parseOutcome(outcome);
  if (parsed.kind === 'nack') return style.diagnose ? { ...parsed, failure: null } : parsed;
  if (parsed.kind !== 'invalid') return parsed;
  const reason = `invalid handler outcome: ${parsed.problem}`;
  if (!style.diagnose) return { kind: 'nack', reason, delayMs: 0 };
  const error = Object.assign(new TypeError(parsed.problem), { value: outcome });
  return { kind: 'nack', reason, delayMs: 0, failure: { kind: 'invalid-outcome', error } };
}

function describeOutcome(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object' && !Array.isArray(value)) {
    return `an object with keys ${JSON.stringify(Object.keys(value))}`;
  }
  return describe(value);
}

/** Whether a handler returned a promise (or any thenable) rather than a plain outcome. */
export function isThenable<V>(value: V | PromiseLike<V>): value is PromiseLike<V> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/** A throw nacks with the error's message (after the style's prefix) as reason. */
export function thrownSettlement(error: unknown, style: OutcomeStyle = SINK_OUTCOMES): HandlerSettlement {
  const reason = `${style.threwPrefix}${messageOf(error)}`;
  return style.diagnose ? { kind: 'nack', reason, delayMs: 0, failure: { kind: 'threw', error } } : { kind: 'nack', reason, delayMs: 0 };
}

/** The settlement after `handlerTimeoutMs`: nack, diagnosing with a `TimeoutError`. */
export function timeoutSettlement(timeoutMs: number, style: OutcomeStyle = SINK_OUTCOMES): HandlerSettlement {
  const error = new Error(`handler timed out after ${timeoutMs} ms`);
  error.name = 'TimeoutError';
  return style.diagnose
    ? { kind: 'nack', reason: error.message, delayMs: 0, failure: { kind: 'timeout', error } }
    : { kind: 'nack', reason: error.message, delayMs: 0 };
}

/** An error's message, else its name; anything thrown that is not an error, as a string. */
function messageOf(error: unknown): string {
  return error instanceof Error ? error.message || error.name : String(error);
}

/**
 * What a stage does with a lease whose work failed (it threw): `'nack'`
 * retries it until `maxAttempts`, then dead-letters it; `'reject'`
 * dead-letters it at once. Set on the producer (`rheo.producer({ onFailure })`)
 * as every stage's default, and per stage with the stage's own `onFailure`.
 */
export type FailurePolicy = 'nack' | 'reject';

/**
 * Thrown by a map, a key-ordered map or a handler to dead-letter its lease
 * whatever the failure policy says (`throw rejectLease('unparseable')`).
 */
export class LeaseRejection extends Error {
  readonly reason: string;

  constructor(reason: string) {
    super(reason);
    this.name = 'LeaseRejection';
    this.reason = reason;
  }
}

/** A `LeaseRejection` to throw from a stage: its lease is dead-lettered with `reason`. */
export function rejectLease(reason: string): LeaseRejection {
  if (typeof reason !== 'string') throw new RheoError('invalid_argument', `rejectLease expects a reason string, got ${describe(reason)}`);
  return new LeaseRejection(reason);
}

/** The settlement for a failure under `policy`; a `LeaseRejection` always rejects. */
export function failureSettlement(error: unknown, policy: FailurePolicy): HandlerSettlement {
  if (error instanceof LeaseRejection) return { kind: 'reject', reason: error.reason };
  if (policy === 'nack') return thrownSettlement(error);
  return { kind: 'reject', reason: messageOf(error) };
}

/**
 * A stage's failure policy: its own `onFailure` when given, else its
 * producer's, else `'nack'`. Anything else is `invalid_argument`.
 */
export function failurePolicyOf(what: string, own: unknown, producer: { readonly onFailure?: unknown } | undefined): FailurePolicy {
  const chosen = own ?? producer?.onFailure ?? 'nack';
  if (chosen === 'nack' || chosen === 'reject') return chosen;
  throw new RheoError('invalid_argument', `${what}: onFailure must be 'nack' or 'reject', got ${describe(chosen)}`);
}

/**
 * The seeds' "two knobs": `maxDemand` bounds the leases a producer holds,
 * a stage's `concurrency` the work running at once. A stage that may run
 * more at once than the producer ever holds would leave slots idle forever
 * (`rheo.consume` refuses the same), so it is refused with both numbers.
 */
export function assertConcurrencyWithinDemand(what: string, concurrency: number, producer: { readonly maxDemand?: unknown }): void {
  const maxDemand = producer.maxDemand;
  if (typeof maxDemand !== 'number' || concurrency <= maxDemand) return;
  throw new RheoError(
    'invalid_argument',
    `${what}: concurrency (${concurrency}) is above the producer's maxDemand (${maxDemand}): at most ${maxDemand} leases are ever held, so ${concurrency} can never run at once; raise maxDemand or lower concurrency`,
  );
}

/** A lease travelling with the value a processor computed from it (what the map transforms emit). */
export interface Mapped<T extends JsonValue, R> {
  lease: Lease<T>;
  value: R;
}

/**
 * What reaches a sink: a lease, or a processor's `{ lease, value }`. Anything
 * else is `invalid_argument` (a stream error of the sink, never a crash).
 */
export function intakeOf<T extends JsonValue>(what: string, item: unknown): { lease: Lease<T>; value: unknown; mapped: boolean } {
  if (isLease(item)) return { lease: item as Lease<T>, value: undefined, mapped: false };
  if (item !== null && typeof item === 'object' && 'lease' in item && isLease((item as { lease: unknown }).lease)) {
    const m = item as { lease: Lease<T>; value?: unknown };
    return { lease: m.lease, value: m.value, mapped: true };
  }
  throw new RheoError(
    'invalid_argument',
    `${what} takes leases or a processor's { lease, value }, got ${item !== null && typeof item === 'object' ? `an object with keys ${JSON.stringify(Object.keys(item))}` : describe(item)}`,
  );
}

/**
 * Shaped like a lease: it has a `leaseId` and an `event`. Only the shape is
 * read here; a lease whose fields are wrong is refused where it is settled,
 * as a lease passed to `rheo.ack` is.
 */
function isLease(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || !('leaseId' in value)) return false;
  const event = (value as { event?: unknown }).event;
  return event !== null && typeof event === 'object';
}

/**
 * Performs a settlement through the producer (which confirms the lease in
 * the same step) and turns a failure into an event on `events`, never a
 * rejection: a stale lease becomes `lease-lost`, anything else `settle-error`.
 */
export function settleLease<T extends JsonValue>(
  producer: LeaseSettler<T>,
  lease: Lease<T>,
  settlement: Settlement,
  events: EventEmitter,
): Promise<void> {
  let settled: Promise<void>;
  try {
    settled = settleBy(producer, lease, settlement);
  } catch (failure) {
    settled = Promise.reject(failure);
  }
  return settled.then(undefined, (failure: unknown) => {
    const error = isRheoError(failure)
      ? failure
      : new RheoError('internal', `settle failed: ${(failure as Error)?.message ?? String(failure)}`, { cause: failure });
    if (error.code === 'stale_lease') events.emit('lease-lost', { lease, error });
    else events.emit('settle-error', { lease, op: settlement.kind, error });
  });
}

function settleBy<T extends JsonValue>(producer: LeaseSettler<T>, lease: Lease<T>, settlement: Settlement): Promise<void> {
  switch (settlement.kind) {
    case 'ack':
      return producer.ack(lease);
    case 'nack':
      return producer.nack(lease, settlement.reason, { delayMs: settlement.delayMs });
    case 'reject':
      return producer.reject(lease, settlement.reason);
    case 'release':
      return producer.release(lease);
  }
}

/**
 * Lease ids the producer reported lost (renewal answered `stale_lease`), so a
 * sink can skip a lease that was lost while it waited: its settle would be
 * refused anyway. Bounded: the oldest ids are forgotten first.
 */
export class LostLeases {
  readonly #ids = new Set<string>();
  readonly #max: number;

  constructor(max = 10_000) {
    this.#max = max;
  }

  add(leaseId: string): void {
    this.#ids.add(leaseId);
    if (this.#ids.size > this.#max) {
      const oldest = this.#ids.values().next();
      if (!oldest.done) this.#ids.delete(oldest.value);
    }
  }

  /** Whether the lease was reported lost; forgets it either way. */
  take(leaseId: string): boolean {
    return this.#ids.delete(leaseId);
  }
}
