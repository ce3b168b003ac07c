import type { GroupMembership, HeartbeatRequest, MemberView, OwnedPartition, OwnershipFence } from './backend.js';
import { assignPartitions } from './assignor.js';
import { RheoError } from './errors.js';

/**
 * One partition's ownership: who may read and commit it now (`owner`, fenced
 * by `generation`), and who the assignor wants to have it (`target`). While
 * they differ and the owner is alive, the partition is being revoked since
 * `revokedAt`.
 */
export interface OwnershipSlot {
  owner: string | null;
  target: string | null;
  /** Bumped on every grant to a member, so the fence of an earlier grant goes stale. */
  generation: number;
  revokedAt: number | null;
}

/** A group's membership as a backend stores it; the steps below change it in place. */
export interface MembershipState {
  groupGeneration: number;
  /** Member id → session expiry (epoch ms, store clock). */
  members: Map<string, number>;
  slots: OwnershipSlot[];
}

/** What a step did, for diagnostics and for backends that write only what changed. */
export interface StepReport {
  joined: boolean;
  /** Members dropped because their session had expired. */
  expired: string[];
  /** Whether the assignor ran (membership changed), bumping the group generation. */
  rebalanced: boolean;
  /** Partitions whose slot changed. */
  changed: Set<number>;
}

export function emptySlot(): OwnershipSlot {
  return { owner: null, target: null, generation: 0, revokedAt: null };
}

/**
 * The heartbeat of `request.memberId` at `now` (the store's clock), as the
 * contract of `Backend.heartbeat` describes it: refresh the session, drop
 * expired members (their partitions are free at once), reassign when
 * membership changed, then hand over what may move.
 */
export function heartbeatStep(state: MembershipState, request: HeartbeatRequest, now: number): StepReport {
  const joined = !state.members.has(request.memberId);
  state.members.set(request.memberId, now + request.sessionMs);
  const report: StepReport = { joined, expired: [], rebalanced: false, changed: new Set() };
  for (const [member, expiresAt] of state.members) {
    if (member !== request.memberId && expiresAt <= now) {
      state.members.delete(member);
      report.expired.push(member);
    }
  }
  report.expired.sort();
  rebalance(state, now, request.rebalanceTimeoutMs, joined || report.expired.length > 0, report);
  return report;
}

/** A member leaves: its session ends and everything it owns is free at once. */
export function leaveStep(state: MembershipState, memberId: string, now: number): StepReport {
  const report: StepReport = { joined: false, expired: [], rebalanced: false, changed: new Set() };
  if (!state.members.delete(memberId)) return report;
  rebalance(state, now, null, true, report);
  return report;
}

/**
 * Hands back an owned partition (normally a revoking one): it goes straight
 * to its target when that is another member, otherwise it is free until the
 * next heartbeat grants it. `false` (nothing changed) when the fence is stale.
 */
export function releaseStep(slot: OwnershipSlot, memberId: string, generation: number): boolean {
  if (slot.owner !== memberId || slot.generation !== generation) return false;
  slot.owner = slot.target !== null && slot.target !== memberId ? slot.target : null;
  if (slot.owner !== null) slot.generation++;
  slot.revokedAt = null;
  return true;
}

/** The caller's view after a step; `frontierOf` reads the group's frontier of a partition. */
export function memberView(state: MembershipState, memberId: string, frontierOf: (partition: number) => number): MemberView {
  const owned: OwnedPartition[] = [];
  const revoking: number[] = [];
  state.slots.forEach((slot, partition) => {
    if (slot.owner !== memberId) return;
    owned.push({ partition, generation: slot.generation, frontier: frontierOf(partition) });
    if (slot.target !== memberId) revoking.push(partition);
  });
  return {
    memberId,
    groupGeneration: state.groupGeneration,
    owned,
    revoking,
    expiresAt: new Date(state.members.get(memberId) ?? 0),
  };
}

