import type { LeaseRef, SettleOp } from '../core/backend.js';
import { MAX_LEASE_MS, MAX_LIMIT, assertOptions, messageOf, normalizePartitions } from '../core/arguments/common.js';
import { leaseRef, settleOp } from '../core/arguments/leases.js';
import type { CallScope } from '../core/call-options.js';
import { RheoError, invalidArgument } from '../core/errors.js';
import type {
  CallOptions,
  FetchOptions,
  JsonValue,
  Lease,
  NackOptions,
  RenewOptions,
  SettleRequest,
  SettleResult,
} from '../core/types.js';
import { assertName, assertString, optionalInteger } from '../core/validation.js';
import { leaseTarget, type FacadeCalls } from './calls.js';

/*
 * The facade's per-event leases: fetch, renew and every settle, one lease
 * or many. The documentation is on the `Rheo` methods of the same names.
 */

export async function fetch<T extends JsonValue>(calls: FacadeCalls, stream: string, group: string, options: FetchOptions): Promise<Lease<T>[]> {
  calls.assertOpen();
  assertName('stream', stream);
  assertName('group', group);
  assertOptions('fetch options', options);
  const limit = optionalInteger('limit', options.limit, 10, { min: 1, max: MAX_LIMIT });
  const leaseMs = optionalInteger('leaseMs', options.leaseMs, calls.defaults.leaseMs, { min: 1, max: MAX_LEASE_MS });
  let consumerId = 'anonymous';
  if (options.consumerId !== undefined) {
    assertString('consumerId', options.consumerId);
    consumerId = options.consumerId;
  }
  const partitions = normalizePartitions(options.partitions);
  const maxBytes = calls.maxBytes(options.maxBytes);
  const scope = calls.scope('fetch options', options);
  return (await calls.traced(
    calls.telemetry?.receive(stream, group, consumerId),
    () => calls.backend.fetch(stream, group, { limit, consumerId, leaseMs, partitions, maxBytes }),
    scope,
    { action: `fetch from group "${group}" of stream "${stream}"`, writes: true, stream, group },
  )) as Lease<T>[];
}

export async function renew<T>(calls: FacadeCalls, lease: Lease<T>, options: RenewOptions): Promise<Lease<T>> {
  calls.assertOpen();
  const { ref, copy } = renewable(lease, 'renew');
  assertOptions('renew options', options);
  const leaseMs = optionalInteger('leaseMs', options.leaseMs, calls.defaults.leaseMs, { min: 1, max: MAX_LEASE_MS });
  const scope = calls.scope('renew options', options);
  const [result] = await calls.call(() => calls.backend.renew([ref], leaseMs), scope, () => leaseTarget('renew', ref));
  if (!result?.ok) throw result?.error ?? new RheoError('internal', 'renew returned no result');
  return { ...copy, expiresAt: result.expiresAt };
}

export async function renewMany<T>(
  calls: FacadeCalls,
  leases: Lease<T>[],
  options: RenewOptions,
): Promise<Array<{ ok: true; lease: Lease<T> } | { ok: false; error: RheoError }>> {
  calls.assertOpen();
  assertOptions('renew options', options);
  const leaseMs = optionalInteger('leaseMs', options.leaseMs, calls.defaults.leaseMs, { min: 1, max: MAX_LEASE_MS });
  const scope = calls.scope('renew options', options);
  return calls.perItem(
    'renewMany',
    scope,
    leases,
    (lease) => renewable(lease, 'renewMany'),
    async (valid) => {
      const results = await calls.backend.renew(
        valid.map((v) => v.ref),
        leaseMs,
      );
      return results.map((r, i) => (r.ok ? { ok: true as const, lease: { ...valid[i]!.copy, expiresAt: r.expiresAt } } : r));
    },
  );
}

