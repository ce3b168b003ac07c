import type { FetchRequest, GroupSpec, LeaseRef, LeaseStore, RenewResult, SettleOp, SettleOutcome } from '../../core/backend.js';
import { receiptOf } from '../../core/backend.js';
import { RheoError, staleLease } from '../../core/errors.js';
import { newLeaseId } from '../../core/ids.js';
import type { Lease } from '../../core/types.js';
import { DeadLetterList } from './dead-letter-list.js';
import { groupScope, partitionList, startPartitions, type GroupState } from './group-state.js';
import type { GroupPartition, OpenDelivery } from './group-partition.js';
import type { MemoryStore } from './store.js';
import type { StreamLog } from './stream-log.js';

/** A delivery a fetch found past maxAttempts, dead-lettered when the fetch ends. */
interface Spent {
  p: number;
  part: GroupPartition;
  d: OpenDelivery;
}

/** Groups and per-event leases on the memory backend: fetch claims, renewals and settles. */
export class MemoryLeases implements LeaseStore {
  readonly #store: MemoryStore;

  constructor(store: MemoryStore) {
    this.#store = store;
  }

  async createGroup(stream: string, group: string, spec: GroupSpec): Promise<void> {
    const s = this.#store.stream(stream);
    // The request is checked against the stream before the name is: a bad
    // start is invalid_partition whether or not the group exists (PostgreSQL
    // checks it before its insert can conflict).
    const partitions = partitionList(s.log, spec.partitions ?? null);
    const parts = startPartitions(s.log, group, spec.start, partitions);
    if (s.groups.has(group)) {
      throw new RheoError('already_exists', `group "${group}" already exists on stream "${stream}"`, { stream, group });
    }
    s.groups.set(group, {
      name: group,
      maxAttempts: spec.maxAttempts,
      partitions: Object.freeze(partitions),
      parts,
      deadLetters: new DeadLetterList(),
      rotation: 0,
      membership: null,
    });
  }

  async listGroups(stream: string): Promise<string[]> {
    return [...this.#store.stream(stream).groups.keys()].sort();
  }

  async fetch(stream: string, group: string, request: FetchRequest): Promise<Lease[]> {
    const { log, g } = this.#store.group(stream, group);
    const partitions = groupScope(log, g, request.partitions);
    const now = this.#store.clock.now();
    const leases: Lease[] = [];
    const start = g.rotation++ % partitions.length;
    const exhausted = new Set<number>();
    const budget = { bytes: 0, maxBytes: request.maxBytes, spent: false };
    const spent: Spent[] = [];
    // Round-robin, one claim per partition per round, so a backlog in one
    // partition never starves the others. The walk ends at the first event
    // that does not fit the byte budget, as PostgreSQL's claim does.
    while (leases.length < request.limit && exhausted.size < partitions.length && !budget.spent) {
      for (let k = 0; k < partitions.length && leases.length < request.limit && !budget.spent; k++) {
        const p = partitions[(start + k) % partitions.length]!;
        if (exhausted.has(p)) continue;
        const lease = claimOne(log, g, p, now, request, budget, leases.length === 0, spent);
        if (lease) leases.push(lease);
        else if (!budget.spent) exhausted.add(p);
      }
    }
    // The deliveries one fetch dead-letters die together: numbered by
    // (partition, sequence), not by the rotating walk (docs/semantics.md).
    spent.sort((a, b) => a.p - b.p || a.d.sequence - b.d.sequence);
    for (const { p, part, d } of spent) this.#store.deadLetter(g, p, part, d, 'max attempts exceeded', now);
    return leases;
  }

  async renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    const now = this.#store.clock.now();
    return refs.map((ref) => {
      const found = this.#leased(ref);
      if (found instanceof RheoError) return { ok: false, error: found };
      found.part.renew(found.d, now + leaseMs);
      return { ok: true, expiresAt: new Date(now + leaseMs) };
    });
  }

  async settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    const now = this.#store.clock.now();
    return ops.map((op) => {
      const found = this.#leased(op);
      if (found instanceof RheoError) return { ok: false, error: found };
      const { g, part, d } = found;
      switch (op.kind) {
        case 'ack':
          part.close(d);
          break;
        case 'nack':
          if (d.attempt >= g.maxAttempts) this.#store.deadLetter(g, op.partition, part, d, op.reason, now);
          else part.makePending(d, now + op.delayMs);
          break;
        case 'reject':
          this.#store.deadLetter(g, op.partition, part, d, op.reason, now);
          break;
        case 'release':
          d.attempt--;
          part.makePending(d, now);
          break;
      }
      return { ok: true };
    });
  }

  #leased(ref: LeaseRef): { g: GroupState; part: GroupPartition; d: OpenDelivery } | RheoError {
    const g = this.#store.streams.get(ref.stream)?.groups.get(ref.group);
    const part = g?.parts[ref.partition];
    const d = part?.open.get(ref.sequence);
    if (!g || !part || !d || d.state !== 'leased' || d.leaseId !== ref.leaseId) {
      return staleLease(ref.stream, ref.group, `delivery ${ref.partition}/${ref.sequence} is not leased under this lease id`);
    }
    return { g, part, d };
  }
}

/**
 * Claims the partition's lowest claimable delivery; spent ones on the way
 * are closed and added to `spent`. `null` when there is none, or when its
 * event does not fit the budget (then `budget.spent` is set and the
 * delivery is left as it was).
 */
function claimOne(
  log: StreamLog,
  g: GroupState,
  p: number,
  now: number,
  request: FetchRequest,
  budget: { bytes: number; maxBytes: number; spent: boolean },
  first: boolean,
  spent: Spent[],
): Lease | null {
  const part = g.parts[p]!;
  for (;;) {
    const next = part.nextClaimable(now, log.highWatermark(p));
    if (next === null) return null;
    const isSpent = (next.delivery?.attempt ?? 0) + 1 > g.maxAttempts;
    if (!isSpent) {
      const bytes = budget.bytes + log.size(p, next.sequence);
      if (bytes > budget.maxBytes && !first) {
        budget.spent = true;
        return null;
      }
      budget.bytes = bytes;
    }
    const d = part.take(next.sequence, next.delivery);
    if (isSpent) {
      part.close(d);
      spent.push({ p, part, d });
      continue;
    }
    const leaseId = newLeaseId();
    const expiresAt = now + request.leaseMs;
    part.lease(d, leaseId, request.consumerId, now, expiresAt);
    return {
      leaseId,
      receipt: receiptOf(log.name, g.name, p, d.sequence),
      stream: log.name,
      group: g.name,
      consumerId: request.consumerId,
      attempt: d.attempt,
      leasedAt: new Date(now),
      expiresAt: new Date(expiresAt),
      event: log.event(p, d.sequence)!,
    };
  }
}
