import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { RheoError } from '../../src/core/errors.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { databaseUrl, makeTestBackend, sharedPool, uniqueSchema } from '../support/postgres.js';

const roles: string[] = [];
const opened: Rheo[] = [];
afterEach(async () => {
  for (const rheo of opened.splice(0)) await rheo.close();
  for (const role of roles.splice(0)) {
    // Roles are cluster-wide: revoke what was granted in this database, then drop.
    await sharedPool().query(`DROP OWNED BY "${role}"`);
    await sharedPool().query(`DROP ROLE "${role}"`);
  }
});

/**
 * A login role holding exactly the runtime privileges the backend README
 * documents on `schema` (EXECUTE on the functions is PUBLIC's by default),
 * and a connection string for it.
 */
async function runtimeRole(schema: string): Promise<string> {
  const role = `rheo_rt_${randomBytes(5).toString('hex')}`;
  const password = randomBytes(12).toString('hex');
  roles.push(role);
  const pool = sharedPool();
  // Identifiers and the hex password are generated above, never user input.
  await pool.query(`CREATE ROLE "${role}" LOGIN PASSWORD '${password}'`);
  await pool.query(`GRANT USAGE ON SCHEMA "${schema}" TO "${role}"`);
  await pool.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${schema}" TO "${role}"`);
  await pool.query(`GRANT USAGE ON ALL SEQUENCES IN SCHEMA "${schema}" TO "${role}"`);
  const url = new URL(databaseUrl());
  url.username = role;
  url.password = password;
  return url.toString();
}

function rheoAs(url: string, schema: string): Rheo {
  const rheo = createRheo({ backend: postgresBackend({ connectionString: url, poolConfig: { max: 2 } }, { schema }) });
  opened.push(rheo);
  return rheo;
}

describe('postgres with the documented runtime privileges', () => {
  it('migrate() on an up-to-date schema succeeds, and appends, claims, acks and lag work', async () => {
    const owner = await makeTestBackend();
    const admin = createRheo({ backend: owner });
    await admin.createStream('s');
    await admin.createGroup('s', 'g');
    const rheo = rheoAs(await runtimeRole(owner.schema), owner.schema);
    await rheo.migrate();
    await rheo.append('s', { payload: 1 });
    const [lease] = await rheo.fetch('s', 'g');
    expect(lease?.event.payload).toBe(1);
    await rheo.ack(lease!);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });

  it('a statement the role may not run is permission_denied, not internal', async () => {
    const owner = await makeTestBackend();
    const url = await runtimeRole(owner.schema);
    // Creating a schema needs CREATE on the database, which the runtime role lacks.
    const fresh = rheoAs(url, uniqueSchema());
    const error = await fresh.migrate().then(
      () => null,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(RheoError);
    expect((error as RheoError).code).toBe('permission_denied');
    expect((error as RheoError).cause).toMatchObject({ code: '42501' });
    // A table it was not granted a privilege on: DELETE revoked, so an ack (which deletes its row) is refused.
    await sharedPool().query(`REVOKE DELETE ON ALL TABLES IN SCHEMA "${owner.schema}" FROM "${roles[0]!}"`);
    const admin = createRheo({ backend: owner });
    await admin.createStream('s');
    await admin.createGroup('s', 'g');
    await admin.append('s', { payload: 1 });
    const rheo = rheoAs(url, owner.schema);
    const [lease] = await rheo.fetch('s', 'g');
    await expect(rheo.ack(lease!)).rejects.toMatchObject({ code: 'permission_denied' });
  });
});
