import type {
  CommitOp,
  GroupMembership,
  HeartbeatRequest,
  MemberView,
  OwnershipFence,
  OwnershipStore,
  SettleOutcome,
} from '../../core/backend.js';
import { invalidPartition } from '../../core/errors.js';
import type { RheoEvent } from '../../core/types.js';
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
  type OwnershipSlot,
  membershipView,
} from '../../core/membership.js';
import type { GroupState } from './group-state.js';
import type { MemoryStore } from './store.js';
import type { StreamLog } from './stream-log.js';

/**
 * Partition ownership on the memory backend: the membership steps of
 * core/membership.ts over state held in the group, one synchronous step per
 * call (so each is atomic), timed by the backend's clock.
 */
export class MemoryOwnership implements OwnershipStore {
  readonly #store: MemoryStore;

  constructor(store: MemoryStore) {
    this.#store = store;
  }

  async heartbeat(stream: string, group: string, request: HeartbeatRequest): Promise<MemberView> {
    const { log, g } = this.#store.group(stream, group);
    const now = this.#store.clock.now();
    assertWholeStreamGroup(log.name, g.name, g.partitions, log.partitions);
    if (g.parts.some((part) => part.hasLiveLease(now))) throw groupModeConflict(log.name, g.name);
    g.membership ??= { groupGeneration: 0, members: new Map(), slots: Array.from({ length: log.partitions }, emptySlot) };
    heartbeatStep(g.membership, request, now);
    return memberView(g.membership, request.memberId, (p) => g.parts[p]!.frontier());
  }

  async leaveGroup(stream: string, group: string, memberId: string): Promise<void> {
    const { g } = this.#store.group(stream, group);
    if (g.membership) leaveStep(g.membership, memberId, this.#store.clock.now());
  }

  async releasePartitions(fences: OwnershipFence[]): Promise<SettleOutcome[]> {
    this.#store.assertOpen();
    return fences.map((fence) => {
      const slot = this.#store.streams.get(fence.stream)?.groups.get(fence.group)?.membership?.slots[fence.partition];
      return slot && releaseStep(slot, fence.memberId, fence.generation) ? { ok: true } : { ok: false, error: staleGeneration(fence) };
    });
  }

  async readOwned(fence: OwnershipFence, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    const { log, g } = this.#store.group(fence.stream, fence.group);
    if (fence.partition >= log.partitions) throw invalidPartition(fence.stream, fence.partition, log.partitions);
    if (!fencedSlot(g, fence)) throw staleGeneration(fence);
    return log.read(fence.partition, after, limit, maxBytes);
  }

  async commit(ops: CommitOp[]): Promise<SettleOutcome[]> {
    this.#store.assertOpen();
    const now = this.#store.clock.now();
    return ops.map((op) => {
      const s = this.#store.streams.get(op.stream);
      return commitOne(s?.log, s?.groups.get(op.group), op, (g, partition, sequence, attempt, reason) =>
        g.deadLetters.add({ id: this.#store.nextDeadLetterId(), partition, sequence, attempt, reason, deadLetteredAt: now }),
      );
    });
  }

  /** Live members (session not expired now) and the owner of every partition. */
  async members(stream: string, group: string): Promise<GroupMembership> {
    const { log, g } = this.#store.group(stream, group);
    return membershipView(g.membership, log.partitions, this.#store.clock.now());
  }
}

/** The slot the fence names when it is still current, else `null`. */
function fencedSlot(g: GroupState, fence: OwnershipFence): OwnershipSlot | null {
  const slot = g.membership?.slots[fence.partition];
  return slot && slot.owner === fence.memberId && slot.generation === fence.generation ? slot : null;
}

/**
 * One offset commit: dead letters in `(frontier, upTo]` not already dead,
 * then the frontier moves to `upTo` (never backwards). Checked before
 * anything changes, so a failed op changes nothing.
 */
function commitOne(
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

/** A replay or reset of these partitions fences their owners: they must re-read from the frontier. */
export function bumpGenerations(g: GroupState, partitions: number[]): void {
  for (const p of partitions) {
    const slot = g.membership?.slots[p];
    if (slot && slot.owner !== null) slot.generation++;
  }
}
