import type { Backend, SettleOp, SettleOutcome } from '../../src/core/backend.js';
import type { Lease } from '../../src/core/types.js';
import type { RecordWriter } from './records.js';

/**
 * Wraps a backend so that every lease a fetch (or a blocking fetch) returns and every settle answer
 * is recorded before the caller sees it. The consumer under test runs
 * unchanged on top; the records let the checker compare what each process
 * was told with what the other processes were told about the same event.
 */
export function recordingBackend(inner: Backend, records: RecordWriter): Backend {
  const claimed = new Map<string, string>();
  const record = (leases: Lease[]): void =>
    records.writeAll(
      leases.map((lease) => {
        claimed.set(lease.leaseId, lease.event.id);
        return { k: 'claim', id: lease.event.id, lease: lease.leaseId, attempt: lease.attempt, t: lease.leasedAt.getTime() };
      }),
    );
  const fetch: Backend['fetch'] = async (stream, group, request) => {
    const leases: Lease[] = await inner.fetch(stream, group, request);
    record(leases);
    return leases;
  };
  // An idle consumer's claim on a store that waits for the append itself (Redis, one partition).
  const fetchAfterAppend: Backend['fetchAfterAppend'] = inner.fetchAfterAppend
    ? async (stream, group, request, timeoutMs, signal) => {
        const got = await inner.fetchAfterAppend!(stream, group, request, timeoutMs, signal);
        if (got) record(got.leases);
        return got;
      }
    : undefined;
  const settle: Backend['settle'] = async (ops: SettleOp[]) => {
    const sentAt = Date.now();
    const outcomes: SettleOutcome[] = await inner.settle(ops);
    records.writeAll(
      ops.map((op, i) => {
        const outcome = outcomes[i];
        const code = outcome && !outcome.ok ? outcome.error.code : null;
        const id = claimed.get(op.leaseId) ?? `${op.partition}:${op.sequence}`;
        if (op.kind === 'ack' || op.kind === 'reject') claimed.delete(op.leaseId);
        return { k: 'settle', op: op.kind, id, lease: op.leaseId, ok: outcome?.ok === true, code, t: sentAt };
      }),
    );
    return outcomes;
  };
  // Bound to `inner`: a backend's methods may use private fields, which a proxy receiver cannot reach.
  return new Proxy(inner, {
    get(target, property) {
      if (property === 'fetch') return fetch;
      if (property === 'fetchAfterAppend') return fetchAfterAppend;
      if (property === 'settle') return settle;
      const value: unknown = Reflect.get(target, property);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
