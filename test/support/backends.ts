import type { Backend } from '../../src/core/backend.js';
import type { ManualClock } from '../../src/core/clock.js';
import { memoryBackend } from '../../src/backends/memory/memory-backend.js';
import { makePgliteTestBackend } from './pglite.js';
import { makePgbouncerTestBackend, makeTestBackend, pgbouncerUrl } from './postgres.js';
import { makeRedisTestBackend, redisTarget } from './redis.js';

export interface BackendFactory {
  name: 'memory' | 'postgres' | 'pglite' | 'redis' | 'postgres-pgbouncer';
  /** A fresh, migrated backend; with a clock, lease expiry follows it. */
  make(clock?: ManualClock): Promise<Backend>;
}

/**
 * Every backend, for test files that should run against all of them
 * (streams adapter, consumer, ...):
 *
 *     for (const factory of backendFactories) describe(factory.name, () => { ... factory.make(clock) ... });
 *
 * Postgres backends get a fresh schema each on a per-file pool; schemas are
 * dropped and backends closed after the file. PGlite backends get an empty
 * schema each on one in-memory instance per file (support/pglite.ts). Redis backends get a fresh key
 * prefix each on a per-file client to a redis-server started on first use.
 */
const allFactories: BackendFactory[] = [
  { name: 'memory', make: async (clock) => memoryBackend({ clock }) },
  { name: 'postgres', make: (clock) => makeTestBackend(clock) },
  { name: 'pglite', make: (clock) => makePgliteTestBackend(clock) },
  { name: 'redis', make: async (clock) => makeRedisTestBackend(await redisTarget('single'), clock) },
];

/**
 * Mutation testing (vitest.mutation.config.ts) sets RHEO_MEMORY_ONLY so every
 * mutant is judged by the memory runs alone: no PostgreSQL cluster to start,
 * and a mutant in `src/backends/memory` is never "killed" by a timeout on a
 * backend it does not touch.
 */
export const backendFactories: BackendFactory[] =
  process.env.RHEO_MEMORY_ONLY === '1' ? allFactories.filter((f) => f.name === 'memory') : allFactories;

/**
 * The consumer tests also run PostgreSQL through PgBouncer in transaction
 * pooling mode (`pooler: 'transaction'`, LISTEN on a direct connection),
 * when the global setup provides one.
 */
export const consumerFactories: BackendFactory[] =
  process.env.RHEO_MEMORY_ONLY === '1' || pgbouncerUrl() === ''
    ? backendFactories
    : [...backendFactories, { name: 'postgres-pgbouncer', make: (clock) => makePgbouncerTestBackend(clock) }];
