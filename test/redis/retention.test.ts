import { describe, expect, it } from 'vitest';
import type { Cluster, Redis } from 'ioredis';
import { ManualClock } from '../../src/core/clock.js';
import { RheoError } from '../../src/core/errors.js';
import { redisBackend } from '../../src/backends/redis/redis-backend.js';
import { KeyLayout } from '../../src/backends/redis/keys.js';
import { UNLIST_GROUP, UNLIST_STREAM } from '../../src/backends/redis/lua/retention-scripts.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { makeRedisTestBackend, useRedis, type RedisMode, type RedisTarget } from '../support/redis.js';

/**
 * Redis-specific retention cases (the behaviour itself is the conformance
 * suite's, test/conformance/retention*.ts, run by test/redis.test.ts and
 * test/redis-cluster.test.ts): deletion leaves no key behind, on one server
 * and on every master of a cluster; a deletion cut short is finished later;
 * a process that still has a deleted stream cached writes nothing into it.
 */

const targets: Record<RedisMode, () => RedisTarget> = { single: useRedis('single'), cluster: useRedis('cluster') };

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'no error';
  } catch (error) {
    return error instanceof RheoError ? error.code : `not a RheoError: ${String(error)}`;
  }
}

/** Every key under the prefix, by SCAN on the server or on each master of the cluster. */
async function keysOf(target: RedisTarget, prefix: string): Promise<string[]> {
  const nodes: Array<Redis | Cluster> = target.mode === 'single' ? [target.client] : (target.client as Cluster).nodes('master');
  const out: string[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = (await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000)) as [string, string[]];
      out.push(...keys);
      cursor = next;
    } while (cursor !== '0');
  }
  return [...new Set(out)].sort();
}

/** A stream with everything a group can leave in Redis: leases, pending retries, dead letters, replay holds, a trimmed prefix. */
async function busyStream(rheo: Rheo, name: string): Promise<void> {
  await rheo.createStream(name, { partitions: 3, retention: { maxEvents: 100 } });
  await rheo.createGroup(name, 'g');
  await rheo.createGroup(name, 'part', { partitions: [1, 2] });
  for (let p = 0; p < 3; p++) await rheo.appendBatch(name, Array.from({ length: 6 }, (_, i) => ({ payload: i, partition: p, id: `${name}-${p}-${i}` })));
  const leases = await rheo.fetch(name, 'g', { limit: 12 });
  await rheo.reject(leases[0]!, 'dead');
  await rheo.nack(leases[1]!, 'later', { delayMs: 60_000 });
  await rheo.ackMany(leases.slice(2, 6));
  await rheo.replay(name, 'g', { fromSequence: 1 });
  const other = await rheo.fetch(name, 'part', { limit: 4 });
  await rheo.reject(other[0]!, 'dead');
  await rheo.trim(name, { keep: 4, force: true });
}

