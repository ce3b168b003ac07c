import { RheoError, isRheoError } from '../core/errors.js';
import type { Lease } from '../core/types.js';
import { publishDiagnostic } from './diagnostics.js';
import { leaseInfo } from './lease-events.js';

/**
 * The producer's side of `rheo:*` publishing. The producer is the one place
 * that fetches, renews and settles, so it publishes the lease-level events
 * for every pipeline built on it (a `Consumer` included, which only adds
 * `handler-error` and `drain`). Its EventEmitter events keep their own
 * shapes; these functions only publish, and only when someone subscribed.
 */
export const producerDiagnostics = {
  /** Leases claimed by one fetch. */
  fetched(leases: readonly Lease<unknown>[]): void {
    for (const lease of leases) publishDiagnostic('lease', leaseInfo(lease));
  },

  /** A renewal answered `stale_lease`. */
  lost(lease: Lease<unknown>, error: RheoError): void {
    publishDiagnostic('lease-lost', { ...leaseInfo(lease), error });
  },

  fetchFailed(
    scope: { stream: string; group: string; consumerId: string },
    info: { error: RheoError; failures: number; retryInMs: number },
  ): void {
    publishDiagnostic('fetch-error', {
      stream: scope.stream,
      group: scope.group,
      consumerId: scope.consumerId,
      error: info.error,
      failures: info.failures,
      backoffMs: info.retryInMs,
    });
  },

  /** A settle through the producer finished: `failure` is what it threw, `null` on success. */
  settled(
    op: { kind: 'ack' | 'nack' | 'reject' | 'release'; lease: Lease<unknown>; reason?: string | null; delayMs?: number },
    failure: unknown,
  ): void {
    const info = leaseInfo(op.lease);
    if (failure !== null) {
      const error = isRheoError(failure) ? failure : new RheoError('internal', String(failure), { cause: failure });
      if (error.code === 'stale_lease') publishDiagnostic('lease-lost', { ...info, error });
      else publishDiagnostic('settle-error', { ...info, op: op.kind, error });
      return;
    }
    if (op.kind === 'ack') publishDiagnostic('ack', info);
    else if (op.kind === 'nack') publishDiagnostic('retry', { ...info, reason: op.reason ?? null, delayMs: op.delayMs ?? 0 });
    else if (op.kind === 'reject') publishDiagnostic('dead-letter', { ...info, reason: op.reason ?? null });
  },
};
