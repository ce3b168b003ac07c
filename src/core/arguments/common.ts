import { RheoError, invalidArgument } from '../errors.js';
import { assertInteger, assertPlainObject, describe } from '../validation.js';
import { assertKnownOptions } from './known-options.js';

/*
 * What every area's argument checks share: the bounds, options objects,
 * partition lists, confirmation of destructive calls, and reading a
 * caller's array or thrown value without trusting it.
 */

export const MAX_LIMIT = 10_000;
export const MAX_PARTITIONS = 4096;
export const MAX_LEASE_MS = 7 * 24 * 3600_000;
export function assertOptions(what: string, options: unknown): void {
  if (options === undefined) return;
  assertPlainObject(what, options);
  assertKnownOptions(what, options);
}

/** What a caller's getter or proxy threw, as text; reading that may throw too. */
export function messageOf(error: unknown): string {
  try {
    return error instanceof Error ? String(error.message) : String(error);
  } catch {
    return 'an unreadable value was thrown';
  }
}

export function normalizePartitions(partitions: unknown): number[] | null {
  if (partitions === undefined) return null;
  if (!Array.isArray(partitions) || partitions.length === 0) {
    throw invalidArgument(`partitions must be a non-empty array of partition numbers, got ${describe(partitions)}`);
  }
  for (const p of partitions) assertInteger('partitions[]', p, { max: MAX_PARTITIONS });
  return [...new Set(partitions as number[])].sort((a, b) => a - b);
}

/** Destructive calls need `{ confirm: true }`; anything else is `confirm_required` and changes nothing. */
export function assertConfirmed(options: unknown, what: string, details: { stream: string; group?: string }): void {
  let confirmed = false;
  try {
    confirmed = options !== null && typeof options === 'object' && (options as { confirm?: unknown }).confirm === true;
  } catch {
    confirmed = false;
  }
  if (!confirmed) throw new RheoError('confirm_required', `${what}; pass { confirm: true }`, details);
}

/** An array's length, read once; an array-like Proxy whose traps throw is bad input, not a crash. */
export function arrayLength(what: string, items: unknown): number {
  try {
    if (Array.isArray(items)) return items.length;
  } catch (error) {
    throw invalidArgument(`${what} could not read its array: ${messageOf(error)}`, { cause: error });
  }
  throw invalidArgument(`${what} expects an array, got ${describe(items)}`);
}
