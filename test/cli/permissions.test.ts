import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRheo } from '../../src/rheo.js';
import { databaseUrl, makeTestBackend, sharedPool } from '../support/postgres.js';
import { ensureBuilt, runCli } from './run-cli.js';

beforeAll(() => ensureBuilt(), 300_000);

const role = `rheo_ro_${randomBytes(5).toString('hex')}`;

afterAll(async () => {
  await sharedPool().query(`DROP OWNED BY ${role}`).catch(() => {});
  await sharedPool().query(`DROP ROLE IF EXISTS ${role}`);
});

/**
 * The operations guide (docs/operations.md) promises that a role with USAGE on the schema and SELECT on its
 * tables can run every inspection command: this role has exactly that.
 */
describe('rheo CLI with a read-only role', () => {
  it('inspects, plans and dry-runs, and is refused writes with exit 6', async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend });
    await rheo.createStream('s', { partitions: 2 });
    await rheo.createGroup('s', 'g');
    await rheo.appendBatch('s', [{ payload: 1 }, { payload: 2, partition: 1 }]);
    for (const lease of await rheo.fetch('s', 'g', { limit: 2 })) await rheo.reject(lease, 'no');
    const pool = sharedPool();
    await pool.query(`CREATE ROLE ${role} LOGIN`);
    await pool.query(`GRANT USAGE ON SCHEMA "${backend.schema}" TO ${role}`);
    await pool.query(`GRANT SELECT ON ALL TABLES IN SCHEMA "${backend.schema}" TO ${role}`);
    const url = new URL(databaseUrl());
    url.username = role;
    url.password = '';
    const flags = ['--url', url.toString(), '--schema', backend.schema, '--json'];

    for (const args of [
      ['streams'],
      ['groups', 's'],
      ['describe', 's', 'g'],
      ['lag', 's', 'g'],
      ['dead-letters', 's', 'g', '--payload'],
      ['tail', 's'],
      ['migrate', '--print-sql'],
      ['replay', 's', 'g', '--from-sequence', '1', '--dry-run'],
    ]) {
      const result = await runCli([...args, ...flags]);
      expect({ args, code: result.code, stderr: result.stderr }).toEqual({ args, code: 0, stderr: '' });
    }

    const refused = await runCli(['redrive', 's', 'g', ...flags]);
    expect(refused.code).toBe(6);
    expect(JSON.parse(refused.stderr)).toMatchObject({ error: { code: 'permission_denied', stream: 's', group: 'g' } });
    expect((await rheo.groupInfo('s', 'g')).deadLetters).toBe(2);
  });
});
