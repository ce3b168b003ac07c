import { describe, expect, it } from 'vitest';
import {
  assertWholeStreamGroup,
  commitBeyondLog,
  emptySlot,
  groupModeConflict,
  heartbeatStep,
  leaveStep,
  memberView,
  membershipView,
  releaseStep,
  staleGeneration,
  type MembershipState,
  type OwnershipSlot,
} from '../../src/core/membership.js';
import { thrown } from '../support/thrown.js';

function state(partitions: number): MembershipState {
  return { groupGeneration: 0, members: new Map(), slots: Array.from({ length: partitions }, emptySlot) };
}

const beat = (memberId: string, sessionMs = 10_000, rebalanceTimeoutMs = 5_000) => ({ memberId, sessionMs, rebalanceTimeoutMs });

const owners = (s: MembershipState) => s.slots.map((slot) => slot.owner);
const targets = (s: MembershipState) => s.slots.map((slot) => slot.target);

describe('emptySlot', () => {
  it('is unowned, untargeted, at generation 0 and not revoking', () => {
    expect(emptySlot()).toEqual({ owner: null, target: null, generation: 0, revokedAt: null });
    expect(emptySlot()).not.toBe(emptySlot());
  });
});

describe('heartbeatStep', () => {
  it('reports a join only for a member not yet in the group, and sets its session expiry from now', () => {
    const s = state(2);
    const first = heartbeatStep(s, beat('a', 7_000), 100);
    expect(first.joined).toBe(true);
    expect(s.members.get('a')).toBe(7_100);
    const again = heartbeatStep(s, beat('a', 3_000), 200);
    expect(again).toEqual({ joined: false, expired: [], rebalanced: false, changed: new Set() });
    expect(s.members.get('a')).toBe(3_200);
    expect(s.groupGeneration).toBe(1);
  });

  it('drops members whose session ends at or before now, reported in id order, and rebalances', () => {
    const s = state(3);
    heartbeatStep(s, beat('c', 1_000), 0);
    heartbeatStep(s, beat('b', 1_000), 0);
    heartbeatStep(s, beat('d', 1_001), 0);
    heartbeatStep(s, beat('a', 5_000), 0);
    const generation = s.groupGeneration;
    const report = heartbeatStep(s, beat('a', 5_000), 1_000);
    // b and c end exactly at now; d one millisecond later.
    expect(report.expired).toEqual(['b', 'c']);
    expect(report.joined).toBe(false);
    expect(report.rebalanced).toBe(true);
    expect([...s.members.keys()].sort()).toEqual(['a', 'd']);
    expect(s.groupGeneration).toBe(generation + 1);
  });

  it('rebalances when a member that owned nothing expires', () => {
    const s = state(1);
    heartbeatStep(s, beat('a', 60_000), 0);
    heartbeatStep(s, beat('b', 1_000), 0);
    expect(targets(s)).toEqual(['a']);
    const generation = s.groupGeneration;
    const report = heartbeatStep(s, beat('a', 60_000), 1_000);
    expect(report.expired).toEqual(['b']);
    expect(report.rebalanced).toBe(true);
    expect(s.groupGeneration).toBe(generation + 1);
  });

  it('does not rebalance while membership is unchanged and every partition has a live target', () => {
    const s = state(2);
    heartbeatStep(s, beat('a'), 0);
    const report = heartbeatStep(s, beat('a'), 1);
    expect(report.rebalanced).toBe(false);
    expect(report.changed.size).toBe(0);
    expect(s.groupGeneration).toBe(1);
  });

  it('assigns partitions that have no target even when membership is unchanged', () => {
    const s = state(2);
    s.members.set('a', 10_000);
    const report = heartbeatStep(s, beat('a'), 0);
    expect(report.joined).toBe(false);
    expect(report.rebalanced).toBe(true);
    expect(s.groupGeneration).toBe(1);
    expect(owners(s)).toEqual(['a', 'a']);
    expect([...report.changed].sort()).toEqual([0, 1]);
  });

  it('assigns a partition whose target is no longer a member', () => {
    const s = state(2);
    heartbeatStep(s, beat('a'), 0);
    // A target left behind by a member the state no longer lists.
    s.slots[1] = { owner: null, target: 'gone', generation: 4, revokedAt: null };
    const report = heartbeatStep(s, beat('a'), 1);
    expect(report.rebalanced).toBe(true);
    expect(s.slots[1]).toEqual({ owner: 'a', target: 'a', generation: 5, revokedAt: null });
    expect([...report.changed]).toEqual([1]);
  });

  it('keeps live targets sticky when it reassigns', () => {
    const s = state(4);
    heartbeatStep(s, beat('b'), 0);
    heartbeatStep(s, beat('c'), 0);
    for (const slot of s.slots) if (slot.owner !== slot.target) releaseStep(slot, slot.owner!, slot.generation);
    heartbeatStep(s, beat('b'), 0);
    expect(targets(s)).toEqual(['b', 'b', 'c', 'c']);
    // 'a' sorts first: without stickiness it would take partitions 0 and 1.
    heartbeatStep(s, beat('a'), 1);
    expect(targets(s).filter((t) => t === 'a')).toHaveLength(1);
    expect(targets(s).filter((t) => t === 'b').length + targets(s).filter((t) => t === 'c').length).toBe(3);
    const moved = targets(s).findIndex((t) => t === 'a');
    expect(s.slots[moved]!.owner).not.toBe('a');
    for (const p of [0, 1, 2, 3].filter((p) => p !== moved)) expect(s.slots[p]!.owner).toBe(s.slots[p]!.target);
  });

  it('marks a revoked partition with the time of the revoke, keeps it there, and hands it over once the rebalance timeout has passed', () => {
    const s = state(2);
    heartbeatStep(s, beat('a', 60_000, 1_000), 0);
    const join = heartbeatStep(s, beat('b', 60_000, 1_000), 50);
    expect(join.changed).toEqual(new Set([1]));
    expect(s.slots[1]).toEqual({ owner: 'a', target: 'b', generation: 1, revokedAt: 50 });
    const later = heartbeatStep(s, beat('a', 60_000, 1_000), 500);
    expect(later.changed.size).toBe(0);
    expect(s.slots[1]!.revokedAt).toBe(50);
    heartbeatStep(s, beat('a', 60_000, 1_000), 1_049);
    expect(s.slots[1]!.owner).toBe('a');
    const moved = heartbeatStep(s, beat('a', 60_000, 1_000), 1_050);
    expect(moved.changed).toEqual(new Set([1]));
    expect(s.slots[1]).toEqual({ owner: 'b', target: 'b', generation: 2, revokedAt: null });
  });

  it('moves a revoked partition at once with a rebalance timeout of 0', () => {
    const s = state(2);
    heartbeatStep(s, beat('a', 60_000, 0), 0);
    heartbeatStep(s, beat('b', 60_000, 0), 0);
    expect(s.slots[1]).toEqual({ owner: 'b', target: 'b', generation: 2, revokedAt: null });
  });

  it('ends a revoke when the partition is targeted back at its owner', () => {
    const s = state(2);
    heartbeatStep(s, beat('a', 60_000, 10_000), 0);
    heartbeatStep(s, beat('b', 1_000, 10_000), 0);
    expect(s.slots[1]!.revokedAt).toBe(0);
    const report = heartbeatStep(s, beat('a', 60_000, 10_000), 2_000);
    expect(report.expired).toEqual(['b']);
    expect(s.slots[1]).toEqual({ owner: 'a', target: 'a', generation: 1, revokedAt: null });
    expect(report.changed).toEqual(new Set([1]));
    expect(memberView(s, 'a', () => 0).revoking).toEqual([]);
  });

  it('frees an expired owner\'s revoking partition without a bump, then grants it with one', () => {
    const s = state(2);
    heartbeatStep(s, beat('a', 1_000, 60_000), 0);
    heartbeatStep(s, beat('b', 60_000, 60_000), 0);
    expect(s.slots[1]).toEqual({ owner: 'a', target: 'b', generation: 1, revokedAt: 0 });
    heartbeatStep(s, beat('b', 60_000, 60_000), 1_000);
    expect(s.slots[0]).toEqual({ owner: 'b', target: 'b', generation: 2, revokedAt: null });
    expect(s.slots[1]).toEqual({ owner: 'b', target: 'b', generation: 2, revokedAt: null });
  });
});

