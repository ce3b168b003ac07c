import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assignPartitions } from '../../src/core/assignor.js';
import { emptySlot, heartbeatStep, leaveStep, memberView, releaseStep, type MembershipState } from '../../src/core/membership.js';

const memberIds = fc.uniqueArray(fc.string({ minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 9 });

function counts(assignment: Array<string | null>, members: string[]): number[] {
  return members.map((m) => assignment.filter((o) => o === m).length);
}

function moved(before: Array<string | null>, after: Array<string | null>): number[] {
  return before.flatMap((owner, p) => (owner !== after[p] ? [p] : []));
}

describe('assignPartitions', () => {
  it('spreads partitions evenly and by id order when nobody holds anything', () => {
    expect(assignPartitions(8, ['c', 'a', 'b'], [])).toEqual(['a', 'a', 'a', 'b', 'b', 'b', 'c', 'c']);
    expect(assignPartitions(2, ['a', 'b', 'c'], [])).toEqual(['a', 'b']);
    expect(assignPartitions(3, [], ['a', 'b', 'c'])).toEqual([null, null, null]);
  });

  it('gives the extra partitions to the members holding the most now, ties by id in code-unit order', () => {
    // b holds three, a two: b keeps its three and a its two, nothing moves.
    expect(assignPartitions(5, ['a', 'b'], ['b', 'a', 'b', 'a', 'b'])).toEqual(['b', 'a', 'b', 'a', 'b']);
    // Equal holdings: the extra one goes to the id that sorts first ('B' < 'a' by code unit).
    expect(assignPartitions(3, ['a', 'B'], ['a', 'B', null])).toEqual(['a', 'B', 'B']);
    expect(assignPartitions(3, ['b', 'a'], ['a', 'b', null])).toEqual(['a', 'b', 'a']);
    // A member over its quota keeps its first partitions and gives up the rest, in partition order.
    expect(assignPartitions(4, ['a', 'b'], ['a', 'a', 'a', 'a'])).toEqual(['a', 'a', 'b', 'b']);
    expect(assignPartitions(5, ['a', 'b', 'c'], ['c', 'c', 'c', 'c', 'c'])).toEqual(['c', 'c', 'a', 'a', 'b']);
  });

  it('ignores previous owners that are not members, and duplicate members', () => {
    expect(assignPartitions(4, ['b', 'b'], ['x', 'b', 'x', null])).toEqual(['b', 'b', 'b', 'b']);
    // b holds one and so gets the extra partition; the departed owner's partitions are free.
    expect(assignPartitions(3, ['a', 'b'], ['gone', 'gone', 'b'])).toEqual(['a', 'b', 'b']);
    expect(assignPartitions(0, ['a'], [])).toEqual([]);
    expect(assignPartitions(2, ['a'], ['a', 'a', 'a'])).toEqual(['a', 'a']);
    // Entries of previous past the partition count do not count as holdings.
    expect(assignPartitions(3, ['a', 'b'], ['b', 'a', 'b', 'a'])).toEqual(['b', 'a', 'b']);
  });

  it('is balanced: every partition owned, counts differ by at most one, whatever it held before', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 64 }), memberIds, fc.array(fc.option(fc.string({ maxLength: 4 }))), (partitions, members, previous) => {
        const out = assignPartitions(partitions, members, previous);
        expect(out).toHaveLength(partitions);
        expect(out.every((o) => o !== null && members.includes(o))).toBe(true);
        const c = counts(out, members);
        expect(Math.max(...c) - Math.min(...c)).toBeLessThanOrEqual(1);
      }),
    );
  });

  it('is deterministic: member order and duplicates do not matter', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 64 }), memberIds, fc.array(fc.option(fc.string({ maxLength: 4 }))), (partitions, members, previous) => {
        const shuffled = [...members].reverse().concat(members.slice(0, 1));
        expect(assignPartitions(partitions, shuffled, previous)).toEqual(assignPartitions(partitions, members, previous));
      }),
    );
  });

  it('is sticky on a join: only partitions the newcomer receives move, and it receives its fair share', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 64 }), memberIds, fc.string({ minLength: 5, maxLength: 6 }), (partitions, members, newcomer) => {
        const before = assignPartitions(partitions, members, []);
        const after = assignPartitions(partitions, [...members, newcomer], before);
        const changed = moved(before, after);
        expect(changed.every((p) => after[p] === newcomer)).toBe(true);
        expect(changed.length).toBe(Math.floor(partitions / (members.length + 1)));
      }),
    );
  });

  it('is sticky on a leave: only the leaver\'s partitions move', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 64 }), memberIds.filter((m) => m.length >= 2), fc.nat(), (partitions, members, pick) => {
        const before = assignPartitions(partitions, members, []);
        const leaver = members[pick % members.length]!;
        const after = assignPartitions(partitions, members.filter((m) => m !== leaver), before);
        expect(moved(before, after).every((p) => before[p] === leaver)).toBe(true);
      }),
    );
  });

  it('stays sticky through a sequence of joins and leaves', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 32 }),
        fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 7 })), { minLength: 1, maxLength: 30 }),
        (partitions, steps) => {
          let members: string[] = ['m0'];
          let current = assignPartitions(partitions, members, []);
          for (const [join, n] of steps) {
            const id = `m${n}`;
            const next = join ? [...new Set([...members, id])] : members.filter((m) => m !== id);
            if (next.length === 0) continue;
            const after = assignPartitions(partitions, next, current);
            const changed = moved(current, after);
            if (join && !members.includes(id)) expect(changed.every((p) => after[p] === id)).toBe(true);
            if (!join && members.includes(id)) expect(changed.every((p) => current[p] === id)).toBe(true);
            members = next;
            current = after;
          }
        },
      ),
    );
  });
});

