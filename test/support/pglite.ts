import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll } from 'vitest';
import type { Clock } from '../../src/core/clock.js';
import { pgliteBackend, type PgliteBackend, type PgliteBackendOptions } from '../../src/backends/pglite/pglite-backend.js';

let shared: Promise<PGlite> | null = null;
const backends = new Set<PgliteBackend>();

/**
 * An initialised data directory as a tarball, made once per machine and
 * PGlite version: starting from it skips initdb, the slow part of a start
 * (measured 8 s against 20-36 s on a loaded 2-core host).
 */
async function template(): Promise<Blob> {
  const { version } = JSON.parse(readFileSync(join(import.meta.dirname, '../../node_modules/@electric-sql/pglite/package.json'), 'utf8')) as { version: string };
  const dir = join(tmpdir(), 'rheo-test-pglite');
  const file = join(dir, `template-${version}.tar`);
  try {
    return new Blob([readFileSync(file)]);
  } catch {
    const fresh = await PGlite.create();
    const dump = await fresh.dumpDataDir('none');
    await fresh.close();
    mkdirSync(dir, { recursive: true });
    // Written aside and renamed: test files racing here each write a whole one.
    const partial = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
    writeFileSync(partial, Buffer.from(await dump.arrayBuffer()));
    renameSync(partial, file);
    return dump;
  }
}

/**
 * One in-memory PGlite per test file, lent to every test backend (each in a
 * fresh schema): a start costs seconds, a schema milliseconds. Closed after
 * the file.
 */
export function sharedPglite(): Promise<PGlite> {
  shared ??= template().then((loadDataDir) => PGlite.create({ loadDataDir }));
  return shared;
}

/** Schemas of closed test backends, emptied again before reuse. */
const freeSchemas: string[] = [];

/**
 * A migrated PGlite backend in an empty schema on the file's shared
 * instance. Migrating a schema is most of a short test's time on PGlite
 * (about 40 DDL statements and routines), so the schema of a closed backend
 * is reused: emptied with TRUNCATE ... RESTART IDENTITY, which leaves it as
 * a fresh migration would (checked in test/pglite/transactions.test.ts).
 */
export async function makePgliteTestBackend(clock?: Clock, options: PgliteBackendOptions = {}): Promise<PgliteBackend> {
  const pglite = await sharedPglite();
  const reused = freeSchemas.pop();
  const schema = reused ?? `t_${randomBytes(5).toString('hex')}`;
  const backend = pgliteBackend({ pglite, schema, clock, ...options });
  backends.add(backend);
  if (reused !== undefined) await emptySchema(backend, schema);
  await backend.migrate();
  const close = backend.close.bind(backend);
  let returned = false;
  backend.close = async () => {
    await close();
    if (!returned) {
      returned = true;
      freeSchemas.push(schema);
    }
  };
  return backend;
}

/** Every table of `schema` but the migration ledger, emptied, with identities restarted (through the session, like every statement). */
export async function emptySchema(backend: PgliteBackend, schema: string): Promise<void> {
  const { rows } = await backend.pool.query<{ name: string }>(
    `SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables WHERE schemaname = $1 AND tablename <> 'migrations'`,
    [schema],
  );
  if (rows.length > 0) await backend.pool.query(`TRUNCATE ${rows.map((r) => r.name).join(', ')} RESTART IDENTITY CASCADE`);
}

export async function cleanupPglite(): Promise<void> {
  for (const backend of backends) await backend.close().catch(() => {});
  backends.clear();
  if (shared) {
    const pglite = await shared.catch(() => null);
    shared = null;
    await pglite?.close();
  }
}

// Started before the file's tests, so no test's own timeout pays for the start.
beforeAll(async () => {
  if (process.env.RHEO_MEMORY_ONLY !== '1') await sharedPglite();
}, 180_000);
afterAll(cleanupPglite);
