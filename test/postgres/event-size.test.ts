import { describe, expect, it } from 'vitest';
import { claimRoutine } from '../../src/backends/postgres/routines.js';
import { readSql } from '../../src/backends/postgres/sql/append.js';
import { jsonNumberBytes } from '../../src/core/json-size.js';
import { ManualClock } from '../../src/core/clock.js';
import { createRheo } from '../../src/rheo.js';
import { makeTestBackend, sharedPool } from '../support/postgres.js';
import { isLogSegment, isSegmentIndex, nodes, type PlanNode } from './plan-nodes.js';

const KiB = 1024;

/**
 * The byte bound of the claim, read and query inside PostgreSQL (migration
 * 003), with events near a configured size limit instead of 100 MB ones: the
 * claim returns all its leases as ONE json value, which for six 100 MB events
 * once passed V8's string limit and crashed every process that claimed them.
 */
describe('postgres event sizes', () => {
  async function setup(maxEventBytes: number) {
    const clock = new ManualClock();
    const backend = await makeTestBackend(clock);
    const rheo = createRheo({ backend, clock, limits: { maxEventBytes } });
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    return { rheo, schema: `"${backend.schema}"` };
  }

  it('stores each event size as the core rule computes it', async () => {
    const { rheo, schema } = await setup(64 * KiB);
    await rheo.append('s', { payload: { a: 'é', n: [1e21, 1.5e-7] }, metadata: { k: true } });
    const { rows } = await sharedPool().query<{ size_bytes: number }>(`SELECT size_bytes FROM ${schema}.events`);
    // {"a":"é","n":[1000000000000000000000,0.00000015]} is 50 bytes, {"k":true} 10.
    expect(rows).toEqual([{ size_bytes: 60 }]);
  });

  it('counts numbers with the digits PostgreSQL stores and prints for them', async () => {
    const numbers = [0, -0, 1, -1, 0.1, 123.456, 1e20, 1e21, -1.2345e25, 1.5e-7, 1e-6, 5e-324, -1.7976931348623157e308, 2 ** 53 + 2];
    const { rows } = await sharedPool().query<{ bytes: number }>(
      'SELECT octet_length(x::jsonb::text) AS bytes FROM unnest($1::text[]) WITH ORDINALITY AS t(x, i) ORDER BY i',
      [numbers.map((n) => JSON.stringify(n))],
    );
    expect(rows.map((r) => r.bytes)).toEqual(numbers.map(jsonNumberBytes));
  });

  it('a claim of events near the size limit returns at most maxBytes of them as one json value; the rest stays claimable', async () => {
    const { rheo, schema } = await setup(64 * KiB);
    // Each event exactly 64 KiB: a 64 KiB - 4 character string payload plus {}.
    await rheo.appendBatch('s', Array.from({ length: 20 }, () => ({ payload: 'x'.repeat(64 * KiB - 4) })));
    const claim = () =>
      sharedPool().query<{ n: number; json_bytes: number }>(
        `SELECT json_array_length(leases) AS n, octet_length(leases::text) AS json_bytes FROM (${claimRoutine.call(schema)}) c`,
        // group 1, stream 1, partition 0, limit 20, database clock, 30 s, consumer, 200 KiB, 5 attempts, lock up to 1 partition.
        [1, 1, [0], 20, null, 30_000, 'c', 200 * KiB, 5, 1],
      );
    const counts: number[] = [];
    for (let i = 0; i < 6; i++) {
      const { rows } = await claim();
      counts.push(rows[0]!.n);
      // Three 64 KiB events fit 200 KiB; the JSON adds only the per-lease fields.
      expect(rows[0]!.json_bytes).toBeLessThanOrEqual(200 * KiB + rows[0]!.n * 200);
    }
    expect(counts).toEqual([3, 3, 3, 3, 3, 3]);
    // Through the facade the remaining two come out too, none twice.
    const rest = await rheo.fetch('s', 'g', { limit: 20, maxBytes: 200 * KiB });
    expect(rest.map((l) => l.event.sequence)).toEqual([19, 20]);
    const { rows } = await sharedPool().query<{ cursor: string }>(`SELECT cursor FROM ${schema}.group_cursors`);
    expect(rows).toEqual([{ cursor: '20' }]);
  });

  it('events written before migration 003 (no stored size) are bounded by their stored JSON length', async () => {
    const { rheo, schema } = await setup(64 * KiB);
    await rheo.appendBatch('s', Array.from({ length: 6 }, () => ({ payload: 'x'.repeat(96) })));
    await sharedPool().query(`UPDATE ${schema}.events SET size_bytes = NULL`);
    // 100 bytes each by the rule, 100 by the stored text ("xx..." and {}): 250 fits two.
    expect((await rheo.fetch('s', 'g', { limit: 10, maxBytes: 250 })).map((l) => l.event.sequence)).toEqual([1, 2]);
    expect((await rheo.read('s', { maxBytes: 250 })).map((e) => e.sequence)).toEqual([1, 2]);
    expect((await rheo.query('s', { maxBytes: 250 })).events.map((e) => e.sequence)).toEqual([1, 2]);
  });

  it('read still reaches the log through its primary key only', async () => {
    const { rheo, schema } = await setup(64 * KiB);
    await rheo.appendBatch('s', Array.from({ length: 2000 }, (_, i) => ({ payload: i })));
    await sharedPool().query(`ANALYZE ${schema}.events`);
    const { rows } = await sharedPool().query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `EXPLAIN (FORMAT JSON) ${readSql(schema)}`,
      [1, 0, 1000, 100, 16 * KiB * KiB],
    );
    const events = nodes(rows[0]!['QUERY PLAN'][0]!.Plan).filter((n) => isLogSegment(n['Relation Name']));
    expect(events.length).toBeGreaterThan(0);
    expect(events.every((n) => isSegmentIndex(n['Index Name'], 'pkey'))).toBe(true);
  });
});
