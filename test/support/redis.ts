import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import type { Clock } from '../../src/core/clock.js';
import { redisBackend, type RedisBackend, type RedisBackendOptions } from '../../src/backends/redis/redis-backend.js';
import { startThrowawayRedis, startThrowawayRedisCluster, type ThrowawayRedis } from '../../scripts/throwaway-redis.js';

export type RedisMode = 'single' | 'cluster';

export interface RedisTarget {
  mode: RedisMode;
  /** URLs of the server, or of the cluster's seed nodes. */
  urls: string[];
  /** The throwaway servers, when this file started them (null with RHEO_TEST_REDIS_URL / RHEO_TEST_REDIS_CLUSTER_URLS). */
  servers: ThrowawayRedis | null;
  /** One client per file, lent to every test backend. */
  client: Redis | Cluster;
}

const targets = new Map<RedisMode, Promise<RedisTarget>>();

/**
 * The Redis of this test file: the one named by RHEO_TEST_REDIS_URL (single)
 * or RHEO_TEST_REDIS_CLUSTER_URLS (comma-separated seed nodes), else
 * throwaway `redis-server`s started on first use and stopped after the file.
 * Every backend gets a unique key prefix.
 */
export function redisTarget(mode: RedisMode): Promise<RedisTarget> {
  let target = targets.get(mode);
  if (!target) {
    target = startTarget(mode);
    targets.set(mode, target);
  }
  return target;
}

async function startTarget(mode: RedisMode): Promise<RedisTarget> {
  const external = mode === 'single' ? process.env.RHEO_TEST_REDIS_URL : process.env.RHEO_TEST_REDIS_CLUSTER_URLS;
  const servers = external ? null : mode === 'single' ? await startThrowawayRedis() : await startThrowawayRedisCluster();
  const urls = external ? external.split(',') : servers!.urls;
  const client =
    mode === 'single'
      ? new Redis(urls[0]!, { maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: true })
      : new Cluster(
          urls.map((u) => {
            const url = new URL(u);
            return { host: url.hostname, port: Number(url.port) };
          }),
          { enableOfflineQueue: false, lazyConnect: true, redisOptions: { maxRetriesPerRequest: 0 } },
        );
  client.on('error', () => {});
  await client.connect();
  return { mode, urls, servers, client };
}

/** Starts (or finds) the file's Redis before its tests and returns a getter for it. */
export function useRedis(mode: RedisMode): () => RedisTarget {
  let target: RedisTarget | null = null;
  beforeAll(async () => {
    target = await redisTarget(mode);
  }, 60_000);
  return () => {
    if (!target) throw new Error('useRedis: only available inside a test');
    return target;
  };
}

/** Closes the helpers' backends and clients and stops the servers this file started. */
export async function cleanupRedis(): Promise<void> {
  for (const backend of backends) await backend.close().catch(() => {});
  backends.clear();
  const started = [...targets.values()];
  targets.clear();
  for (const pending of started) {
    const target = await pending.catch(() => null);
    if (!target) continue;
    target.client.disconnect();
    target.servers?.stop();
  }
}

afterAll(cleanupRedis);

const backends = new Set<RedisBackend>();

export function uniquePrefix(label = 't'): string {
  return `${label}-${process.pid}-${randomBytes(5).toString('hex')}`;
}

/** A migrated backend on the file's shared client with a fresh prefix. */
export async function makeRedisTestBackend(target: RedisTarget, clock?: Clock, options: RedisBackendOptions = {}): Promise<RedisBackend> {
  const backend = redisBackend({ client: target.client }, { prefix: uniquePrefix(), clock, ...options });
  backends.add(backend);
  await backend.migrate();
  return backend;
}

/** A backend with a client of its own (rheo creates and closes it). */
export function ownRedisBackend(target: RedisTarget, options: RedisBackendOptions = {}): RedisBackend {
  const backend =
    target.mode === 'single'
      ? redisBackend({ url: target.urls[0]! }, { prefix: uniquePrefix(), ...options })
      : redisBackend({ nodes: target.urls }, { prefix: uniquePrefix(), ...options });
  backends.add(backend);
  return backend;
}
