import type { CommitOp, GroupMembership, HeartbeatRequest, MemberView, OwnedPartition, OwnershipFence, SettleOutcome } from '../../core/backend.js';
import { RheoError, invalidPartition } from '../../core/errors.js';
import {
  assertWholeStreamGroup,
  commitBeyondLog,
  emptySlot,
  groupModeConflict,
  heartbeatStep,
  leaveStep,
  releaseStep,
  staleGeneration,
  type MembershipState,
  type StepReport,
  membershipView,
} from '../../core/membership.js';
import type { RheoEvent } from '../../core/types.js';
import { decodeEvent, encodeReason, entryFields } from './codec.js';
import type { FailureContext } from './errors.js';
import type { RedisClientLike } from './connection.js';
import type { KeyLayout } from './keys.js';
import {
  LIVE_LEASES,
  MEMBERSHIP_LOAD,
  MEMBERSHIP_SAVE,
  OWNERSHIP_APPLY,
  OWNERSHIP_COMMIT,
  OWNERSHIP_READ,
  OWNERSHIP_RELEASE,
} from './lua/ownership-scripts.js';
import type { LuaScript } from './lua/scripts.js';

/**
 * Partition ownership on Redis (docs/design.md#two-ways-to-consume-a-group, `Backend.heartbeat`), ready
 * for Redis Cluster, where one script may only touch one hash slot.
 *
 * State lives in two places (lua/ownership-scripts.ts):
 *
 * - The group's membership (members and sessions, and per partition the
 *   owner, target, slot generation and revoke time of core/membership.ts)
 *   is one JSON value in the group's own slot, with a version. A heartbeat,
 *   leave or release loads it with the server's `TIME`, runs the same step
 *   as memory and PostgreSQL (core/membership.ts, so the same assignor) and
 *   saves it only if the version is unchanged (compare and set; a conflict
 *   runs the step again on the newer state). Every decision therefore has a
 *   unique, increasing version V, and the sequence of saved states is
 *   exactly the sequence of memory's steps.
 * - Each partition's fence (owner, generation, last applied V) lives in the
 *   partition's slot. readOwned and commit check it in the same script that
 *   reads or writes the partition, so they are atomic and fenced.
 *
 * After a save, the changed partitions (and the caller's owned ones) are
 * applied to their fences, one script per partition.
 *
 * Why no interleaving or crash lets two members both pass the fence of one
 * partition:
 * 1. A fence names one owner at a time, and readOwned/commit pass only for
 *    that owner at that generation; whoever passed before a fence change
 *    is fenced after it (the change and the check run on one slot, serially).
 * 2. A fence only moves forward in V: an apply carrying an older version
 *    than the last one applied is ignored, so a delayed or retried apply
 *    can never hand a partition back to a member a later decision took it
 *    from. The fence therefore always shows the owner of some saved state at
 *    least as new as every state applied to it, and in every saved state a
 *    partition has at most one owner (the two-step handover of
 *    core/membership.ts: a new owner is granted only after release, the
 *    rebalance timeout or the old owner's expiry).
 * 3. A grant raises the slot generation; an apply that brings a higher slot
 *    generation than the fence last saw raises the fence generation, so the
 *    fence of any earlier grant (the same member's included) goes stale.
 *    Replay, reset and redrive raise it in their own script (FENCING_VARIANTS).
 * 4. A release clears the fence first (the releasing member is fenced at
 *    once), then updates the membership state. A crash between the steps
 *    leaves the partition with no owner until the rebalance timeout moves
 *    it, or the releasing member's next heartbeat (the state still says it
 *    owns it) gives it back to that same member.
 * 5. A crash after a save but before its applies leaves fences behind the
 *    state: the old owner may still pass, the new one not yet; never both.
 *    The new owner's next heartbeat applies its partitions (every heartbeat
 *    applies the caller's owned partitions), which repairs it.
 *
 * Generations reported to members are the fences' (step 3), so they match
 * memory's in the absence of crashes: 1 on the first grant, +1 on each move,
 * regrant, replay, reset and redrive.
 */

