import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createRheo } from '../../src/rheo.js';
import { makeRedisTestBackend, ownRedisBackend, uniquePrefix, useRedis } from '../support/redis.js';

const cluster = useRedis('cluster');

describe('redis cluster: key layout', () => {
  it('keeps every key of a partition on one slot and spreads partitions over the masters', async () => {
    const backend = await makeRedisTestBackend(cluster());
    const rheo = createRheo({ backend });
    await rheo.createStream('s', { partitions: 8 });
    await rheo.createGroup('s', 'g');
    for (let p = 0; p < 8; p++) await rheo.append('s', { payload: p, partition: p });
    const leases = await rheo.fetch('s', 'g', { limit: 8 });
    await rheo.reject(leases[0]!, 'dead');
    await rheo.nack(leases[1]!, 'later', { delayMs: 60_000 });

    const slotsByPartition = new Map<string, Set<number>>();
    const mastersWithKeys = new Set<string>();
    for (const url of cluster().urls) {
      const node = new Redis(url);
      try {
        const keys = (await node.keys(`${backend.prefix}:*`)).filter((k) => /\|s\|\d+\}/.test(k));
        if (keys.length > 0) mastersWithKeys.add(url);
        for (const key of keys) {
          const partition = /\|s\|(\d+)\}/.exec(key)![1]!;
          const slot = Number(await node.call('cluster', 'keyslot', key));
          if (!slotsByPartition.has(partition)) slotsByPartition.set(partition, new Set());
          slotsByPartition.get(partition)!.add(slot);
        }
      } finally {
        node.disconnect();
      }
    }
    expect([...slotsByPartition.keys()].sort()).toEqual(['0', '1', '2', '3', '4', '5', '6', '7']);
    for (const slots of slotsByPartition.values()) expect(slots.size).toBe(1);
    expect(mastersWithKeys.size).toBeGreaterThanOrEqual(2);
  });

  // This connect used to hang about one time in six on a loaded host (issue
  // 12): see connectReady in src/backends/redis/connection.ts.
  it('a backend given seed nodes creates its own Cluster client and declares the cluster capability', async () => {
    const backend = ownRedisBackend(cluster());
    expect(backend.capabilities.cluster).toBe(true);
    const rheo = createRheo({ backend });
    await rheo.migrate();
    await rheo.createStream('s', { partitions: 4 });
    await rheo.createGroup('s', 'g');
    await rheo.appendBatch('s', Array.from({ length: 40 }, (_, i) => ({ payload: i, key: `k${i}` })));
    const leases = await rheo.fetch('s', 'g', { limit: 100 });
    expect(leases).toHaveLength(40);
    expect((await rheo.ackMany(leases)).every((r) => r.ok)).toBe(true);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
    await rheo.close();
  });

  // On one server the appender publishes after its scripts (log.ts); on a
  // cluster the PUBLISH could reach another node before the partition's node
  // ran the script, so each script publishes from its own node.
  it('an append through one backend wakes waitForAppend on another, and its event is there when it wakes', async () => {
    const prefix = uniquePrefix();
    const writer = createRheo({ backend: ownRedisBackend(cluster(), { prefix }) });
    const reader = ownRedisBackend(cluster(), { prefix });
    const readerRheo = createRheo({ backend: reader });
    try {
      await writer.migrate();
      await writer.createStream('s', { partitions: 4 });
      // The subscription is in place once an append wakes a wait (the first
      // SUBSCRIBE may reach its node after the first PUBLISH).
      let subscribed = false;
      for (let i = 0; i < 40 && !subscribed; i++) {
        const wait = reader.waitForAppend('s', 250);
        await writer.append('s', { payload: 'ping', partition: 0 });
        subscribed = await wait;
      }
      expect(subscribed).toBe(true);
      for (let p = 1; p < 4; p++) {
        const seen = reader.waitForAppend('s', 10_000).then(async (woken) => [woken, (await readerRheo.read('s', { partition: p })).length]);
        await writer.append('s', { payload: p, partition: p });
        expect(await seen).toEqual([true, 1]);
      }
    } finally {
      await writer.close();
      await readerRheo.close();
    }
  });
});
