import { describe, expect, it } from 'vitest';
import type { MemberView } from '../../src/core/backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { emptySlot, heartbeatStep, type MembershipState } from '../../src/core/membership.js';
import { KeyLayout } from '../../src/backends/redis/keys.js';
import { MEMBERSHIP_LOAD, MEMBERSHIP_SAVE, OWNERSHIP_APPLY, OWNERSHIP_RELEASE } from '../../src/backends/redis/lua/ownership-scripts.js';
import type { LuaScript } from '../../src/backends/redis/lua/scripts.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { expectCode } from '../conformance/fixture.js';
import { makeRedisTestBackend, useRedis, type RedisMode, type RedisTarget } from '../support/redis.js';

/**
 * Redis-specific partition ownership: the membership state and the fences
 * live on different slots, so a step is a save followed by per-partition
 * applies. These cases run the steps' scripts one at a time, as a crash or
 * a slow client would leave them, and check that no member passes a fence
 * it should not (ownership.ts has the argument).
 */
const SESSION = { sessionMs: 10_000, rebalanceTimeoutMs: 5_000 };

function fenceOf(view: MemberView, partition: number) {
  const o = view.owned.find((x) => x.partition === partition);
  if (!o) throw new Error(`${view.memberId} does not own partition ${partition}`);
  return { stream: 's', group: 'g', partition, memberId: view.memberId, generation: o.generation };
}

