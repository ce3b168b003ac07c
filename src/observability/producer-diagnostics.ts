import { RheoError, isRheoError } from '../core/errors.js';
import { log, silentLogger, type Logger } from '../core/logger.js';
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
export function producerReporter(emitter: Emitter, logger: Logger = silentLogger) {
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
      const info = leaseInfo(lease);
      log(logger, 'warn', { ...info, err: error }, `rheo lease lost on stream "${info.stream}", group "${info.group}": another holder may process event ${info.eventId}`);
      report('lease-lost', { ...info, error }, lease);
    },

    fetchFailed(info: FetchErrorEvent): void {
      const { error, ...fields } = info;
      log(logger, 'warn', { ...fields, err: error, code: error.code }, `rheo fetch from stream "${info.stream}", group "${info.group}" failed (${error.code}); retrying in ${info.backoffMs} ms`);
      report('fetch-error', info, null);
    },

    renewFailed(info: { stream: string; group: string; consumerId: string; error: RheoError; leases: number }): void {
      const { error, ...fields } = info;
      log(logger, 'warn', { ...fields, err: error, code: error.code }, `rheo lease renewal on stream "${info.stream}", group "${info.group}" failed (${error.code}); ${info.leases} lease(s) kept and retried sooner`);
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
          if (held) {
            log(logger, 'warn', { ...info, op: op.kind, err: error }, `rheo ${op.kind} on stream "${info.stream}", group "${info.group}" was fenced: the lease had been taken away`);
            report('lease-lost', { ...info, error }, op.lease);
          }
        } else {
          log(logger, 'warn', { ...info, op: op.kind, err: error, code: error.code }, `rheo ${op.kind} on stream "${info.stream}", group "${info.group}" failed (${error.code}); the lease is left to expire`);
          report('settle-error', { ...info, op: op.kind, error }, op.lease);
        }
        return;
      }
      if (op.kind === 'ack') report('ack', info, op.lease);
      else if (op.kind === 'nack') report('retry', { ...info, reason: op.reason ?? null, delayMs: op.delayMs ?? 0 }, op.lease);
      else if (op.kind === 'reject') report('dead-letter', { ...info, reason: op.reason ?? null }, op.lease);
    },
  };
}
