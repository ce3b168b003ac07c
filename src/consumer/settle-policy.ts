import { RheoError, isRheoError } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import type { EventSink } from '../observability/diagnostics.js';
import { emittedLeaseInfo } from '../observability/lease-events.js';
import type { RheoProducer } from '../producer/rheo-producer.js';
import type { RunResult } from './handler-run.js';

/** The counters a settle moves. */
export interface SettleCounters {
  acked: number;
  retried: number;
  deadLettered: number;
  lost: number;
  settleErrors: number;
}

type Settler<T extends JsonValue> = Pick<RheoProducer<T>, 'ack' | 'nack' | 'reject' | 'release' | 'confirm'>;

type SettleKind = 'ack' | 'nack' | 'reject' | 'release';

/** Where settle events go; `listenerCount` lets the hot path skip building an event nobody hears. */
export type HeardEvents = EventSink & { listenerCount(event: string): number };

/**
 * Codes after which the outcome of a write is unknown: the ack may already be
 * durable, or may still commit on a connection we lost. A nack gains nothing
 * there: if the ack landed, the nack is refused as stale; if a nack landed
 * first, the event would run again although it was done; if neither lands,
 * lease expiry redelivers anyway (at-least-once holds). So the lease is left
 * to expire, and fencing makes any late write harmless.
 */
const OUTCOME_UNKNOWN = new Set(['ambiguous', 'backend_unavailable']);

/**
 * Carries out what a handler run decided, through the producer (settle and
 * confirm in one step, coalesced). Never rejects: every failure becomes an
 * event and a counter. Events go to `events` only: the producer already
 * publishes the same ones on the `rheo:*` diagnostics channels.
 *
 * - `ack` that fails definitely (the backend answered and nothing changed,
 *   e.g. `internal`) nacks, so the event is retried now rather than after
 *   the lease runs out; an ack whose outcome is unknown is left to expire.
 * - `stale_lease` on any settle means the lease was already taken away:
 *   the producer reports `lease-lost`, nothing more.
 * - a failed nack, reject or release is left to expire (redelivered then).
 */
export async function carryOut<T extends JsonValue>(
  producer: Settler<T>,
  lease: Lease<T>,
  result: RunResult,
  counters: SettleCounters,
  events: HeardEvents,
): Promise<void> {
  if (result.kind === 'lost') return; // reported when the loss was noticed
  switch (result.kind) {
    case 'ack':
      return afterAck(producer, lease, await answerOf(producer.ack(lease)), counters, events);
    case 'nack': {
      const error = await answerOf(producer.nack(lease, result.reason, { delayMs: result.delayMs }));
      if (error) return reportFailure(lease, 'nack', error, counters, events);
      counters.retried++;
      events.emit('retry', { ...emittedLeaseInfo(lease), reason: result.reason, delayMs: result.delayMs });
      return;
    }
    case 'reject': {
      const error = await answerOf(producer.reject(lease, result.reason));
      if (error) return reportFailure(lease, 'reject', error, counters, events);
      counters.deadLettered++;
      events.emit('dead-letter', { ...emittedLeaseInfo(lease), reason: result.reason });
      return;
    }
    case 'committed': {
      // Settled in the handler's transaction (transactional-handler.ts): only stop renewing.
      producer.confirm(lease.leaseId);
      if (result.settle === 'reject') {
        counters.deadLettered++;
        events.emit('dead-letter', { ...emittedLeaseInfo(lease), reason: result.reason ?? '' });
      } else {
        counters.acked++;
        if (events.listenerCount('ack') > 0) events.emit('ack', emittedLeaseInfo(lease));
      }
      return;
    }
    case 'uncommitted': {
      // The writes rolled back with the settle (or, if ambiguous, may have
      // committed with it): either way nothing more is sent. A stale lease
      // belongs to someone else now; any other failure leaves the lease to
      // expire and be redelivered, with the writes undone.
      producer.confirm(lease.leaseId);
      if (result.error.code === 'stale_lease') {
        counters.lost++;
        events.emit('lease-lost', { ...emittedLeaseInfo(lease), error: result.error });
        return;
      }
      return reportFailure(lease, 'ack', result.error, counters, events);
    }
  }
}

/**
 * What follows an ack's answer (`null`: it succeeded): count it, or report
 * the failure and, when the ack failed definitely, nack so the event is
 * retried now. Synchronous unless that nack is sent (then its promise,
 * which never rejects), so the consumer's hot path can take an ack's answer
 * without a promise.
 */
export function afterAck<T extends JsonValue>(
  producer: Settler<T>,
  lease: Lease<T>,
  error: RheoError | null,
  counters: SettleCounters,
  events: HeardEvents,
): Promise<void> | undefined {
  if (!error) {
    counters.acked++;
    // The hot path: an ack nobody listens to builds no event.
    if (events.listenerCount('ack') > 0) events.emit('ack', emittedLeaseInfo(lease));
    return undefined;
  }
  reportFailure(lease, 'ack', error, counters, events);
  if (OUTCOME_UNKNOWN.has(error.code) || error.code === 'stale_lease') return undefined;
  return nackFailedAck(producer, lease, error, counters, events);
}

async function nackFailedAck<T extends JsonValue>(
  producer: Settler<T>,
  lease: Lease<T>,
  error: RheoError,
  counters: SettleCounters,
  events: HeardEvents,
): Promise<void> {
  const reason = `ack failed (${error.code}): ${error.message}`;
  const nackError = await answerOf(producer.nack(lease, reason, { delayMs: 0 }));
  if (nackError) return reportFailure(lease, 'nack', nackError, counters, events);
  counters.retried++;
  events.emit('retry', { ...emittedLeaseInfo(lease), reason, delayMs: 0 });
}

/** Releases leases that were never started (no attempt spent); failures are left to expire. */
export async function releaseUnstarted<T extends JsonValue>(
  producer: Settler<T>,
  leases: Lease<T>[],
  counters: SettleCounters,
  events: EventSink,
): Promise<void> {
  await Promise.all(
    leases.map(async (lease) => {
      const error = await answerOf(producer.release(lease));
      if (error) reportFailure(lease, 'release', error, counters, events);
    }),
  );
}

/**
 * Anything but `stale_lease` is a `settle-error`. A stale settle means the
 * lease was already taken away: the producer reports that as `lease-lost`
 * (once per lease, whether a renewal or a settle noticed first), and the
 * consumer counts and re-emits it from there, so nothing more happens here.
 */
function reportFailure(lease: Lease<unknown>, op: SettleKind, error: RheoError, counters: SettleCounters, events: EventSink): void {
  if (error.code === 'stale_lease') return;
  counters.settleErrors++;
  events.emit('settle-error', { ...emittedLeaseInfo(lease), op, error });
}

/** A settle's answer: `null` when it succeeded, else its error as a `RheoError`. Never rejects. */
function answerOf(settle: Promise<void>): Promise<RheoError | null> {
  return settle.then(noError, asSettleError);
}

function noError(): null {
  return null;
}

/** A settle's failure as a `RheoError` (a hook may have thrown anything). */
export function asSettleError(error: unknown): RheoError {
  return isRheoError(error)
    ? error
    : new RheoError('internal', `settle failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
}
