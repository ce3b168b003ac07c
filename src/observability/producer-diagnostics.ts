import { RheoError, isRheoError } from '../core/errors.js';
import type { Lease } from '../core/types.js';
import { hasDiagnosticSubscribers, publishDiagnostic } from './diagnostics.js';
import { leaseInfo, type FetchErrorEvent, type RheoEventMap, type RheoEventName } from './lease-events.js';

/** Anything that emits: the producer passes itself. */
interface Emitter {
  emit(event: string, ...args: unknown[]): boolean;
  listenerCount(event: string): number;
}

/** The event a successful settle reports (a release reports none). */
const SETTLED_EVENT: Partial<Record<'ack' | 'nack' | 'reject' | 'release', RheoEventName>> = {
  ack: 'ack',
  nack: 'retry',
  reject: 'dead-letter',
};

/**
 * The producer's side of event reporting. The producer is the one place that
 * fetches, renews and settles, so it reports the lease-level events for every
 * pipeline built on it (a `Consumer` included, which only adds
 * `handler-error` and `drain`). Each event is published on `rheo:<event>`
 * without the lease, and emitted on the producer with the lease attached, so
 * in-process stages can act on it while APM tools never see the fencing token.
 */
export function producerReporter(emitter: Emitter) {
  // Payloads are built only when someone listens: on the hot path (one
  // 'lease' and one 'ack' per event) an unobserved pipeline allocates nothing.
  const observed = (event: RheoEventName): boolean =>
    emitter.listenerCount(event) > 0 || hasDiagnosticSubscribers(event);
  const report = <K extends RheoEventName>(event: K, payload: RheoEventMap[K][0], lease: Lease<unknown> | null) => {
    publishDiagnostic(event, payload);
    if (emitter.listenerCount(event) > 0) emitter.emit(event, lease ? { ...payload, lease } : payload);
  };
  return {
    /** Leases claimed by one fetch. */
    fetched(leases: readonly Lease<unknown>[]): void {
      if (!observed('lease')) return;
      for (const lease of leases) report('lease', leaseInfo(lease), lease);
    },

    /** A renewal, or a settle of a lease still held, answered `stale_lease`. */
    lost(lease: Lease<unknown>, error: RheoError): void {
      report('lease-lost', { ...leaseInfo(lease), error }, lease);
    },

    fetchFailed(info: FetchErrorEvent): void {
      report('fetch-error', info, null);
    },

    /**
     * A settle through the producer finished: `failure` is what it threw,
     * `null` on success; `held` says whether the producer still held the
     * lease, i.e. no renewal had reported it lost already.
     */
    settled(
      op: { kind: 'ack' | 'nack' | 'reject' | 'release'; lease: Lease<unknown>; reason?: string | null; delayMs?: number },
      failure: unknown,
      held: boolean,
    ): void {
      if (failure === null) {
        const event = SETTLED_EVENT[op.kind];
        if (event === undefined || !observed(event)) return;
      }
      const info = leaseInfo(op.lease);
      if (failure !== null) {
        const error = isRheoError(failure) ? failure : new RheoError('internal', String(failure), { cause: failure });
        // Once per lease: a lease a renewal already reported lost is not reported again.
        if (error.code === 'stale_lease') {
          if (held) report('lease-lost', { ...info, error }, op.lease);
        } else report('settle-error', { ...info, op: op.kind, error }, op.lease);
        return;
      }
      if (op.kind === 'ack') report('ack', info, op.lease);
      else if (op.kind === 'nack') report('retry', { ...info, reason: op.reason ?? null, delayMs: op.delayMs ?? 0 }, op.lease);
      else if (op.kind === 'reject') report('dead-letter', { ...info, reason: op.reason ?? null }, op.lease);
    },
  };
}
