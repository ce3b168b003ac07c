import type { LeaseRef, SettleOp } from '../backend.js';
import { invalidArgument } from '../errors.js';
import type { SettleRequest } from '../types.js';
import { assertInteger, assertName, assertString, describe, optionalInteger } from '../validation.js';
import { MAX_LEASE_MS, MAX_PARTITIONS, messageOf } from './common.js';

/* The leases' arguments: a caller's lease read once into its fence, reasons, and settle requests. */

/**
 * Reads the fields fencing needs from a caller's lease, each exactly once, and
 * checks the values read. Once only, because a lease may be a Proxy or carry
 * getters: a value checked on one read and sent from another could differ,
 * and a getter that throws must become this item's `invalid_argument`, not a
 * TypeError that fails a whole batch.
 */
export function leaseRef(lease: unknown, what: string): LeaseRef {
  if (lease === null || typeof lease !== 'object') throw invalidArgument(`${what} expects a lease, got ${describe(lease)}`);
  let leaseId: unknown, stream: unknown, group: unknown, partition: unknown, sequence: unknown;
  try {
    ({ leaseId, stream, group } = lease as Record<string, unknown>);
    const event: unknown = (lease as Record<string, unknown>).event;
    if (event !== null && typeof event === 'object') ({ partition, sequence } = event as Record<string, unknown>);
  } catch (error) {
    throw invalidArgument(`${what} could not read the lease: ${messageOf(error)}`, { cause: error });
  }
  if (
    typeof leaseId !== 'string' ||
    typeof stream !== 'string' ||
    typeof group !== 'string' ||
    typeof partition !== 'number' ||
    typeof sequence !== 'number'
  ) {
    throw invalidArgument(`${what} expects a lease returned by fetch (leaseId, stream, group, event.partition, event.sequence)`);
  }
  assertName('stream', stream);
  assertName('group', group);
  assertString('leaseId', leaseId, { min: 1, max: 200 });
  // A fetched lease id never holds these; PostgreSQL text cannot even carry U+0000.
  if (leaseId.includes('\u0000') || !leaseId.isWellFormed()) {
    throw invalidArgument(`leaseId contains U+0000 or a lone surrogate, so no fetch returned it`);
  }
  assertInteger('lease event.partition', partition, { max: MAX_PARTITIONS });
  assertInteger('lease event.sequence', sequence, { min: 1 });
  return { stream, group, partition, sequence, leaseId };
}

/** Longest stored nack/reject reason, in UTF-16 code units. */
export const MAX_REASON_LENGTH = 4000;

/**
 * A nack/reject reason is a diagnostic and never makes a settle fail
 * (docs/design.md, "Invariants"): an Error gives its message; a plain object
 * or an array is stored as its JSON text (its `String()` would be the
 * useless "[object Object]"), anything else as its `String()` (either falls
 * back to a description when it throws); U+0000 and lone surrogates, which
 * PostgreSQL cannot store, become U+FFFD on every backend alike; a reason
 * longer than `MAX_REASON_LENGTH` is cut there (never inside a surrogate pair).
 */
export function normalizeReason(reason: unknown): string | null {
  if (reason === undefined || reason === null) return null;
  let text: string;
  if (typeof reason === 'string') {
    text = reason;
  } else {
    try {
      const value: unknown =
        reason instanceof Error ? reason.message || reason.name : isStructured(reason) ? JSON.stringify(reason) : String(reason);
      text = typeof value === 'string' ? value : safeDescribe(reason);
    } catch {
      text = safeDescribe(reason);
    }
  }
  if (text.length > MAX_REASON_LENGTH) {
    const last = text.charCodeAt(MAX_REASON_LENGTH - 1);
    text = text.slice(0, last >= 0xd800 && last <= 0xdbff ? MAX_REASON_LENGTH - 1 : MAX_REASON_LENGTH);
  }
  return text.replaceAll('\u0000', '\ufffd').toWellFormed();
}

/** An array, or an object with no `toString` of its own kind (plain or null-prototype): data, so JSON shows it. */
function isStructured(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return true;
  const { toString } = value as { toString?: unknown };
  return toString === undefined || toString === Object.prototype.toString;
}

function safeDescribe(value: unknown): string {
  try {
    return describe(value);
  } catch {
    return 'an unreadable value';
  }
}

/**
 * Validates one settle request into the backend's fenced op. Every op is
 * built as one literal of one shape (`reason` null and `delayMs` 0 where the
 * kind has none): on Node 20 `{ ...ref, kind }` costs about 2 µs, because
 * adding a field to a spread copy leaves V8's fast path, and this runs once
 * per settled lease.
 */
export function settleOp(request: SettleRequest, what: string): SettleOp {
  if (request === null || typeof request !== 'object') throw invalidArgument(`${what} expects a settle request, got ${describe(request)}`);
  let kind: unknown, lease: unknown, rawReason: unknown, rawDelayMs: unknown;
  try {
    ({ kind, lease } = request as Record<string, unknown>);
    if (kind === 'nack' || kind === 'reject') rawReason = (request as Record<string, unknown>).reason;
    if (kind === 'nack') rawDelayMs = (request as Record<string, unknown>).delayMs;
  } catch (error) {
    throw invalidArgument(`${what} could not read the settle request: ${messageOf(error)}`, {
      cause: error,
    });
  }
  const ref = leaseRef(lease, what);
  let reason: string | null = null;
  let delayMs = 0;
  switch (kind) {
    case 'ack':
    case 'release':
      break;
    case 'reject':
      reason = normalizeReason(rawReason);
      break;
    case 'nack':
      delayMs = optionalInteger('delayMs', rawDelayMs, 0, { max: MAX_LEASE_MS });
      reason = normalizeReason(rawReason);
      break;
    default:
      throw invalidArgument(`${what}: kind must be ack, nack, reject or release, got ${describe(kind)}`);
  }
  return {
    stream: ref.stream,
    group: ref.group,
    partition: ref.partition,
    sequence: ref.sequence,
    leaseId: ref.leaseId,
    kind,
    reason,
    delayMs,
  } as SettleOp;
}
