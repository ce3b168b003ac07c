import type { LeaseRef, SettleOp } from '../core/backend.js';
import type { Lease } from '../core/types.js';

/*
 * The store's requests for leases the store handed out, built by the
 * producer and the competing consumer for `LeaseSource` (sources.ts): the
 * lease's fields are read, not validated again.
 */

/** The fenced ref of a lease. */
export function leaseRefOf(lease: Lease<unknown>): LeaseRef {
  return { stream: lease.stream, group: lease.group, partition: lease.event.partition, sequence: lease.event.sequence, leaseId: lease.leaseId };
}

/**
 * The settle op of a lease, with `reason` and `delayMs` already normalised by
 * the caller (`null` and 0 where the kind has none). One literal of one shape
 * (see `settleOp` in core/arguments/leases.ts for why).
 */
export function settleOpFor(lease: Lease<unknown>, kind: SettleOp['kind'], reason: string | null, delayMs: number): SettleOp {
  return {
    stream: lease.stream,
    group: lease.group,
    partition: lease.event.partition,
    sequence: lease.event.sequence,
    leaseId: lease.leaseId,
    kind,
    reason,
    delayMs,
  } as SettleOp;
}