function state(partitions: number): MembershipState {
  return { groupGeneration: 0, members: new Map(), slots: Array.from({ length: partitions }, emptySlot) };
}

const beat = (memberId: string) => ({ memberId, sessionMs: 10_000, rebalanceTimeoutMs: 5_000 });

describe('membership steps', () => {
  it('a first member gets every partition at generation 1', () => {
    const s = state(4);
    const report = heartbeatStep(s, beat('a'), 0);
    expect(report).toMatchObject({ joined: true, rebalanced: true, expired: [] });
    const view = memberView(s, 'a', () => 0);
    expect(view.owned.map((o) => [o.partition, o.generation])).toEqual([[0, 1], [1, 1], [2, 1], [3, 1]]);
    expect(view.revoking).toEqual([]);
    expect(view.expiresAt.getTime()).toBe(10_000);
  });

  it('a join revokes first and moves only after the release, with a new generation', () => {
    const s = state(4);
    heartbeatStep(s, beat('a'), 0);
    heartbeatStep(s, beat('b'), 1);
    expect(memberView(s, 'a', () => 0).revoking).toEqual([2, 3]);
    expect(memberView(s, 'b', () => 0).owned).toEqual([]);
    expect(releaseStep(s.slots[2]!, 'a', 1)).toBe(true);
    expect(releaseStep(s.slots[2]!, 'a', 1)).toBe(false);
    expect(memberView(s, 'b', () => 0).owned).toEqual([{ partition: 2, generation: 2, frontier: 0 }]);
    // Partition 3 moves once the rebalance timeout has passed since the revoke.
    heartbeatStep(s, beat('b'), 5_000);
    expect(memberView(s, 'b', () => 0).owned.map((o) => o.partition)).toEqual([2]);
    heartbeatStep(s, beat('b'), 5_001);
    expect(memberView(s, 'b', () => 0).owned.map((o) => [o.partition, o.generation])).toEqual([[2, 2], [3, 2]]);
    expect(memberView(s, 'a', () => 0).owned.map((o) => o.partition)).toEqual([0, 1]);
  });

  it('an expired member\'s partitions move at once on the next heartbeat of anyone', () => {
    const s = state(2);
    heartbeatStep(s, beat('a'), 0);
    heartbeatStep(s, beat('b'), 0);
    releaseStep(s.slots[1]!, 'a', 1);
    heartbeatStep(s, beat('b'), 9_999);
    expect(memberView(s, 'b', () => 0).owned.map((o) => o.partition)).toEqual([1]);
    const report = heartbeatStep(s, beat('b'), 10_000);
    expect(report.expired).toEqual(['a']);
    expect(memberView(s, 'b', () => 0).owned.map((o) => [o.partition, o.generation])).toEqual([[0, 2], [1, 2]]);
  });

  it('a leave frees the leaver\'s partitions for the others at once', () => {
    const s = state(2);
    heartbeatStep(s, beat('a'), 0);
    heartbeatStep(s, beat('b'), 0);
    releaseStep(s.slots[1]!, 'a', 1);
    leaveStep(s, 'b', 1);
    expect(memberView(s, 'a', () => 0).owned.map((o) => [o.partition, o.generation])).toEqual([[0, 1], [1, 3]]);
    expect(leaveStep(s, 'nobody', 1).changed.size).toBe(0);
  });
});
