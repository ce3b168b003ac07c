import type { Backend } from '../../src/core/backend.js';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { redisBackend } from '../../src/backends/redis/redis-backend.js';

/** The backends the chaos scenarios run on. */
export type ChaosBackendKind = 'postgres' | 'redis';

/**
 * Where a chaos child finds the scenario's stream: the server's URL and the
 * scenario's namespace (a PostgreSQL schema, or a Redis key prefix).
 */
export interface ChildBackendArgs {
  /** Default `postgres`. */
  backend?: ChaosBackendKind;
  url: string;
  /** The PostgreSQL schema, or the Redis key prefix. */
  schema: string;
}

/**
 * The backend a child process uses, with clients of its own. On PostgreSQL
 * `name` becomes the connections' application_name (the runner's terminate
 * fault spares its own by name); on Redis every client rheo creates is named
 * `rheo`, which is how the runner's CLIENT KILL finds them.
 */
export function childBackend(args: ChildBackendArgs, name: string, options: { poolSize: number; notify: boolean }): Backend {
  if (args.backend === 'redis') return redisBackend({ url: args.url }, { prefix: args.schema, notify: options.notify });
  return postgresBackend(
    { connectionString: args.url, poolConfig: { max: options.poolSize, application_name: `rheo-chaos-${name}` } },
    { schema: args.schema, notify: options.notify },
  );
}
