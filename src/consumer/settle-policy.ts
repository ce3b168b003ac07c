import { RheoError, isRheoError } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import type { EventSink } from '../observability/diagnostics.js';
import { leaseInfo } from '../observability/lease-events.js';
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

type Settler<T extends JsonValue> = Pick<RheoProducer<T>, 'ack' | 'nack' | 'reject' | 'release'>;

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
 *   `lease-lost`, nothing more.
 * - a failed nack, reject or release is left to expire (redelivered then).
 */
export async function carryOut<T extends JsonValue>(
  producer: Settler<T>,
  lease: Lease<T>,
  result: RunResult,
  counters: SettleCounters,
  events: EventSink,
): Promise<void> {
  const info = leaseInfo(lease);
  if (result.kind === 'lost') return; // reported when the loss was noticed
  const failed = (op: 'ack' | 'nack' | 'reject' | 'release', error: RheoError): void => {
    if (error.code === 'stale_lease') {
      counters.lost++;
      events.emit('lease-lost', { ...info, error });
      return;
    }
    counters.settleErrors++;
    events.emit('settle-error', { ...info, op, error });
  };
  switch (result.kind) {
    case 'ack': {
      const error = await attempt(() => producer.ack(lease));
      if (!error) {
        counters.acked++;
        events.emit('ack', info);
        return;
      }
      const unknown = OUTCOME_UNKNOWN.has(error.code);
      failed('ack', error);
      if (unknown || error.code === 'stale_lease') return;
      const reason = `ack failed (${error.code}): ${error.message}`;
      const nackError = await attempt(() => producer.nack(lease, reason, { delayMs: 0 }));
      if (nackError) failed('nack', nackError);
      else {
        counters.retried++;
        events.emit('retry', { ...info, reason, delayMs: 0 });
      }
      return;
    }
    case 'nack': {
      const error = await attempt(() => producer.nack(lease, result.reason, { delayMs: result.delayMs }));
      if (error) return failed('nack', error);
      counters.retried++;
      events.emit('retry', { ...info, reason: result.reason, delayMs: result.delayMs });
      return;
    }
    case 'reject': {
      const error = await attempt(() => producer.reject(lease, result.reason));
      if (error) return failed('reject', error);
      counters.deadLettered++;
      events.emit('dead-letter', { ...info, reason: result.reason });
      return;
    }
  }
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
      const error = await attempt(() => producer.release(lease));
      if (!error) return;
      const info = leaseInfo(lease);
      if (error.code === 'stale_lease') {
        counters.lost++;
        events.emit('lease-lost', { ...info, error });
      } else {
        counters.settleErrors++;
        events.emit('settle-error', { ...info, op: 'release', error });
      }
    }),
  );
}

async function attempt(fn: () => Promise<void>): Promise<RheoError | null> {
  try {
    await fn();
    return null;
  } catch (error) {
    return isRheoError(error)
      ? error
      : new RheoError('internal', `settle failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
  }
}
