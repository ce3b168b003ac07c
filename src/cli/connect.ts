import { RheoError } from '../core/errors.js';
import { createRheo, type Rheo } from '../rheo.js';
import { postgresBackend, type PostgresBackend } from '../backends/postgres/postgres-backend.js';

export interface ConnectionFlags {
  url?: string;
  schema?: string;
}

export interface Connection {
  rheo: Rheo;
  backend: PostgresBackend;
}

/**
 * The memory backend lives inside one process, so a command-line tool can
 * only ever talk to a store shared with the applications: a URL is required.
 */
export function connect(flags: ConnectionFlags): Connection {
  const url = flags.url ?? process.env.RHEO_DATABASE_URL;
  if (url === undefined || url === '') {
    throw new RheoError('invalid_argument', 'no database URL: pass --url or set RHEO_DATABASE_URL');
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  if (scheme === 'redis' || scheme === 'rediss') {
    throw new RheoError('unsupported', 'the Redis backend does not exist yet; rheo supports postgres:// URLs');
  }
  if (scheme !== 'postgres' && scheme !== 'postgresql') {
    throw new RheoError('invalid_argument', `unsupported database URL scheme "${scheme ?? ''}": use postgres://`);
  }
  // One connection is enough for a command; fail fast instead of waiting on
  // an unreachable host for the driver's default (no) timeout.
  const backend = postgresBackend(
    { connectionString: url, poolConfig: { max: 2, connectionTimeoutMillis: 10_000 } },
    { schema: flags.schema ?? process.env.RHEO_SCHEMA ?? 'rheo' },
  );
  // A command runs for moments: no background trimmer (the applications run theirs).
  return { rheo: createRheo({ backend, retention: { enabled: false } }), backend };
}
