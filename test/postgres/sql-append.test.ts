import fc from 'fast-check';
import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { PostgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { prepareAppend } from '../../src/core/arguments.js';
import { ManualClock } from '../../src/core/clock.js';
import { partitionForKey } from '../../src/core/partitioner.js';
import type { JsonValue } from '../../src/core/types.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { makeTestBackend, sharedPool } from '../support/postgres.js';

const held: pg.PoolClient[] = [];
afterEach(() => {
  for (const client of held.splice(0)) client.release(true);
});

async function setup(): Promise<{ rheo: Rheo; backend: PostgresBackend; s: string }> {
  const backend = await makeTestBackend();
  return { rheo: createRheo({ backend }), backend, s: `"${backend.schema}"` };
}

/** Keys of every shape: ASCII, Latin-1, CJK, emoji (4-byte UTF-8), combining marks, empty, every length mod 4. */
const KEY = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 }).filter((k) => !k.includes('\u0000')),
  fc.constantFrom('', 'a', 'ab', 'abc', 'abcd', 'é', '日本語', '🎉', 'key-42', 'naïve café', 'e\u0301'),
);

describe('SQL append function (migration 7)', () => {
  it('murmur2 routes every key to the partition the TypeScript partitioner picks', async () => {
    const { s } = await setup();
    const keys = fc.sample(KEY.filter((k) => k.isWellFormed()), { numRuns: 3000, seed: 7 });
    keys.push('🎉'.repeat(33), 'x'.repeat(1024));
    for (const partitions of [1, 3, 7, 12, 64]) {
      const { rows } = await sharedPool().query<{ p: number }>(
        `SELECT ${s}.murmur2(convert_to(k, 'UTF8')) % $2 AS p FROM unnest($1::text[]) WITH ORDINALITY AS t(k, i) ORDER BY i`,
        [keys, partitions],
      );
      expect(rows.map((r) => r.p)).toEqual(keys.map((k) => partitionForKey(k, partitions)));
    }
  });

  it('sizes JSON and counts string lengths as the TypeScript append does', async () => {
    const { s } = await setup();
    const clock = new ManualClock();
    const values = fc.sample(
      fc.jsonValue({ maxDepth: 4 }).filter((v) => !JSON.stringify(v).includes('\\u0000')),
      { numRuns: 400, seed: 11 },
    ) as JsonValue[];
    values.push('tab\tquote"back\\slash\u0001', { 'ké y': ['🎉', 1.5, -0, 1e-7, 123456789012345, null, true, false] });
    const { rows } = await sharedPool().query<{ size: number }>(
      `SELECT ${s}.json_size(v)::int AS size FROM unnest($1::jsonb[]) WITH ORDINALITY AS t(v, i) ORDER BY i`,
      [values.map((v) => JSON.stringify(v))],
    );
    const expected = values.map((payload) => prepareAppend(clock, { payload }, 'x', { stream: 's', maxEventBytes: 1e9 }).size - 2);
    expect(rows.map((r) => r.size)).toEqual(expected);
    const strings = ['', 'abc', '🎉🎉', 'é', '日本'];
    const lengths = await sharedPool().query<{ n: number }>(`SELECT ${s}.js_length(x) AS n FROM unnest($1::text[]) WITH ORDINALITY AS t(x, i) ORDER BY i`, [strings]);
    expect(lengths.rows.map((r) => r.n)).toEqual(strings.map((x) => x.length));
  });

  it('appends like the TypeScript append: routing, ids, existed, and bad input refused with nothing written', async () => {
    const { rheo, s } = await setup();
    await rheo.createStream('orders', { partitions: 5 });
    const pool = sharedPool();
    const { rows: [row] } = await pool.query(
      `SELECT * FROM ${s}.append('orders', '{"total": 5}'::jsonb, type => 'order.placed', key => 'customer-ü', id => 'o-1')`,
    );
    expect(row).toEqual({ event_id: 'o-1', event_partition: partitionForKey('customer-ü', 5), event_sequence: '1', existed: false });
    const again = await pool.query(`SELECT * FROM ${s}.append('orders', '{"total": 6}'::jsonb, id => 'o-1')`);
    expect(again.rows[0]).toMatchObject({ event_id: 'o-1', existed: true });
    const generated = await pool.query(`SELECT * FROM ${s}.append('orders', 'null'::jsonb, "partition" => 4)`);
    expect(generated.rows[0]).toMatchObject({ event_partition: 4, event_sequence: '1', existed: false });
    expect(generated.rows[0].event_id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const [event] = await rheo.read('orders', { partition: partitionForKey('customer-ü', 5) });
    expect(event).toMatchObject({ id: 'o-1', type: 'order.placed', key: 'customer-ü', payload: { total: 5 }, metadata: {} });

    const refused: Array<[string, RegExp]> = [
      [`SELECT ${s}.append('bad name!', '1'::jsonb)`, /invalid_argument/],
      [`SELECT ${s}.append('orders', NULL)`, /invalid_argument/],
      [`SELECT ${s}.append('orders', '1'::jsonb, type => '')`, /invalid_argument/],
      [`SELECT ${s}.append('orders', '1'::jsonb, key => repeat('k', 1025))`, /invalid_argument/],
      [`SELECT ${s}.append('orders', '1'::jsonb, metadata => '[]'::jsonb)`, /invalid_argument/],
      [`SELECT ${s}.append('orders', '1'::jsonb, metadata => '{"correlationId": 5}'::jsonb)`, /invalid_argument/],
      [`SELECT ${s}.append('orders', '1'::jsonb, "partition" => 5)`, /invalid_partition/],
      [`SELECT ${s}.append('missing', '1'::jsonb)`, /stream_not_found/],
      [`SELECT ${s}.append('orders', to_jsonb(repeat('x', 100)), max_event_bytes => 50)`, /event_too_large/],
      [`SELECT ${s}.append('orders', (repeat('[', 101) || repeat(']', 101))::jsonb)`, /invalid_argument/],
    ];
    for (const [sql, message] of refused) await expect(pool.query(sql)).rejects.toThrow(message);
    const streams = await rheo.listStreams();
    expect(streams).toHaveLength(1);
    const total = await pool.query(`SELECT count(*)::int AS n FROM ${s}.events`);
    expect(total.rows[0].n).toBe(2);
  });

  it('a trigger appends one event per inserted row; they are consumed in commit order', async () => {
    const { rheo, s } = await setup();
    await rheo.createStream('orders', { partitions: 2 });
    await rheo.createGroup('orders', 'billing');
    const pool = sharedPool();
    await pool.query(`CREATE TABLE ${s}.orders (id text PRIMARY KEY, customer text NOT NULL, total int NOT NULL)`);
    await pool.query(`
      CREATE FUNCTION ${s}.order_placed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM ${s}.append('orders', jsonb_build_object('id', NEW.id, 'total', NEW.total),
                            type => 'order.placed', key => NEW.customer, id => 'order-' || NEW.id);
        RETURN NEW;
      END $$`);
    await pool.query(`CREATE TRIGGER order_placed AFTER INSERT ON ${s}.orders FOR EACH ROW EXECUTE FUNCTION ${s}.order_placed()`);
    // One customer, so one partition: the order of its events is the order of commits.
    const first = await pool.connect();
    const second = await pool.connect();
    held.push(first, second);
    await first.query('BEGIN');
    await second.query('BEGIN');
    await second.query(`SELECT 1`);
    await first.query(`INSERT INTO ${s}.orders VALUES ('a', 'c-1', 10)`);
    const secondPid = (await second.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const secondInsert = second.query(`INSERT INTO ${s}.orders VALUES ('b', 'c-1', 20), ('c', 'c-1', 30)`);
    for (let i = 0; i < 2000; i++) {
      const { rows } = await pool.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, [secondPid]);
      if (rows.length > 0) break;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(await rheo.fetch('orders', 'billing', { limit: 10 })).toEqual([]);
    await first.query('COMMIT');
    await secondInsert;
    await second.query('COMMIT');
    const rolledBack = await pool.connect();
    held.push(rolledBack);
    await rolledBack.query('BEGIN');
    await rolledBack.query(`INSERT INTO ${s}.orders VALUES ('d', 'c-1', 40)`);
    await rolledBack.query('ROLLBACK');
    await pool.query(`INSERT INTO ${s}.orders VALUES ('e', 'c-1', 50)`);
    const leases = await rheo.fetch('orders', 'billing', { limit: 10 });
    expect(leases.map((l) => [l.event.id, l.event.sequence, l.event.type])).toEqual([
      ['order-a', 1, 'order.placed'],
      ['order-b', 2, 'order.placed'],
      ['order-c', 3, 'order.placed'],
      ['order-e', 4, 'order.placed'],
    ]);
    expect(leases.every((l) => l.event.partition === partitionForKey('c-1', 2))).toBe(true);
  });
});