function rebalance(
  state: MembershipState,
  now: number,
  rebalanceTimeoutMs: number | null,
  membershipChanged: boolean,
  report: StepReport,
): void {
  const { slots, members } = state;
  // Partitions of members that are gone are free at once.
  slots.forEach((slot, p) => {
    if (slot.owner !== null && !members.has(slot.owner)) {
      // No bump here: the owner check already fences the departed member,
      // and the grant that follows bumps the generation.
      slot.owner = null;
      slot.revokedAt = null;
      report.changed.add(p);
    }
  });
  const orphaned = slots.some((slot) => slot.target === null || !members.has(slot.target));
  if (membershipChanged || (orphaned && members.size > 0)) {
    const previous = slots.map((slot) => (slot.target !== null && members.has(slot.target) ? slot.target : null));
    const targets = assignPartitions(slots.length, [...members.keys()], previous);
    targets.forEach((target, p) => {
      const slot = slots[p]!;
      if (slot.target !== target) {
        slot.target = target;
        report.changed.add(p);
      }
    });
    state.groupGeneration++;
    report.rebalanced = true;
  }
  // Two-step handover: a live owner keeps a revoked partition until it
  // releases it or the rebalance timeout passes; a free one moves now.
  slots.forEach((slot, p) => {
    if (slot.owner === slot.target) {
      if (slot.revokedAt !== null) {
        slot.revokedAt = null;
        report.changed.add(p);
      }
      return;
    }
    if (slot.owner !== null) {
      if (slot.revokedAt === null) {
        slot.revokedAt = now;
        report.changed.add(p);
      }
      if (rebalanceTimeoutMs === null || now - slot.revokedAt < rebalanceTimeoutMs) return;
    }
    slot.owner = slot.target;
    slot.revokedAt = null;
    slot.generation++;
    report.changed.add(p);
  });
}

/** Live members (session not expired at `now`) and the owner of each of `partitions` partitions; `state` null when nobody ever joined. */
export function membershipView(state: MembershipState | null, partitions: number, now: number): GroupMembership {
  const owners: Record<number, string | null> = {};
  for (let p = 0; p < partitions; p++) owners[p] = state?.slots[p]?.owner ?? null;
  if (!state) return { groupGeneration: 0, members: [], owners };
  const members = [...state.members]
    .filter(([, expiresAt]) => expiresAt > now)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([memberId, expiresAt]) => {
      const mine: number[] = [];
      const revoking: number[] = [];
      state.slots.forEach((slot, p) => {
        if (slot.owner !== memberId) return;
        mine.push(p);
        if (slot.target !== memberId) revoking.push(p);
      });
      return { memberId, expiresAt: new Date(expiresAt), partitions: mine, revoking };
    });
  return { groupGeneration: state.groupGeneration, members, owners };
}

/** The fence of an ownership call no longer matches the partition's owner and generation. */
export function staleGeneration(fence: OwnershipFence, detail = 'the partition is no longer owned under this generation'): RheoError {
  return new RheoError(
    'stale_generation',
    `stale generation on stream "${fence.stream}", group "${fence.group}", partition ${fence.partition}: member "${fence.memberId}" at generation ${fence.generation}: ${detail}`,
    { stream: fence.stream, group: fence.group },
  );
}

export function groupModeConflict(stream: string, group: string): RheoError {
  return new RheoError(
    'group_mode_conflict',
    `group "${group}" of stream "${stream}" has live competing-consumer leases: partition ownership can start once they are settled or expired`,
    { stream, group },
  );
}

/**
 * Partition ownership assigns every partition of the stream, so a group
 * created with `{ partitions }` (a subset) cannot be consumed that way.
 * Checked by every backend's heartbeat before anything is written.
 */
export function assertWholeStreamGroup(stream: string, group: string, covered: readonly number[], partitions: number): void {
  if (covered.length === partitions) return;
  throw new RheoError(
    'unsupported',
    `partition ownership needs a group that covers every partition: group "${group}" of stream "${stream}" covers ${covered.length} of ${partitions} (partitions ${covered.join(', ')})`,
    { stream, group },
  );
}

/** A commit past the partition's high watermark would skip events not yet appended. */
export function commitBeyondLog(fence: OwnershipFence, upTo: number, highWatermark: number): RheoError {
  return new RheoError(
    'invalid_argument',
    `commit on stream "${fence.stream}", group "${fence.group}", partition ${fence.partition}: upTo ${upTo} is past the partition's last sequence ${highWatermark}`,
    { stream: fence.stream, group: fence.group },
  );
}
