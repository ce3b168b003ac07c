import type { EventEmitter } from 'node:events';
import { RheoError, isRheoError } from '../core/errors.js';
import type { Lease } from '../core/types.js';

/** What a stage needs to give leases back: any producer. */
export interface LeaseReleaser {
  release(lease: Lease<never>): Promise<void>;
}

/** The lease a pipeline item carries: the item itself, or the `lease` of a `{ lease, value }`. */
export function leaseOfItem(item: unknown): Lease<never> | null {
  if (item === null || typeof item !== 'object') return null;
  const candidate = 'leaseId' in item && 'event' in item ? item : (item as { lease?: unknown }).lease;
  if (candidate === null || typeof candidate !== 'object') return null;
  return 'leaseId' in candidate && 'event' in candidate ? (candidate as Lease<never>) : null;
}

/**
 * Gives back the leases of items a stage still held when it was destroyed, so
 * they are redelivered at once without spending an attempt instead of waiting
 * out their lease. A failed release is an event (`lease-lost` when the lease
 * was already gone, `settle-error` otherwise), never a rejection.
 */
export async function releaseHeld(producer: LeaseReleaser, items: unknown[], events: EventEmitter): Promise<void> {
  const leases = items.map(leaseOfItem).filter((lease): lease is Lease<never> => lease !== null);
  await Promise.all(
    leases.map(async (lease) => {
      try {
        await producer.release(lease);
      } catch (failure) {
        const error = isRheoError(failure) ? failure : new RheoError('internal', String(failure), { cause: failure });
        if (error.code === 'stale_lease') events.emit('lease-lost', { lease, error });
        else events.emit('settle-error', { lease, op: 'release', error });
      }
    }),
  );
}