/** What ownership needs from the backend: its key layout and its script and catalog calls. */
export interface OwnershipHost {
  readonly keys: KeyLayout;
  /** `now` for scripts: the injected clock's, or '' for the server's TIME. */
  now(): string;
  /** `on`: a connection of the caller's (a blocking read's) instead of the main one. */
  run(script: LuaScript, keys: string[], args: (string | number)[], ctx: FailureContext, on?: RedisClientLike | null): Promise<unknown>;
  /** Partitions of the stream and the group's covered partitions; `stream_not_found`, `group_not_found`. */
  group(stream: string, group: string): Promise<{ partitions: number; covered: number[] }>;
  nextDeathOrder(): number;
  /** Runs `call` on every item at once, their commands leaving in one socket write (store.ts). */
  burst<T, R>(items: readonly T[], call: (item: T) => Promise<R>): Promise<R[]>;
}

interface FenceView {
  owner: string;
  generation: number;
  frontier: number;
}

/** A compare-and-set that keeps losing for this long is a store under extreme contention: give up. */
const MAX_ATTEMPTS = 64;

interface StoredSlot {
  o: string | null;
  t: string | null;
  g: number;
  r: number | null;
}

interface StoredState {
  gg: number;
  m: Array<[string, number]>;
  s: StoredSlot[];
}

function decodeState(raw: string, partitions: number): MembershipState {
  if (raw === '') return { groupGeneration: 0, members: new Map(), slots: Array.from({ length: partitions }, emptySlot) };
  let stored: StoredState;
  try {
    stored = JSON.parse(raw) as StoredState;
  } catch (error) {
    throw new RheoError('internal', `the group's membership state in Redis is not valid JSON: ${(error as Error).message}`, { cause: error });
  }
  const slots = stored.s.map((x) => ({ owner: x.o, target: x.t, generation: x.g, revokedAt: x.r }));
  while (slots.length < partitions) slots.push(emptySlot());
  return { groupGeneration: stored.gg, members: new Map(stored.m), slots };
}

function encodeState(state: MembershipState): string {
  const stored: StoredState = {
    gg: state.groupGeneration,
    m: [...state.members],
    s: state.slots.map((x) => ({ o: x.owner, t: x.target, g: x.generation, r: x.revokedAt })),
  };
  return JSON.stringify(stored);
}

export class RedisOwnership {
  readonly #host: OwnershipHost;

  constructor(host: OwnershipHost) {
    this.#host = host;
  }

