import type { Readable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { createRheo, type Rheo } from '../src/index.js';

/** Where an example writes its narration. */
export type Log = (line: string) => void;

/** Every example: runnable alone with `npm run example -- <name>`, and from the test suite. */
export interface Example<R> {
  name: string;
  description: string;
  run(rheo: Rheo, log: Log): Promise<R>;
}

/**
 * The in-memory backend by default; PostgreSQL (schema `rheo_examples`) for a
 * `postgres://` URL, PGlite in a data directory for a `pglite://` one
 * (`pglite://./rheo-data`), Redis (key prefix `rheo_examples`) for a
 * `redis://` one.
 */
export async function connect(databaseUrl: string | undefined): Promise<Rheo> {
  if (!databaseUrl) return createRheo({ defaults: { pollMs: 50 } });
  if (/^rediss?:\/\//.test(databaseUrl)) {
    const { redisBackend } = await import('../src/redis.js');
    return createRheo({
      backend: redisBackend({ url: databaseUrl }, { prefix: 'rheo_examples' }),
      defaults: { pollMs: 50 },
    });
  }
  if (/^pglite:\/\//i.test(databaseUrl)) {
    const { pgliteBackend, pgliteDataDir } = await import('../src/pglite.js');
    return createRheo({
      backend: pgliteBackend({ dataDir: pgliteDataDir(databaseUrl), schema: 'rheo_examples' }),
      defaults: { pollMs: 50 },
    });
  }
  const { postgresBackend } = await import('../src/postgres.js');
  return createRheo({
    backend: postgresBackend({ connectionString: databaseUrl }, { schema: 'rheo_examples' }),
    defaults: { pollMs: 50 },
  });
}

/** A fresh stream name per run, so examples can run again and again on one database. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/** Reads `n` chunks in paused mode, the way a GenStage consumer takes `n` events. */
export async function take<C>(readable: Readable, n: number): Promise<C[]> {
  const taken: C[] = [];
  while (taken.length < n) {
    const chunk = readable.read() as C | null;
    if (chunk !== null) taken.push(chunk);
    else await new Promise<void>((resolve) => readable.once('readable', () => resolve()));
  }
  return taken;
}
