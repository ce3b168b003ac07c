import type { FetchRequest, GroupSpec, LeaseRef, LeaseStore, RenewResult, SettleOp, SettleOutcome } from '../../core/backend.js';
import { receiptOf } from '../../core/backend.js';
import { RheoError, staleLease } from '../../core/errors.js';
import { newLeaseId } from '../../core/ids.js';
import type { Lease } from '../../core/types.js';
import { decodeEvent, encodeReason } from './codec.js';
import { planFetch, type FetchPlan, type PartitionPeek } from './fetch-plan.js';
import { CLAIM, INIT_GROUP, PEEK, RENEW, SETTLE } from './lua/scripts.js';
import * as retention from './retention.js';
import { checkStart, partitionList, scopeOf, startArgs, type GroupMeta, type RedisStore } from './store.js';

/** Groups and per-event leases on Redis: each partition's deliveries are claimed, renewed and settled by one script on its slot. */
export class RedisLeases implements LeaseStore {
  readonly #store: RedisStore;
  /** Where each group's next fetch starts its round-robin walk. */
  readonly #rotation = new Map<string, number>();

  constructor(store: RedisStore) {
    this.#store = store;
  }

  /**
   * Sets the group's start in every partition (only where it has no state
   * yet), then records it in the stream's group catalog: a createGroup cut
   * short leaves no catalog entry, and a retry completes it.
   */
  async createGroup(stream: string, group: string, spec: GroupSpec): Promise<void> {
    // Looked up afresh: the stream may have been deleted (and created again) since it was cached.
    this.#store.forget(stream);
    const meta = await this.#store.stream(stream);
    const ctx = { action: `create group "${group}" on stream "${stream}"`, stream, group, writes: true };
    const covered = partitionList(stream, meta.partitions, spec.partitions ?? null);
    checkStart(stream, group, meta, spec.start, covered);
    const exists = await this.#store.command(['hexists', this.#store.keys.groups(stream), group], { ...ctx, writes: false });
    if (exists === 1) throw new RheoError('already_exists', `group "${group}" already exists on stream "${stream}"`, { stream, group });
    await retention.finishGroupDeletion(this.#store, stream, group, meta.partitions);
    await Promise.all(
      covered.map((p) => this.#store.group(INIT_GROUP, stream, group, p, startArgs(spec.start, p), ctx)),
    );
    const g: GroupMeta = { maxAttempts: spec.maxAttempts };
    if (spec.partitions) g.partitions = [...spec.partitions];
    const created = await this.#store.command(['hsetnx', this.#store.keys.groups(stream), group, JSON.stringify(g)], ctx);
    if (created === 0) throw new RheoError('already_exists', `group "${group}" already exists on stream "${stream}"`, { stream, group });
  }

  async listGroups(stream: string): Promise<string[]> {
    await this.#store.stream(stream);
    const names = (await this.#store.command(['hkeys', this.#store.keys.groups(stream)], { action: `list groups of stream "${stream}"`, stream, writes: false })) as string[];
    return names.sort();
  }

  /**
   * Two steps on a multi-partition fetch: PEEK reads the sizes of each
   * partition's next claimable deliveries (one script per partition, in
   * parallel), fetch-plan.ts walks them round-robin exactly as the memory
   * backend's claim does, and CLAIM takes each partition's share. Concurrent
   * fetches may claim part of a share first; CLAIM then takes the next
   * claimable ones instead, and each delivery is still claimed once because
   * every CLAIM is atomic on its partition.
   */
  async fetch(stream: string, group: string, request: FetchRequest): Promise<Lease[]> {
    const { meta, g } = await this.#store.groupMeta(stream, group);
    const partitions = scopeOf(stream, group, meta, g, request.partitions);
    const rotationKey = `${stream}\u0000${group}`;
    const turn = this.#rotation.get(rotationKey) ?? 0;
    this.#rotation.set(rotationKey, turn + 1);
    const start = turn % partitions.length;
    const walk = partitions.map((_, k) => partitions[(start + k) % partitions.length]!);
    const ctx = { action: `fetch from group "${group}" of stream "${stream}"`, stream, group, writes: true };
    // One order for the whole fetch: its spent deliveries die by partition and sequence.
    const order = this.#store.nextDeathOrder();
    let plan: FetchPlan;
    if (walk.length === 1) {
      // No extra turn: the walk ends at the limit, so a spent delivery after
      // the last claim waits for the next fetch (issue 12). Short of the
      // limit, CLAIM dead-letters every spent delivery it passes anyway.
      plan = { shares: [{ partition: walk[0]!, claims: request.limit, bytes: request.maxBytes, first: true, extraTurn: false }] };
    } else {
      const peek = (p: number, limit: number): Promise<PartitionPeek> =>
        this.#store.group(PEEK, stream, group, p, [g.maxAttempts, limit, request.maxBytes], ctx).then((reply) => {
          const [sizes, more] = reply as [number[], number];
          return { partition: p, sizes, more: more === 1 };
        });
      // The walk takes at most ceil(limit / n) from each of n partitions
      // that all have that many, so peek that many first. A partition
      // exhausted short of its share leaves the others to fill the fetch:
      // only then peek again up to the limit. A list cut by the byte budget
      // stops the walk there, as it would with the full peek.
      const share = Math.ceil(request.limit / walk.length);
      let peeks = await Promise.all(walk.map((p) => peek(p, share)));
      if (share < request.limit && peeks.some((p) => p.sizes.length < share && !p.more)) {
        peeks = await Promise.all(walk.map((p) => peek(p, request.limit)));
      }
      plan = planFetch(peeks, request.limit, request.maxBytes);
    }
    const claimed = await Promise.all(
      plan.shares.map(async (share) => {
        if (share.claims === 0 && !share.extraTurn) return [];
        // One unguessable token per share; the k-th claim's lease id is the token and k (CLAIM builds them).
        const token = `${newLeaseId()}.`;
        const [now, rows] = (await this.#store.group(
          CLAIM,
          stream,
          group,
          share.partition,
          [
            g.maxAttempts,
            share.claims,
            share.bytes,
            share.first ? '1' : '0',
            share.extraTurn ? '1' : '0',
            request.leaseMs,
            request.consumerId,
            order,
            token,
          ],
          ctx,
        )) as [string, Array<[number, number, string, string]>];
        const leasedAt = Number(now);
        return rows.map(([seq, attempt, t, d], k): Lease => {
          return {
            leaseId: `${token}${k + 1}`,
            receipt: receiptOf(stream, group, share.partition, seq),
            stream,
            group,
            consumerId: request.consumerId,
            attempt,
            leasedAt: new Date(leasedAt),
            expiresAt: new Date(leasedAt + request.leaseMs),
            event: decodeEvent(stream, share.partition, seq, t, d),
          };
        });
      }),
    );
    // The walk's order: round by round, partitions in rotation order.
    const leases: Lease[] = [];
    for (let round = 0; leases.length < claimed.reduce((n, c) => n + c.length, 0); round++) {
      for (const list of claimed) if (list[round]) leases.push(list[round]!);
    }
    return leases;
  }

