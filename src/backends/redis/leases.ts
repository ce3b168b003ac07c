import type { BlockingFetchResult, FetchRequest, GroupSpec, LeaseRef, LeaseStore, RenewResult, SettleOp, SettleOutcome } from '../../core/backend.js';
import { receiptOf } from '../../core/backend.js';
import { RheoError, staleLease } from '../../core/errors.js';
import { newLeaseId } from '../../core/ids.js';
import type { Lease } from '../../core/types.js';
import { decodeEvent, encodeReason } from './codec.js';
import { planCounts, planFetch, type FetchPlan, type FetchShare, type PartitionPeek } from './fetch-plan.js';
import type { RedisClientLike } from './connection.js';
import { CLAIM, INIT_GROUP, PEEK, RENEW, SETTLE } from './lua/scripts.js';
import * as retention from './retention.js';
import { checkStart, partitionList, scopeOf, startArgs } from './partition-scope.js';
import type { GroupMeta, RedisStore } from './store.js';

/** Groups and per-event leases on Redis: each partition's deliveries are claimed, renewed and settled by one script on its slot. */
export class RedisLeases implements LeaseStore {
  readonly #store: RedisStore;
  /** Where each group's next fetch starts its round-robin walk. */
  readonly #rotation = new Map<string, number>();
  /**
   * Per stream partition, its largest event size ever appended as the last
   * PEEK or CLAIM there answered (-1: unknown). It only grows while the
   * stream lives, and every CLAIM that relies on it checks it again.
   */
  readonly #largest = new Map<string, number>();

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
   * A multi-partition fetch walks the partitions round-robin, exactly as the
   * memory backend's claim does, and each CLAIM (atomic on its partition)
   * takes one partition's share; concurrent fetches may claim part of a
   * share first, and CLAIM then takes the next claimable ones instead.
   *
   * - When no event of the walked partitions is large enough for the byte
   *   budget to stop the walk (the limit times each one's largest event size
   *   ever appended fits in `maxBytes`), the shares depend on how many
   *   deliveries each partition has, not on their sizes: CLAIM takes them
   *   at once, and a partition that comes back short has fewer than the walk
   *   asked, so the walk is planned again with that known and the others
   *   asked for the rest (one round in the common case). Each CLAIM checks
   *   the largest size itself, against the one the plan assumed.
   * - Otherwise (a larger event, or a size the process has not seen yet),
   *   PEEK first reads the sizes of each partition's next claimable
   *   deliveries and fetch-plan.ts walks them with the budget.
   */
  async fetch(stream: string, group: string, request: FetchRequest): Promise<Lease[]> {
    const { meta, g } = this.#store.cachedGroupMeta(stream, group) ?? (await this.#store.groupMeta(stream, group));
    const partitions = scopeOf(stream, group, meta, g, request.partitions);
    const walk = this.#walk(stream, group, partitions);
    const claim = this.#claimCall(stream, group, request, g);
    if (walk.length === 1) {
      // No extra turn: the walk ends at the limit, so a spent delivery after
      // the last claim waits for the next fetch (issue 12). Short of the
      // limit, CLAIM dead-letters every spent delivery it passes anyway.
      const { leases } = await this.#claim(claim, walk[0]!, wholeShare(request), null);
      return leases;
    }
    const bound = Math.floor(request.maxBytes / request.limit);
    if (walk.every((p) => this.#knownWithin(stream, p, bound))) {
      const claimed = await this.#claimByCounts(claim, walk, bound);
      if (claimed) return interleave(claimed);
    }
    return interleave(await this.#claimBySizes(claim, walk));
  }

  /**
   * Capability `blockingFetch` (blocking-fetch.ts): the wait on the scope's
   * partition logs after the tails claims of this process saw, and behind
   * it the fetch's claims. On one partition that is one CLAIM; on several,
   * the first round of the walk by counts, one CLAIM per partition (what a
   * fetch after a pub/sub wake-up sends too), and the rest of the walk, if
   * any, on the main connection. `null` (nothing claimed) on a cluster, where
   * the capability is off, and where a partition's tail is not known yet or
   * the walk would go by sizes (a partition that may hold an event large
   * enough for the byte budget to stop it).
   */
  async fetchAfterAppend(stream: string, group: string, request: FetchRequest, timeoutMs: number, signal: AbortSignal): Promise<BlockingFetchResult | null> {
    if (this.#store.cluster) return null;
    const known = this.#store.cachedGroupMeta(stream, group);
    if (!known) return null;
    const partitions = scopeOf(stream, group, known.meta, known.g, request.partitions);
    const blocking = this.#store.blocking;
    const waits: Array<{ key: string; after: number }> = [];
    for (const p of partitions) {
      const tail = blocking.tail(stream, group, p);
      if (tail === undefined) return null;
      waits.push({ key: this.#store.keys.partition(stream, p).log, after: tail });
    }
    const claim = this.#claimCall(stream, group, request, known.g);
    if (partitions.length === 1) {
      const got = await blocking.run(waits, timeoutMs, signal, claim.ctx, (client) => this.#claim(claim, partitions[0]!, wholeShare(request), null, client));
      return got && { leases: got.found.leases, appended: got.appended };
    }
    const bound = Math.floor(request.maxBytes / request.limit);
    if (!partitions.every((p) => this.#knownWithin(stream, p, bound))) return null;
    const walk = this.#walk(stream, group, partitions);
    const wait = { appended: null as boolean | null };
    const claimed = await this.#claimByCounts(claim, walk, bound, async (asked, send) => {
      const got = await blocking.run(waits, timeoutMs, signal, claim.ctx, (client) => Promise.all(asked.map((k) => send(k, client))));
      if (got === null) return null;
      wait.appended = got.appended;
      return got.found;
    });
    if (claimed === undefined || wait.appended === null) return null;
    // A partition outgrew the plan's bound: what the others claimed went back; walk by sizes.
    const leases = claimed ?? (await this.#claimBySizes(claim, walk));
    return { leases: interleave(leases), appended: wait.appended };
  }

  /** The scope in this fetch's order: round-robin, starting one partition further each fetch of the group. */
  #walk(stream: string, group: string, partitions: number[]): number[] {
    const rotationKey = `${stream}\u0000${group}`;
    const turn = this.#rotation.get(rotationKey) ?? 0;
    this.#rotation.set(rotationKey, turn + 1);
    const start = turn % partitions.length;
    return partitions.map((_, k) => partitions[(start + k) % partitions.length]!);
  }

  #claimCall(stream: string, group: string, request: FetchRequest, g: GroupMeta): ClaimCall {
    return {
      stream,
      group,
      request,
      maxAttempts: g.maxAttempts,
      ctx: { action: `fetch from group "${group}" of stream "${stream}"`, stream, group, writes: true },
      // One order for the whole fetch: its spent deliveries die by partition and sequence.
      order: this.#store.nextDeathOrder(),
    };
  }

  /**
   * The walk by counts (see fetch). `null` when a partition refused because
   * it now holds an event larger than `bound`: what the others claimed is
   * released (their attempts restored) and the caller walks by sizes.
   * `firstRound` sends the first round's claims instead of the main
   * connection (a blocking fetch: `send` them on its client); when it
   * answers `null` nothing was sent, and neither is anything else: `undefined`.
   */
  async #claimByCounts(claim: ClaimCall, walk: number[], bound: number, firstRound: FirstRound | null = null): Promise<Lease[][] | null | undefined> {
    const known = walk.map(() => Number.POSITIVE_INFINITY);
    const got: Lease[][] = walk.map(() => []);
    for (let round = 0; ; round++) {
      const asks = planCounts(known, claim.request.limit).map((n, k) => n - got[k]!.length);
      if (asks.every((n) => n === 0)) return got;
      const asked = walk.flatMap((_, k) => (asks[k]! > 0 ? [k] : []));
      const send = (k: number, client: RedisClientLike | null = null): Promise<ClaimReply> =>
        this.#claim(claim, walk[k]!, { claims: asks[k]!, bytes: claim.request.maxBytes, first: false, extraTurn: false }, bound, client);
      const replies = round === 0 && firstRound !== null ? await firstRound(asked, send) : await this.#store.burst(asked, (k) => send(k));
      if (replies === null) return undefined;
      let refused = false;
      let short = false;
      replies.forEach((reply, j) => {
        const k = asked[j]!;
        if (reply.refused) {
          refused = true;
          return;
        }
        got[k]!.push(...reply.leases);
        if (reply.leases.length < asks[k]!) {
          known[k] = got[k]!.length;
          short = true;
        }
      });
      if (refused) {
        const ops: SettleOp[] = got.flat().map((lease) => ({ ...refOf(lease), kind: 'release' }));
        if (ops.length > 0) await this.settle(ops);
        return null;
      }
      if (!short) return got;
    }
  }

  /** Whether the partition's largest event size is known (not -1 or unseen) and at most `bound`. */
  #knownWithin(stream: string, partition: number, bound: number): boolean {
    const largest = this.#largest.get(largestKey(stream, partition)) ?? -1;
    return largest >= 0 && largest <= bound;
  }

  /** The walk by sizes: PEEK, plan with the budget (fetch-plan.ts), CLAIM each share. */
  async #claimBySizes(claim: ClaimCall, walk: number[]): Promise<Lease[][]> {
    const { stream, group, request } = claim;
    const peek = (p: number, limit: number): Promise<PartitionPeek> =>
      this.#store.group(PEEK, stream, group, p, [claim.maxAttempts, limit, request.maxBytes], claim.ctx).then((reply) => {
        const [sizes, more, largest] = reply as [number[], number, number];
        this.#largest.set(largestKey(stream, p), largest);
        return { partition: p, sizes, more: more === 1 };
      });
    // The walk takes at most ceil(limit / n) from each of n partitions
    // that all have that many, so peek that many first. A partition
    // exhausted short of its share leaves the others to fill the fetch:
    // only then peek again up to the limit. A list cut by the byte budget
    // stops the walk there, as it would with the full peek.
    const share = Math.ceil(request.limit / walk.length);
    let peeks = await this.#store.burst(walk, (p) => peek(p, share));
    if (share < request.limit && peeks.some((p) => p.sizes.length < share && !p.more)) {
      peeks = await this.#store.burst(walk, (p) => peek(p, request.limit));
    }
    const plan: FetchPlan = planFetch(peeks, request.limit, request.maxBytes);
    // A share with nothing to claim and no spent deliveries to pass sends no CLAIM.
    const sending = plan.shares.filter((s) => s.claims > 0 || s.extraTurn);
    const claimed = await this.#store.burst(sending, async (s) => (await this.#claim(claim, s.partition, s, null)).leases);
    return plan.shares.map((s) => claimed[sending.indexOf(s)] ?? []);
  }

