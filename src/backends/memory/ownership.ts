import type { CommitOp, GroupMembership, HeartbeatRequest, MemberView, OwnershipFence, SettleOutcome } from '../../core/backend.js';
import {
  assertWholeStreamGroup,
  commitBeyondLog,
  emptySlot,
  groupModeConflict,
  heartbeatStep,
  leaveStep,
  memberView,
  releaseStep,
  staleGeneration,
  type MembershipState,
  type OwnershipSlot,
  type StepReport,
  membershipView,
} from '../../core/membership.js';
import type { GroupState } from './group-state.js';
import type { StreamLog } from './stream-log.js';

/**
 * Partition ownership on the memory backend: the membership steps of
 * core/membership.ts over state held in the group, one synchronous step per
 * call (so each is atomic), timed by the backend's clock.
 */
export function heartbeat(log: StreamLog, g: GroupState, request: HeartbeatRequest, now: number): { view: MemberView; report: StepReport } {
  assertWholeStreamGroup(log.name, g.name, g.partitions, log.partitions);
  if (g.parts.some((part) => part.hasLiveLease(now))) throw groupModeConflict(log.name, g.name);
  g.membership ??= { groupGeneration: 0, members: new Map(), slots: Array.from({ length: log.partitions }, emptySlot) };
  const report = heartbeatStep(g.membership, request, now);
  return { view: memberView(g.membership, request.memberId, (p) => g.parts[p]!.frontier()), report };
}

export function leave(g: GroupState, memberId: string, now: number): StepReport | null {
  return g.membership ? leaveStep(g.membership, memberId, now) : null;
}

/** The slot the fence names when it is still current, else `null`. */
export function fencedSlot(g: GroupState | undefined, fence: OwnershipFence): OwnershipSlot | null {
  const slot = g?.membership?.slots[fence.partition];
  return slot && slot.owner === fence.memberId && slot.generation === fence.generation ? slot : null;
}

export function release(g: GroupState | undefined, fence: OwnershipFence): SettleOutcome {
  const slot = g?.membership?.slots[fence.partition];
  return slot && releaseStep(slot, fence.memberId, fence.generation) ? { ok: true } : { ok: false, error: staleGeneration(fence) };
}

/**
 * One offset commit: dead letters in `(frontier, upTo]` not already dead,
 * then the frontier moves to `upTo` (never backwards). Checked before
 * anything changes, so a failed op changes nothing.
 */
export function commit(
  log: StreamLog | undefined,
  g: GroupState | undefined,
  op: CommitOp,
  addDeadLetter: (g: GroupState, partition: number, sequence: number, attempt: number, reason: string | null) => void,
): SettleOutcome {
  if (!log || !g || !fencedSlot(g, op)) return { ok: false, error: staleGeneration(op) };
  const highWatermark = log.highWatermark(op.partition);
  if (op.upTo > highWatermark) return { ok: false, error: commitBeyondLog(op, op.upTo, highWatermark) };
  const part = g.parts[op.partition]!;
  const frontier = part.frontier();
  if (op.upTo <= frontier) return { ok: true };
  for (const dead of op.deadLetters) {
    if (dead.sequence <= frontier || g.deadLetters.find(op.partition, dead.sequence)) continue;
    addDeadLetter(g, op.partition, dead.sequence, dead.attempt, dead.reason);
  }
  part.commitTo(op.upTo);
  return { ok: true };
}

/** Live members (session not expired at `now`) and the owner of every partition. */
export function membership(log: StreamLog, state: MembershipState | null, now: number): GroupMembership {
  return membershipView(state, log.partitions, now);
}

/** A replay or reset of these partitions fences their owners: they must re-read from the frontier. */
export function bumpGenerations(g: GroupState, partitions: number[]): void {
  for (const p of partitions) {
    const slot = g.membership?.slots[p];
    if (slot && slot.owner !== null) slot.generation++;
  }
}