  async renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    const out: RenewResult[] = new Array(refs.length);
    await Promise.all(
      [...groupRefs(refs)].map(async ([, indexes]) => {
        const first = refs[indexes[0]!]!;
        const args: (string | number)[] = [leaseMs];
        for (const i of indexes) args.push(refs[i]!.sequence, refs[i]!.leaseId);
        const ctx = { action: `renew leases of group "${first.group}" on stream "${first.stream}"`, stream: first.stream, group: first.group, writes: true };
        const [now, oks] = (await this.#store.group(RENEW, first.stream, first.group, first.partition, args, ctx)) as [string, number[]];
        indexes.forEach((i, k) => {
          const ref = refs[i]!;
          out[i] =
            oks[k] === 1
              ? { ok: true, expiresAt: new Date(Number(now) + leaseMs) }
              : { ok: false, error: staleLease(ref.stream, ref.group, `delivery ${ref.partition}/${ref.sequence} is not leased under this lease id`) };
        });
      }),
    );
    return out;
  }

  async settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    const out: SettleOutcome[] = new Array(ops.length);
    // Dead letters of one call die in the order of its ops, across partitions
    // too; an ack never dead-letters, so it takes no order.
    const orders = ops.map((op) => (op.kind === 'ack' ? 0 : this.#store.nextDeathOrder()));
    await Promise.all(
      [...groupRefs(ops)].map(async ([, indexes]) => {
        const first = ops[indexes[0]!]!;
        const ctx = { action: `settle leases of group "${first.group}" on stream "${first.stream}"`, stream: first.stream, group: first.group, writes: true };
        let g: GroupMeta;
        try {
          g = (await this.#store.groupMeta(first.stream, first.group)).g;
        } catch (error) {
          // A lease of a group or stream that does not exist is stale, like any other unknown lease.
          if (error instanceof RheoError && (error.code === 'stream_not_found' || error.code === 'group_not_found')) {
            for (const i of indexes) out[i] = { ok: false, error: staleOf(ops[i]!) };
            return;
          }
          throw error;
        }
        const allAcks = indexes.every((i) => ops[i]!.kind === 'ack');
        const args: (string | number)[] = [g.maxAttempts, allAcks ? 'A' : 'G'];
        for (const i of indexes) {
          const op = ops[i]!;
          if (allAcks) {
            args.push(op.sequence, op.leaseId);
            continue;
          }
          const reason = op.kind === 'nack' || op.kind === 'reject' ? encodeReason(op.reason) : 'n';
          args.push(op.kind, op.sequence, op.leaseId, reason, op.kind === 'nack' ? op.delayMs : 0, orders[i]!);
        }
        if (first.partition >= (await this.#store.stream(first.stream)).partitions) {
          for (const i of indexes) out[i] = { ok: false, error: staleOf(ops[i]!) };
          return;
        }
        const oks = (await this.#store.group(SETTLE, first.stream, first.group, first.partition, args, ctx)) as number[];
        indexes.forEach((i, k) => {
          out[i] = oks[k] === 1 ? { ok: true } : { ok: false, error: staleOf(ops[i]!) };
        });
      }),
    );
    return out;
  }
}

/** Refs grouped by the script call that serves them: one per (stream, group, partition). */
function groupRefs(refs: LeaseRef[]): Map<string, number[]> {
  const groups = new Map<string, number[]>();
  refs.forEach((ref, i) => {
    const key = `${ref.stream}\u0000${ref.group}\u0000${ref.partition}`;
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push(i);
  });
  return groups;
}

function staleOf(ref: LeaseRef): RheoError {
  return staleLease(ref.stream, ref.group, `delivery ${ref.partition}/${ref.sequence} is not leased under this lease id`);
}