  /**
   * One CLAIM of one partition's share; `bound`: the largest event size the
   * caller's plan assumed (null: none); `on`: a blocking fetch's connection.
   */
  async #claim(
    claim: ClaimCall,
    partition: number,
    share: Pick<FetchShare, 'claims' | 'bytes' | 'first' | 'extraTurn'>,
    bound: number | null,
    on: RedisClientLike | null = null,
  ): Promise<ClaimReply> {
    const { stream, group, request } = claim;
    // One unguessable token per share; the k-th claim's lease id is the token and k (CLAIM builds them).
    const token = `${newLeaseId()}.`;
    const [now, rows, largest, tail] = (await this.#store.group(
      CLAIM,
      stream,
      group,
      partition,
      [
        claim.maxAttempts,
        share.claims,
        share.bytes,
        share.first ? '1' : '0',
        share.extraTurn ? '1' : '0',
        request.leaseMs,
        request.consumerId,
        claim.order,
        token,
        bound === null ? '' : bound,
      ],
      claim.ctx,
      on,
    )) as [string, Array<[number, number, string, string]> | 0, number, number?];
    this.#largest.set(largestKey(stream, partition), largest);
    if (rows === 0) return { leases: [], refused: true };
    if (!this.#store.cluster) this.#store.blocking.saw(stream, group, partition, tail ?? -1);
    const leasedAt = Number(now);
    const leases = rows.map(([seq, attempt, t, d], k): Lease => {
      return {
        leaseId: `${token}${k + 1}`,
        receipt: receiptOf(stream, group, partition, seq),
        stream,
        group,
        consumerId: request.consumerId,
        attempt,
        leasedAt: new Date(leasedAt),
        expiresAt: new Date(leasedAt + request.leaseMs),
        event: decodeEvent(stream, partition, seq, t, d),
      };
    });
    return { leases, refused: false };
  }

  async renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    const out: RenewResult[] = new Array(refs.length);
    await this.#store.burst([...groupRefs(refs)], async ([, indexes]) => {
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
    });
    return out;
  }

  async settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    const out: SettleOutcome[] = new Array(ops.length);
    // Dead letters of one call die in the order of its ops, across partitions
    // too; an ack never dead-letters, so it takes no order.
    const orders = ops.map((op) => (op.kind === 'ack' ? 0 : this.#store.nextDeathOrder()));
    await this.#store.burst([...groupRefs(ops)], async ([, indexes]) => {
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
    });
    return out;
  }
}

