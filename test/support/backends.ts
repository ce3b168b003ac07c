import type { Backend } from '../../src/core/backend.js';
import type { ManualClock } from '../../src/core/clock.js';
import { memoryBackend } from '../../src/backends/memory/memory-backend.js';
import { makeTestBackend } from './postgres.js';

export interface BackendFactory {
  name: 'memory' | 'postgres';
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
 * dropped and backends closed after the file.
 */
export const backendFactories: BackendFactory[] = [
  { name: 'memory', make: async (clock) => memoryBackend({ clock }) },
  { name: 'postgres', make: (clock) => makeTestBackend(clock) },
];