  async heartbeat(stream: string, group: string, request: HeartbeatRequest): Promise<MemberView> {
    const { partitions, covered } = await this.#host.group(stream, group);
    assertWholeStreamGroup(stream, group, covered, partitions);
    const ctx = { action: `heartbeat of "${request.memberId}" in group "${group}" of stream "${stream}"`, stream, group, writes: true };
    const live = await Promise.all(
      covered.map((p) => this.#host.run(LIVE_LEASES, this.#groupKeys(stream, group, p), [this.#host.now(), p], { ...ctx, writes: false })),
    );
    if (live.some((x) => Number(x) === 1)) throw groupModeConflict(stream, group);
    const mine = new Set<number>();
    const { state, fences } = await this.#step(stream, group, partitions, ctx, (s, now) => heartbeatStep(s, request, now), (s) => {
      s.slots.forEach((slot, p) => {
        if (slot.owner === request.memberId) mine.add(p);
      });
      return mine;
    });
    const owned: OwnedPartition[] = [];
    const revoking: number[] = [];
    for (const p of [...mine].sort((a, b) => a - b)) {
      const fence = fences.get(p)!;
      // A later decision already moved the fence on: not ours any more.
      if (fence.owner !== request.memberId) continue;
      owned.push({ partition: p, generation: fence.generation, frontier: fence.frontier });
      if (state.slots[p]!.target !== request.memberId) revoking.push(p);
    }
    return {
      memberId: request.memberId,
      groupGeneration: state.groupGeneration,
      owned,
      revoking,
      expiresAt: new Date(state.members.get(request.memberId) ?? 0),
    };
  }

  async leaveGroup(stream: string, group: string, memberId: string): Promise<void> {
    const { partitions } = await this.#host.group(stream, group);
    const ctx = { action: `leave of "${memberId}" from group "${group}" of stream "${stream}"`, stream, group, writes: true };
    await this.#step(stream, group, partitions, ctx, (s, now) => leaveStep(s, memberId, now));
  }

  async releasePartitions(fences: OwnershipFence[]): Promise<SettleOutcome[]> {
    const out: SettleOutcome[] = [];
    for (const fence of fences) out.push(await this.#release(fence));
    return out;
  }

  /** `on`: a blocking read's connection (blocking-fetch.ts). */
  async readOwned(fence: OwnershipFence, after: number, limit: number, maxBytes: number, on: RedisClientLike | null = null): Promise<RheoEvent[]> {
    const { partitions } = await this.#host.group(fence.stream, fence.group);
    if (fence.partition >= partitions) throw invalidPartition(fence.stream, fence.partition, partitions);
    const ctx = { action: `readOwned of stream "${fence.stream}"`, stream: fence.stream, group: fence.group, writes: false };
    const reply = await this.#host.run(
      OWNERSHIP_READ,
      this.#groupKeys(fence.stream, fence.group, fence.partition),
      [this.#host.now(), fence.partition, fence.memberId, fence.generation, after, limit],
      ctx,
      on,
    );
    if (reply === 'stale') throw staleGeneration(fence);
    const out: RheoEvent[] = [];
    let bytes = 0;
    for (const raw of reply as unknown[]) {
      const e = entryFields(raw);
      bytes += e.z;
      if (bytes > maxBytes && out.length > 0) break;
      out.push(decodeEvent(fence.stream, fence.partition, e.sequence, e.t, e.d));
    }
    return out;
  }

  async commit(ops: CommitOp[]): Promise<SettleOutcome[]> {
    return this.#host.burst(ops, (op) => this.#commit(op));
  }

  async members(stream: string, group: string): Promise<GroupMembership> {
    const { partitions } = await this.#host.group(stream, group);
    const ctx = { action: `read members of group "${group}" of stream "${stream}"`, stream, group, writes: false };
    const { state, now, raw } = await this.#load(stream, group, partitions, ctx);
    return membershipView(raw === '' ? null : state, partitions, now);
  }

  // ---- internals -------------------------------------------------------------

  async #release(fence: OwnershipFence): Promise<SettleOutcome> {
    let meta: { partitions: number };
    try {
      meta = await this.#host.group(fence.stream, fence.group);
    } catch (error) {
      if (error instanceof RheoError && (error.code === 'stream_not_found' || error.code === 'group_not_found')) return { ok: false, error: staleGeneration(fence) };
      throw error;
    }
    if (fence.partition >= meta.partitions) return { ok: false, error: staleGeneration(fence) };
    const ctx = { action: `release partition ${fence.partition} of group "${fence.group}" of stream "${fence.stream}"`, stream: fence.stream, group: fence.group, writes: true };
    const keys = this.#groupKeys(fence.stream, fence.group, fence.partition);
    const cleared = await this.#host.run(OWNERSHIP_RELEASE, keys, [this.#host.now(), fence.partition, fence.memberId, fence.generation], ctx);
    if (Number(cleared) !== 1) return { ok: false, error: staleGeneration(fence) };
    // The fence is cleared: the member can no longer read or commit. Now the
    // membership state hands the partition on (to its target, or free).
    await this.#step(fence.stream, fence.group, meta.partitions, ctx, (state) => {
      const report: StepReport = { joined: false, expired: [], rebalanced: false, changed: new Set() };
      const slot = state.slots[fence.partition];
      if (slot && slot.owner === fence.memberId && releaseStep(slot, fence.memberId, slot.generation)) report.changed.add(fence.partition);
      return report;
    });
    return { ok: true };
  }

  async #commit(op: CommitOp): Promise<SettleOutcome> {
    let partitions: number;
    try {
      ({ partitions } = await this.#host.group(op.stream, op.group));
    } catch (error) {
      if (error instanceof RheoError && (error.code === 'stream_not_found' || error.code === 'group_not_found')) return { ok: false, error: staleGeneration(op) };
      throw error;
    }
    if (op.partition >= partitions) return { ok: false, error: staleGeneration(op) };
    const ctx = { action: `commit partition ${op.partition} of group "${op.group}" of stream "${op.stream}"`, stream: op.stream, group: op.group, writes: true };
    const dead = op.deadLetters.flatMap((d) => [d.sequence, d.attempt, encodeReason(d.reason ?? null)]);
    const reply = await this.#host.run(
      OWNERSHIP_COMMIT,
      this.#groupKeys(op.stream, op.group, op.partition),
      [this.#host.now(), op.partition, op.memberId, op.generation, op.upTo, this.#host.nextDeathOrder(), ...dead],
      ctx,
    );
    if (reply === 'stale') return { ok: false, error: staleGeneration(op) };
    if (Array.isArray(reply) && reply[0] === 'beyond') return { ok: false, error: commitBeyondLog(op, op.upTo, Number(reply[1])) };
    return { ok: true };
  }

  async #load(stream: string, group: string, partitions: number, ctx: FailureContext): Promise<{ state: MembershipState; version: number; now: number; raw: string }> {
    const [v, raw, now] = (await this.#host.run(MEMBERSHIP_LOAD, [this.#host.keys.members(stream, group)], [this.#host.now()], { ...ctx, writes: false })) as [
      string,
      string,
      string,
    ];
    return { state: decodeState(raw, partitions), version: Number(v), now: Number(now), raw };
  }

  /**
   * One membership step as a compare and set on the group's state, then the
   * applies of the partitions it changed plus `alsoApply(state)` (each
   * fence after its apply is returned). A step that changes nothing writes
   * nothing; its applies carry the current version, which changes no fence.
   */
  async #step(
    stream: string,
    group: string,
    partitions: number,
    ctx: FailureContext,
    step: (state: MembershipState, now: number) => StepReport,
    alsoApply: (state: MembershipState) => Set<number> = () => new Set(),
  ): Promise<{ state: MembershipState; fences: Map<number, FenceView> }> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { state, version, now } = await this.#load(stream, group, partitions, ctx);
      const before = encodeState(state);
      const report = step(state, now);
      const after = encodeState(state);
      let saved = version;
      if (after !== before) {
        saved = Number(await this.#host.run(MEMBERSHIP_SAVE, [this.#host.keys.members(stream, group)], [version, after], ctx));
        if (saved === 0) continue;
      }
      const apply = new Set([...report.changed, ...alsoApply(state)]);
      return { state, fences: await this.#apply(stream, group, state, saved, apply, ctx) };
    }
    throw new RheoError('backend_unavailable', `${ctx.action} failed: the group's membership changed under ${MAX_ATTEMPTS} attempts in a row; retry`, {
      stream,
      group,
    });
  }

  /** Applies the state of `partitions` at `version` to their fences; returns each fence after the apply. */
  async #apply(
    stream: string,
    group: string,
    state: MembershipState,
    version: number,
    partitions: Set<number>,
    ctx: FailureContext,
  ): Promise<Map<number, FenceView>> {
    const list = [...partitions];
    const replies = await Promise.all(
      list.map((p) => {
        const slot = state.slots[p]!;
        return this.#host.run(OWNERSHIP_APPLY, this.#groupKeys(stream, group, p), [this.#host.now(), p, version, slot.owner ?? '', slot.generation], ctx) as Promise<
          [string, number, number]
        >;
      }),
    );
    const out = new Map<number, FenceView>();
    replies.forEach(([owner, generation, frontier], i) => out.set(list[i]!, { owner, generation: Number(generation), frontier: Number(frontier) }));
    return out;
  }

  #groupKeys(stream: string, group: string, partition: number): string[] {
    return [...this.#host.keys.group(stream, group, partition), this.#host.keys.owner(stream, group, partition)];
  }
}

/** Every key partition ownership keeps for a group, for whoever deletes the group: its membership, then one fence per partition. */
export function ownershipKeys(keys: KeyLayout, stream: string, group: string, partitions: number): string[] {
  const out = [keys.members(stream, group)];
  for (let p = 0; p < partitions; p++) out.push(keys.owner(stream, group, p));
  return out;
}