describe('leaveStep', () => {
  it('changes nothing for a member not in the group', () => {
    const s = state(2);
    heartbeatStep(s, beat('a'), 0);
    const before = structuredClone(s);
    expect(leaveStep(s, 'b', 5)).toEqual({ joined: false, expired: [], rebalanced: false, changed: new Set() });
    expect(s).toEqual(before);
  });

  it('rebalances when a member that owned nothing leaves', () => {
    const s = state(1);
    heartbeatStep(s, beat('a'), 0);
    heartbeatStep(s, beat('b'), 0);
    const generation = s.groupGeneration;
    const report = leaveStep(s, 'b', 1);
    expect(report.rebalanced).toBe(true);
    expect(report.changed.size).toBe(0);
    expect(s.groupGeneration).toBe(generation + 1);
  });

  it('frees the leaver\'s partitions and rebalances, while a live owner keeps a revoked partition until it releases', () => {
    const s = state(4);
    heartbeatStep(s, beat('a', 60_000, 1_000), 0);
    heartbeatStep(s, beat('b', 60_000, 1_000), 0);
    releaseStep(s.slots[2]!, 'a', 1);
    expect(owners(s)).toEqual(['a', 'a', 'b', 'a']);
    heartbeatStep(s, beat('c', 60_000, 1_000), 10);
    const generation = s.groupGeneration;
    // Long after any rebalance timeout: a leave has none, so revoked partitions stay with their live owners.
    const report = leaveStep(s, 'b', 1_000_000);
    expect(report.rebalanced).toBe(true);
    expect(report.joined).toBe(false);
    expect(s.groupGeneration).toBe(generation + 1);
    expect(s.members.has('b')).toBe(false);
    expect(owners(s)).not.toContain('b');
    for (const slot of s.slots) if (slot.owner !== slot.target) expect(slot.owner).not.toBeNull();
    expect(s.slots.some((slot) => slot.owner !== null && slot.owner !== slot.target)).toBe(true);
  });
});

