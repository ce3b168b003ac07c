import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docBlock } from '../support/doc-blocks.js';
import { databaseUrl, sharedPool } from '../support/postgres.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The block after a marker in the documentation (docs/transactions.md), verbatim, with `'rheo'` pointed at the sources. */
const block = (name: string, lang: 'ts' | 'sql'): string => docBlock(name, 'test/postgres/readme-transactions.test.ts', lang);

describe('docs/transactions.md examples (run verbatim)', () => {
  // Inside the project, so the examples' own imports (pg) resolve from its node_modules.
  const dir = mkdtempSync(join(ROOT, '.readme-tx-'));
  const database = `rheo_readme_tx_${process.pid}`;
  let url = '';

  beforeAll(async () => {
    // Their own database: the examples use the default schema 'rheo' and plain table names.
    await sharedPool().query(`CREATE DATABASE ${database}`);
    const parsed = new URL(databaseUrl());
    parsed.pathname = `/${database}`;
    url = parsed.toString();
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await sharedPool().query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  });

  async function run(name: string): Promise<string> {
    const file = join(dir, `${name}.mts`);
    writeFileSync(file, block(name, 'ts'));
    const child = spawn(process.execPath, ['--import', 'tsx', file], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const guard = setTimeout(() => child.kill('SIGKILL'), 90_000);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    clearTimeout(guard);
    expect(code, stderr).toBe(0);
    return stdout;
  }

  it('outbox, trigger and exactly-once examples run and do what they say', async () => {
    expect(await run('outbox')).toContain('outbox: order-1001 committed with its order');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(block('outbox-trigger', 'sql'));
      await client.query(`INSERT INTO orders (id, customer, total) VALUES ('1002', 'customer-9', 5)`);
      const { rows } = await client.query(`SELECT id, type, key FROM rheo.events ORDER BY id`);
      expect(rows).toEqual([
        { id: 'order-1001', type: 'order.placed', key: 'customer-42' },
        { id: 'order-1002', type: 'order.placed', key: 'customer-9' },
      ]);
      expect(await run('exactly-once')).toContain('exactly-once: 3 invoice(s), lag 0');
      const invoices = await client.query(`SELECT order_id FROM invoices ORDER BY order_id`);
      expect(invoices.rows.map((r: { order_id: string }) => r.order_id)).toEqual(['1001', '1002', '2001']);
    } finally {
      await client.end();
    }
  }, 240_000);

  it('the partition-ownership exactly-once example runs and does what it says', async () => {
    expect(await run('exactly-once-partitions')).toContain('exactly-once (partitions): 2 ledger row(s), lag 0');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const ledger = await client.query(`SELECT payment_id FROM ledger ORDER BY payment_id`);
      expect(ledger.rows.map((r: { payment_id: string }) => r.payment_id)).toEqual(['p-1', 'p-2']);
    } finally {
      await client.end();
    }
  }, 120_000);
});