for (const mode of ['single', 'cluster'] as const) {
  describe(`redis retention (${mode}): nothing left behind`, () => {
    const target = targets[mode];

    it('deleteStream removes every key the stream owned, and only those', async () => {
      const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
      const backend = await makeRedisTestBackend(target(), clock);
      const rheo = createRheo({ backend, clock, retention: { enabled: false } });
      await busyStream(rheo, 'gone');
      // Kept has a policy too, so the shared policy hash stays (an empty hash is no key in Redis).
      await rheo.createStream('kept', { retention: { maxAgeMs: 60_000 } });
      await rheo.append('kept', { payload: 1 });
      const before = await keysOf(target(), backend.prefix);
      expect(before.some((k) => k.includes('|gone|'))).toBe(true);
      await rheo.deleteStream('gone', { confirm: true });
      const after = await keysOf(target(), backend.prefix);
      expect(after.filter((k) => k.includes('|gone'))).toEqual([]);
      expect(after).toEqual(before.filter((k) => !k.includes('|gone')));
      await rheo.deleteStream('kept', { confirm: true });
      // What is left: the schema version migrate() wrote, nothing else.
      expect(await keysOf(target(), backend.prefix)).toEqual([new KeyLayout(backend.prefix).schema]);
    });

    it("deleteGroup removes every key of the group and none of the other groups' or the stream's", async () => {
      const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
      const backend = await makeRedisTestBackend(target(), clock);
      const rheo = createRheo({ backend, clock, retention: { enabled: false } });
      await busyStream(rheo, 's');
      const before = await keysOf(target(), backend.prefix);
      expect(before.some((k) => k.includes(':g:part:'))).toBe(true);
      await rheo.deleteGroup('s', 'part', { confirm: true });
      const after = await keysOf(target(), backend.prefix);
      expect(after).toEqual(before.filter((k) => !k.includes(':g:part:')));
      await rheo.deleteGroup('s', 'g', { confirm: true });
      const streamOnly = await keysOf(target(), backend.prefix);
      expect(streamOnly.filter((k) => k.includes(':g:'))).toEqual([]);
      expect(await rheo.listGroups('s')).toEqual([]);
    });

    it('a deleteStream cut short after its catalog step is finished by createStream of the name, which starts fresh', async () => {
      const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
      const backend = await makeRedisTestBackend(target(), clock);
      const rheo = createRheo({ backend, clock, retention: { enabled: false } });
      await busyStream(rheo, 's');
      const keys = new KeyLayout(backend.prefix);
      // The state a crash right after the first step leaves: unlisted, every key still there.
      await target().client.eval(UNLIST_STREAM.source, 3, keys.streams, keys.retention, keys.deleted, 's', `${Date.now()}|`);
      const other = createRheo({ backend: redisBackend({ client: target().client }, { prefix: backend.prefix, clock }), clock, retention: { enabled: false } });
      expect(await other.listStreams()).toEqual([]);
      expect(await codeOf(other.read('s'))).toBe('stream_not_found');
      await other.createStream('s');
      expect((await other.listStreams())[0]).toMatchObject({ name: 's', partitions: 1, retention: null, watermarks: { 0: { lowWatermark: 1, highWatermark: 0 } } });
      expect(await other.listGroups('s')).toEqual([]);
      const again = await other.append('s', { id: 's-0-5', payload: 'fresh' });
      expect(again).toMatchObject({ sequence: 1, existed: false });
      const left = await keysOf(target(), backend.prefix);
      expect(left.filter((k) => /\|s\|[12]\}/.test(k) || k.includes(':g:'))).toEqual([]);
      expect(left.filter((k) => k.endsWith(':deleted'))).toEqual([]);
      await other.close();
    });

    it('a deleteGroup cut short after its catalog step is finished by createGroup of the name, which starts fresh', async () => {
      const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
      const backend = await makeRedisTestBackend(target(), clock);
      const rheo = createRheo({ backend, clock, retention: { enabled: false } });
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', [{ payload: 1, partition: 0 }, { payload: 2, partition: 1 }]);
      const [lease] = await rheo.fetch('s', 'g', { limit: 1 });
      await rheo.reject(lease!, 'dead');
      const keys = new KeyLayout(backend.prefix);
      await target().client.eval(UNLIST_GROUP.source, 2, keys.groups('s'), keys.deletedGroups('s'), 'g');
      const other = createRheo({ backend: redisBackend({ client: target().client }, { prefix: backend.prefix, clock }), clock, retention: { enabled: false } });
      expect(await other.listGroups('s')).toEqual([]);
      await other.createGroup('s', 'g');
      expect((await other.lag('s', 'g')).lag).toBe(2);
      expect(await other.deadLetters('s', 'g')).toEqual([]);
      expect((await keysOf(target(), backend.prefix)).filter((k) => k.endsWith(':deleted-groups'))).toEqual([]);
      await other.close();
    });

    it('a process that still has a deleted stream cached writes nothing into it', async () => {
      const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
      const backend = await makeRedisTestBackend(target(), clock);
      const stale = createRheo({ backend, clock, retention: { enabled: false } });
      await stale.createStream('s', { partitions: 2 });
      await stale.createGroup('s', 'g');
      await stale.append('s', { payload: 1, partition: 0 });
      const [lease] = await stale.fetch('s', 'g', { limit: 1 });
      const deleter = createRheo({ backend: redisBackend({ client: target().client }, { prefix: backend.prefix, clock }), clock, retention: { enabled: false } });
      await deleter.deleteStream('s', { confirm: true });
      const schemaOnly = [new KeyLayout(backend.prefix).schema];
      expect(await keysOf(target(), backend.prefix)).toEqual(schemaOnly);
      // `stale` still has the stream and the group cached.
      expect(await codeOf(stale.append('s', { payload: 2, partition: 1 }))).toBe('stream_not_found');
      expect(await codeOf(stale.read('s'))).toBe('stream_not_found');
      expect(['group_not_found', 'stream_not_found']).toContain(await codeOf(stale.fetch('s', 'g', { limit: 1 })));
      expect(await codeOf(stale.ack(lease!))).toBe('stale_lease');
      expect(await codeOf(stale.trim('s', { keep: 0 }))).toBe('stream_not_found');
      expect(await keysOf(target(), backend.prefix)).toEqual(schemaOnly);
      // And once created again (by anyone) it is the new stream that `stale` writes to.
      await deleter.createStream('s', { partitions: 2 });
      expect(await stale.append('s', { payload: 3, partition: 1 })).toMatchObject({ sequence: 1, partition: 1 });
      await deleter.close();
    });

    it('a batch larger than one script (1,000 events) is split per partition and its report sums the scripts', async () => {
      const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
      const backend = await makeRedisTestBackend(target(), clock);
      const rheo = createRheo({ backend, clock, retention: { enabled: false } });
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'idle');
      for (let i = 0; i < 2_500; i += 500) await rheo.appendBatch('s', Array.from({ length: 500 }, (_, k) => ({ payload: i + k, partition: 0 })));
      await rheo.appendBatch('s', [{ payload: 'a', partition: 1 }, { payload: 'b', partition: 1 }]);
      const one = await backend.trim('s', { before: null, keep: 100, force: true, limit: 2_000 });
      expect(one).toEqual({
        deleted: 2_000,
        partitions: { 0: { deleted: 2_000, lowWatermark: 2_001 }, 1: { deleted: 0, lowWatermark: 1 } },
        forced: [{ group: 'idle', partition: 0, unsettled: 2_000 }],
      });
      const rest = await rheo.trim('s', { keep: 100, force: true });
      expect(rest.forced).toEqual([{ group: 'idle', partition: 0, unsettled: 400 }]);
      expect((await rheo.lag('s', 'idle')).partitions[0]).toMatchObject({ lowWatermark: 2_401, frontier: 2_400, highWatermark: 2_500, lag: 100 });
      expect((await rheo.read('s', { limit: 1 }))[0]!.sequence).toBe(2_401);
      const partition0 = new KeyLayout(backend.prefix).partition('s', 0);
      expect(await target().client.xlen(partition0.log)).toBe(100);
      expect(await target().client.hlen(partition0.ids)).toBe(100);
    });

    it('the background trimmer skips a stream another trimmer holds; an explicit trim does not wait for it', async () => {
      const clock = new ManualClock(Date.parse('2026-01-01T00:00:00Z'));
      const backend = await makeRedisTestBackend(target(), clock);
      const rheo = createRheo({ backend, clock, retention: { enabled: false } });
      await rheo.createStream('s', { retention: { maxEvents: 1 } });
      await rheo.appendBatch('s', [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
      const lock = new KeyLayout(backend.prefix).trimLock('s');
      await target().client.set(lock, 'someone-else', 'PX', 60_000);
      const skipped = await backend.trim('s', { before: null, keep: null, force: false, limit: 100, skipIfBusy: true });
      expect(skipped).toEqual({ deleted: 0, partitions: {}, forced: [] });
      expect(await target().client.get(lock)).toBe('someone-else');
      expect((await backend.trim('s', { before: null, keep: null, force: false, limit: 100 })).deleted).toBe(2);
      await target().client.del(lock);
      await rheo.append('s', { payload: 4 });
      expect((await backend.trim('s', { before: null, keep: null, force: false, limit: 100, skipIfBusy: true })).deleted).toBe(1);
      // The trimmer released its lock.
      expect(await target().client.exists(lock)).toBe(0);
    });
  });
}