describe('releaseStep', () => {
  const slot = (over: Partial<OwnershipSlot>): OwnershipSlot => ({ owner: 'a', target: 'b', generation: 3, revokedAt: 7, ...over });

  it('hands a revoking partition straight to its target with a new generation', () => {
    const s = slot({});
    expect(releaseStep(s, 'a', 3)).toBe(true);
    expect(s).toEqual({ owner: 'b', target: 'b', generation: 4, revokedAt: null });
  });

  it('frees the partition when it has no target, or when the target is the releasing member', () => {
    const untargeted = slot({ target: null });
    expect(releaseStep(untargeted, 'a', 3)).toBe(true);
    expect(untargeted).toEqual({ owner: null, target: null, generation: 3, revokedAt: null });
    const own = slot({ target: 'a' });
    expect(releaseStep(own, 'a', 3)).toBe(true);
    expect(own).toEqual({ owner: null, target: 'a', generation: 3, revokedAt: null });
  });

  it('changes nothing for another member or a stale generation', () => {
    for (const [member, generation] of [['b', 3], ['a', 2], ['a', 4]] as const) {
      const s = slot({});
      expect(releaseStep(s, member, generation)).toBe(false);
      expect(s).toEqual(slot({}));
    }
  });
});

describe('memberView', () => {
  it('lists owned partitions with their generation and frontier, the revoking ones, the group generation and the expiry', () => {
    const s: MembershipState = {
      groupGeneration: 9,
      members: new Map([['a', 12_345], ['b', 1]]),
      slots: [
        { owner: 'a', target: 'a', generation: 2, revokedAt: null },
        { owner: 'b', target: 'b', generation: 5, revokedAt: null },
        { owner: 'a', target: 'b', generation: 4, revokedAt: 3 },
        { owner: null, target: 'a', generation: 1, revokedAt: null },
      ],
    };
    expect(memberView(s, 'a', (p) => p * 10)).toEqual({
      memberId: 'a',
      groupGeneration: 9,
      owned: [
        { partition: 0, generation: 2, frontier: 0 },
        { partition: 2, generation: 4, frontier: 20 },
      ],
      revoking: [2],
      expiresAt: new Date(12_345),
    });
    expect(memberView(s, 'z', () => 0)).toEqual({ memberId: 'z', groupGeneration: 9, owned: [], revoking: [], expiresAt: new Date(0) });
  });
});

