import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { LATEST_VERSION } from '../../src/backends/postgres/migrations/index.js';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { RheoError } from '../../src/core/errors.js';
import { createRheo } from '../../src/rheo.js';
import { makeTestBackend, sharedPool, uniqueSchema } from '../support/postgres.js';

/** A loopback port that was just free and is now closed, so connecting to it is refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  return address.port;
}

describe('ping on PostgreSQL', () => {
  it('reports the migrated schema version', async () => {
    const rheo = createRheo({ backend: await makeTestBackend() });
    try {
      const result = await rheo.ping();
      expect(result).toEqual({ backend: 'postgres', roundTripMs: expect.any(Number), schemaVersion: LATEST_VERSION });
    } finally {
      await rheo.close();
    }
  });

  it('answers null for a schema that was never migrated, and creates nothing', async () => {
    const schema = uniqueSchema();
    const rheo = createRheo({ backend: postgresBackend({ pool: sharedPool() }, { schema }) });
    try {
      expect((await rheo.ping()).schemaVersion).toBeNull();
      const { rows } = await sharedPool().query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
      expect(rows).toHaveLength(0);
    } finally {
      await rheo.close();
    }
  });

  it('is backend_unavailable when the server cannot be reached', async () => {
    const port = await closedPort();
    const rheo = createRheo({
      backend: postgresBackend({ connectionString: `postgres://rheo@127.0.0.1:${port}/rheo` }, { schema: 'unreachable' }),
    });
    try {
      const error = await rheo.ping().then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(RheoError);
      expect((error as RheoError).code).toBe('backend_unavailable');
    } finally {
      await rheo.close();
    }
  });
});
