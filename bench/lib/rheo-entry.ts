import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as IndexModule from '../../src/index.js';
import type * as PostgresModule from '../../src/postgres.js';
import type * as RedisModule from '../../src/redis.js';

/** The environment variable naming a built bundle directory (`dist/`) for member processes. */
export const BUNDLE_ENV = 'RHEO_BENCH_BUNDLE';

export interface RheoModules {
  index: typeof IndexModule;
  postgres: typeof PostgresModule;
  redis: typeof RedisModule;
}

/**
 * What a bench member process runs: the built bundle when `RHEO_BENCH_BUNDLE`
 * names its directory (bench/run.ts builds it for the scenarios that start
 * members), as an application runs rheo, else the sources through tsx. From
 * source, esbuild's keepNames wraps every closure a call creates in a
 * `__name()` call that the bundle does not have, which made a member's client
 * CPU per event read 25-50 % higher than users pay (docs/performance.md).
 */
export async function loadRheo(): Promise<RheoModules> {
  const bundle = process.env[BUNDLE_ENV];
  if (!bundle) {
    const [index, postgres, redis] = await Promise.all([import('../../src/index.js'), import('../../src/postgres.js'), import('../../src/redis.js')]);
    return { index, postgres, redis };
  }
  const entry = (name: string): string => pathToFileURL(join(bundle, `${name}.js`)).href;
  const [index, postgres, redis] = await Promise.all([
    import(entry('index')) as Promise<typeof IndexModule>,
    import(entry('postgres')) as Promise<typeof PostgresModule>,
    import(entry('redis')) as Promise<typeof RedisModule>,
  ]);
  return { index, postgres, redis };
}
