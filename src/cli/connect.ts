import { RheoError } from '../core/errors.js';
import { createRheo, type Rheo } from '../rheo.js';
import { postgresBackend, type PostgresBackend } from '../backends/postgres/postgres-backend.js';
import { redisBackend, type RedisBackend } from '../backends/redis/redis-backend.js';
import { pgliteBackend, pgliteDataDir, type PgliteBackend } from '../backends/pglite/pglite-backend.js';

export interface ConnectionFlags {
  url?: string;
  schema?: string;
}

export interface Connection {
  rheo: Rheo;
  /** Which backend the URL selected: tell them apart by `backend.name`. */
  backend: PostgresBackend | PgliteBackend | RedisBackend;
}

/**
 * The memory backend lives inside one process, so a command-line tool can
 * only ever talk to a store shared with the applications: a URL is required.
 * `postgres://` selects PostgreSQL (`--schema` is the schema); `redis://` and
 * `rediss://` select Redis (`--schema` is the key prefix); `pglite://<dir>`
 * opens a PGlite data directory (`--schema` is the schema). PGlite is one
 * process per directory: a command on a directory an application has open
 * fails with `backend_unavailable` naming that process.
 */
export function connect(flags: ConnectionFlags): Connection {
  const url = flags.url ?? process.env.RHEO_DATABASE_URL;
  if (url === undefined || url === '') {
    throw new RheoError('invalid_argument', 'no database URL: pass --url or set RHEO_DATABASE_URL');
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  const name = flags.schema ?? process.env.RHEO_SCHEMA ?? 'rheo';
  if (scheme === 'redis' || scheme === 'rediss') {
    const backend = redisBackend({ url }, { prefix: name });
    // A command runs for moments: no background trimmer (the applications run theirs).
    return { rheo: createRheo({ backend, retention: { enabled: false } }), backend };
  }
  if (scheme === 'pglite') {
    const backend = pgliteBackend({ dataDir: pgliteDataDir(url), schema: name });
    return { rheo: createRheo({ backend, retention: { enabled: false } }), backend };
  }
  if (scheme !== 'postgres' && scheme !== 'postgresql') {
    throw new RheoError('invalid_argument', `unsupported database URL scheme "${scheme ?? ''}": use postgres://, pglite:// or redis://`);
  }
  // One connection is enough for a command; fail fast instead of waiting on
  // an unreachable host for the driver's default (no) timeout.
  const backend = postgresBackend({ connectionString: url, poolConfig: { max: 2, connectionTimeoutMillis: 10_000 } }, { schema: name });
  // A command runs for moments: no background trimmer (the applications run theirs).
  return { rheo: createRheo({ backend, retention: { enabled: false } }), backend };
}