/** One CLAIM's answer: its leases, or `refused` when its partition outgrew the plan's bound. */
interface ClaimReply {
  leases: Lease[];
  refused: boolean;
}

/** The first round of a walk by counts, sent by the caller: the walk's indexes asked, and how to send one's claim on a given client. */
type FirstRound = (asked: number[], send: (k: number, client: RedisClientLike) => Promise<ClaimReply>) => Promise<ClaimReply[] | null>;

/** A whole fetch's share, for a scope of one partition. */
function wholeShare(request: FetchRequest): Pick<FetchShare, 'claims' | 'bytes' | 'first' | 'extraTurn'> {
  return { claims: request.limit, bytes: request.maxBytes, first: true, extraTurn: false };
}

/** What every CLAIM of one fetch shares. */
interface ClaimCall {
  stream: string;
  group: string;
  request: FetchRequest;
  maxAttempts: number;
  ctx: { action: string; stream: string; group: string; writes: boolean };
  order: number;
}

function largestKey(stream: string, partition: number): string {
  return `${stream}\u0000${partition}`;
}

function refOf(lease: Lease): LeaseRef {
  return { stream: lease.stream, group: lease.group, partition: lease.event.partition, sequence: lease.event.sequence, leaseId: lease.leaseId };
}

/** The walk's order: round by round, partitions in rotation order. */
function interleave(claimed: Lease[][]): Lease[] {
  const total = claimed.reduce((n, list) => n + list.length, 0);
  const leases: Lease[] = [];
  for (let round = 0; leases.length < total; round++) {
    for (const list of claimed) if (list[round]) leases.push(list[round]!);
  }
  return leases;
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