describe('membershipView', () => {
  it('without state: generation 0, no members, every partition unowned', () => {
    expect(membershipView(null, 3, 0)).toEqual({ groupGeneration: 0, members: [], owners: { 0: null, 1: null, 2: null } });
    expect(membershipView(null, 0, 0)).toEqual({ groupGeneration: 0, members: [], owners: {} });
  });

  it('lists live members in id order with their partitions and revoking ones, and the owner of each partition', () => {
    const s: MembershipState = {
      groupGeneration: 4,
      members: new Map([['c', 2_000], ['a', 1_001], ['old', 1_000], ['b', 5_000]]),
      slots: [
        { owner: 'c', target: 'c', generation: 1, revokedAt: null },
        { owner: 'a', target: 'b', generation: 1, revokedAt: 0 },
        { owner: 'a', target: 'a', generation: 1, revokedAt: null },
        { owner: null, target: 'b', generation: 0, revokedAt: null },
      ],
    };
    expect(membershipView(s, 5, 1_000)).toEqual({
      groupGeneration: 4,
      members: [
        { memberId: 'a', expiresAt: new Date(1_001), partitions: [1, 2], revoking: [1] },
        { memberId: 'b', expiresAt: new Date(5_000), partitions: [], revoking: [] },
        { memberId: 'c', expiresAt: new Date(2_000), partitions: [0], revoking: [] },
      ],
      owners: { 0: 'c', 1: 'a', 2: 'a', 3: null, 4: null },
    });
  });

  it('sorts ids by code unit, not locale', () => {
    const s: MembershipState = { groupGeneration: 1, members: new Map([['b', 9], ['B', 9], ['a', 9], ['A', 9], ['b2', 9]]), slots: [] };
    expect(membershipView(s, 0, 0).members.map((m) => m.memberId)).toEqual(['A', 'B', 'a', 'b', 'b2']);
  });
});

describe('membership errors', () => {
  const fence = { stream: 'orders', group: 'billing', partition: 3, memberId: 'm-1', generation: 7 };

  it('staleGeneration names the stream, group, partition, member and generation, with a default or given detail', () => {
    const error = staleGeneration(fence);
    expect(error.code).toBe('stale_generation');
    expect(error).toMatchObject({ stream: 'orders', group: 'billing' });
    expect(error.message).toBe(
      'stale generation on stream "orders", group "billing", partition 3: member "m-1" at generation 7: the partition is no longer owned under this generation',
    );
    expect(staleGeneration(fence, 'the partition was reset').message).toMatch(/member "m-1" at generation 7: the partition was reset$/);
  });

  it('groupModeConflict names the group and stream', () => {
    const error = groupModeConflict('orders', 'billing');
    expect(error.code).toBe('group_mode_conflict');
    expect(error).toMatchObject({ stream: 'orders', group: 'billing' });
    expect(error.message).toEqual(expect.stringContaining('group "billing" of stream "orders" has live competing-consumer leases'));
  });

  it('assertWholeStreamGroup accepts a group covering every partition and names what a subset covers', () => {
    expect(() => assertWholeStreamGroup('orders', 'billing', [0, 1, 2], 3)).not.toThrow();
    const error = thrown(() => assertWholeStreamGroup('orders', 'billing', [0, 2], 3));
    expect(error.code).toBe('unsupported');
    expect(error).toMatchObject({ stream: 'orders', group: 'billing' });
    expect(error.message).toEqual(expect.stringContaining('partition ownership needs a group that covers every partition'));
    expect(error.message).toEqual(expect.stringContaining('group "billing" of stream "orders" covers 2 of 3 (partitions 0, 2)'));
  });

  it('commitBeyondLog names the partition, upTo and the last sequence', () => {
    const error = commitBeyondLog(fence, 12, 10);
    expect(error.code).toBe('invalid_argument');
    expect(error).toMatchObject({ stream: 'orders', group: 'billing' });
    expect(error.message).toBe('commit on stream "orders", group "billing", partition 3: upTo 12 is past the partition\'s last sequence 10');
  });
});