export async function ack(calls: FacadeCalls, lease: Lease<unknown>, options: CallOptions): Promise<void> {
  await settleOne(calls, settleOp({ kind: 'ack', lease }, 'ack'), calls.scope('ack options', options));
}

export async function nack(calls: FacadeCalls, lease: Lease<unknown>, reason: string | null | undefined, options: NackOptions): Promise<void> {
  assertOptions('nack options', options);
  await settleOne(calls, settleOp({ kind: 'nack', lease, reason, delayMs: options.delayMs }, 'nack'), calls.scope('nack options', options));
}

export async function reject(calls: FacadeCalls, lease: Lease<unknown>, reason: string | null | undefined, options: CallOptions): Promise<void> {
  await settleOne(calls, settleOp({ kind: 'reject', lease, reason }, 'reject'), calls.scope('reject options', options));
}

export async function release(calls: FacadeCalls, lease: Lease<unknown>, options: CallOptions): Promise<void> {
  await settleOne(calls, settleOp({ kind: 'release', lease }, 'release'), calls.scope('release options', options));
}

export function ackMany(calls: FacadeCalls, leases: Lease<unknown>[], options: CallOptions): Promise<SettleResult[]> {
  return settleEach(calls, 'ackMany', leases, (lease) => ({ kind: 'ack', lease }), options);
}

export function nackMany(calls: FacadeCalls, leases: Lease<unknown>[], reason: string | null | undefined, options: NackOptions): Promise<SettleResult[]> {
  assertOptions('nack options', options);
  const delayMs = options.delayMs;
  return settleEach(calls, 'nackMany', leases, (lease) => ({ kind: 'nack', lease, reason, delayMs }), options);
}

export function rejectMany(calls: FacadeCalls, leases: Lease<unknown>[], reason: string | null | undefined, options: CallOptions): Promise<SettleResult[]> {
  return settleEach(calls, 'rejectMany', leases, (lease) => ({ kind: 'reject', lease, reason }), options);
}

export function releaseMany(calls: FacadeCalls, leases: Lease<unknown>[], options: CallOptions): Promise<SettleResult[]> {
  return settleEach(calls, 'releaseMany', leases, (lease) => ({ kind: 'release', lease }), options);
}

export function settleMany(calls: FacadeCalls, ops: SettleRequest[], options: CallOptions): Promise<SettleResult[]> {
  return settleEach(calls, 'settleMany', ops, (op) => op, options);
}

async function settleOne(calls: FacadeCalls, op: SettleOp, scope: CallScope): Promise<void> {
  calls.assertCanSettle();
  const [result] = await calls.traced(calls.telemetry?.settle([op]), () => calls.backend.settle([op]), scope, () => leaseTarget(op.kind, op));
  if (!result?.ok) throw result?.error ?? new RheoError('internal', 'settle returned no result');
}

function settleEach<I>(
  calls: FacadeCalls,
  what: string,
  items: I[],
  toRequest: (item: I) => SettleRequest,
  options: CallOptions,
): Promise<SettleResult[]> {
  calls.assertCanSettle();
  const scope = calls.scope(what, options);
  return calls.perItem(what, scope, items, (item) => settleOp(toRequest(item), what), (ops) => {
    const finish = calls.telemetry?.settle(ops);
    if (!finish) return calls.backend.settle(ops);
    return calls.backend.settle(ops).then(
      (results) => {
        finish(results);
        return results;
      },
      (error: unknown) => {
        finish(null, error);
        throw error;
      },
    );
  });
}

/**
 * A lease to renew: the ref checked, and a plain copy taken while reading it,
 * so the renewed lease handed back is built from values already read.
 */
function renewable<T>(lease: Lease<T>, what: string): { ref: LeaseRef; copy: Lease<T> } {
  const ref = leaseRef(lease, what);
  try {
    return { ref, copy: { ...lease } };
  } catch (error) {
    throw invalidArgument(`${what} could not read the lease: ${messageOf(error)}`, { cause: error });
  }
}