for (const mode of ['single', 'cluster'] as RedisMode[]) {
  describe(`redis partition ownership (${mode})`, () => {
    const redis = useRedis(mode);

    async function setup(partitions: number, clock?: ManualClock): Promise<{ rheo: Rheo; keys: KeyLayout; target: RedisTarget }> {
      const target = redis();
      const backend = await makeRedisTestBackend(target, clock);
      const rheo = createRheo({ backend, clock });
      await rheo.createStream('s', { partitions });
      await rheo.createGroup('s', 'g');
      return { rheo, keys: new KeyLayout(backend.prefix), target };
    }

    function evalScript(target: RedisTarget, script: LuaScript, keys: string[], args: (string | number)[]): Promise<unknown> {
      return target.client.call('eval', script.source, keys.length, ...keys, ...args);
    }

    const fenceKeys = (keys: KeyLayout, p: number) => [...keys.group('s', 'g', p), keys.owner('s', 'g', p)];
    const beat = (rheo: Rheo, memberId: string) => rheo.heartbeat('s', 'g', { memberId, ...SESSION });

    it('a delayed apply of an older decision never moves a fence back', async () => {
      const clock = new ManualClock();
      const { rheo, keys, target } = await setup(2, clock);
      const a1 = await beat(rheo, 'a');
      await beat(rheo, 'b');
      const a2 = await beat(rheo, 'a');
      expect(a2.revoking).toEqual([1]);
      await rheo.releasePartitions([fenceOf(a2, 1)]);
      const b = await beat(rheo, 'b');
      expect(b.owned).toEqual([{ partition: 1, generation: 2, frontier: 0 }]);
      // The apply of the first heartbeat (version 1: partition 1 to "a"), arriving late.
      const reply = (await evalScript(target, OWNERSHIP_APPLY, fenceKeys(keys, 1), [String(clock.now()), 1, 1, 'a', 99])) as [string, number, number];
      expect(reply[0]).toBe('b');
      expect(Number(reply[1])).toBe(2);
      await expectCode(rheo.readOwned(fenceOf(a1, 1)), 'stale_generation');
      expect(await rheo.readOwned(fenceOf(b, 1))).toEqual([]);
    });

    it('a heartbeat interrupted between its save and its applies: the old owner may still pass, the new one not, until the new owner beats', async () => {
      const clock = new ManualClock();
      const { rheo, keys, target } = await setup(1, clock);
      await rheo.append('s', { payload: 1 });
      const a = await beat(rheo, 'a');
      clock.advance(SESSION.sessionMs);
      // The step of b's heartbeat saved, then the client died before any apply.
      const [version, raw] = (await evalScript(target, MEMBERSHIP_LOAD, [keys.members('s', 'g')], [String(clock.now())])) as [string, string];
      const stored = JSON.parse(raw) as { gg: number; m: Array<[string, number]>; s: Array<{ o: string | null; t: string | null; g: number; r: number | null }> };
      const state: MembershipState = {
        groupGeneration: stored.gg,
        members: new Map(stored.m),
        slots: stored.s.map((x) => ({ ...emptySlot(), owner: x.o, target: x.t, generation: x.g, revokedAt: x.r })),
      };
      heartbeatStep(state, { memberId: 'b', ...SESSION }, clock.now());
      expect(state.slots[0]).toMatchObject({ owner: 'b', generation: 2 });
      const saved = await evalScript(target, MEMBERSHIP_SAVE, [keys.members('s', 'g')], [
        version,
        JSON.stringify({ gg: state.groupGeneration, m: [...state.members], s: state.slots.map((x) => ({ o: x.owner, t: x.target, g: x.generation, r: x.revokedAt })) }),
      ]);
      expect(Number(saved)).toBe(Number(version) + 1);
      const bFence = { stream: 's', group: 'g', partition: 0, memberId: 'b', generation: 2 };
      await expectCode(rheo.readOwned(bFence), 'stale_generation');
      expect((await rheo.readOwned(fenceOf(a, 0))).map((e) => e.sequence)).toEqual([1]);
      // b's next heartbeat applies what it owns: from then on only b passes.
      const b = await beat(rheo, 'b');
      expect(b.owned).toEqual([{ partition: 0, generation: 2, frontier: 0 }]);
      await expectCode(rheo.readOwned(fenceOf(a, 0)), 'stale_generation');
      const [late] = await rheo.commit([{ ...fenceOf(a, 0), upTo: 1 }]);
      expect(late?.ok === false && late.error.code).toBe('stale_generation');
      expect(await rheo.commit([{ ...fenceOf(b, 0), upTo: 1 }])).toEqual([{ ok: true }]);
    });

    it('a release interrupted after clearing its fence: nobody passes until the rebalance timeout moves the partition', async () => {
      const clock = new ManualClock();
      const { rheo, keys, target } = await setup(2, clock);
      await beat(rheo, 'a');
      await beat(rheo, 'b');
      const a = await beat(rheo, 'a');
      const fence = fenceOf(a, 1);
      expect(Number(await evalScript(target, OWNERSHIP_RELEASE, fenceKeys(keys, 1), [String(clock.now()), 1, 'a', fence.generation]))).toBe(1);
      await expectCode(rheo.readOwned(fence), 'stale_generation');
      expect((await beat(rheo, 'b')).owned).toEqual([]);
      clock.advance(SESSION.rebalanceTimeoutMs);
      const b = await beat(rheo, 'b');
      expect(b.owned).toEqual([{ partition: 1, generation: fence.generation + 1, frontier: 0 }]);
      await expectCode(rheo.readOwned(fence), 'stale_generation');
      expect((await beat(rheo, 'a')).owned.map((o) => o.partition)).toEqual([0]);
    });

    it('sessions follow the server clock (TIME) when no clock is given', async () => {
      const { rheo, target } = await setup(1);
      const time = async () => {
        const [s, us] = (await target.client.call('time')) as [string, string];
        return Number(s) * 1000 + Math.floor(Number(us) / 1000);
      };
      // On a cluster, TIME comes from whichever node serves the call; the throwaway nodes share one host clock.
      const before = await time();
      const view = await beat(rheo, 'a');
      const after = await time();
      expect(view.expiresAt.getTime()).toBeGreaterThanOrEqual(before + SESSION.sessionMs);
      expect(view.expiresAt.getTime()).toBeLessThanOrEqual(after + SESSION.sessionMs);
    });

    it.skipIf(mode === 'single')('keeps each fence on its partition slot and the membership on a slot of its own', async () => {
      const { keys, target } = await setup(4);
      const slot = async (key: string) => Number(await target.client.call('cluster', 'keyslot', key));
      for (let p = 0; p < 4; p++) expect(await slot(keys.owner('s', 'g', p))).toBe(await slot(keys.partition('s', p).log));
      expect(keys.members('s', 'g')).toMatch(/\{[^}]*\|s\|g\|g\}/);
    });
  });
}
