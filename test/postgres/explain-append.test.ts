import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { appendSql } from '../../src/backends/postgres/sql/append.js';
import { createRheo } from '../../src/rheo.js';
import { makeTestBackend, sharedPool } from '../support/postgres.js';
import { isLogSegment, isSegmentIndex, nodes, type PlanNode } from './plan-nodes.js';

/**
 * The append is a named prepared statement, so each connection plans it
 * generically once, typically while the log is still small, and keeps that
 * plan while the log grows. Its idempotency lookup must probe the unique
 * (stream_id, id) index per input id even then: a plan that reaches events
 * through another index walks the whole stream on every append. Only the
 * ids a caller gave are probed: the ones rheo generated for the call are new.
 */
describe('postgres append plan on a young log', () => {
  let client: pg.PoolClient;
  let schema: string;

  beforeAll(async () => {
    const backend = await makeTestBackend();
    schema = `"${backend.schema}"`;
    const rheo = createRheo({ backend });
    await rheo.createStream('s', { partitions: 4 });
    await rheo.append('s', { payload: 1 });
    client = await sharedPool().connect();
  });

  afterAll(async () => {
    await client.query('RESET plan_cache_mode');
    client.release();
  });

  /** The append of 100 events, `given` of whose ids came from the caller; EXPLAIN's options as given. */
  async function explainAppend(options: string, given: number, tag: string): Promise<PlanNode[]> {
    await client.query('SET plan_cache_mode = force_generic_plan');
    await client.query(`PREPARE young_append AS ${appendSql(schema)}`);
    const idList = Array.from({ length: 100 }, (_, i) => `"${tag}-${i}"`);
    const list = (value: string) => `'{${Array.from({ length: 100 }, () => value).join(',')}}'`;
    const parts = `'{${Array.from({ length: 100 }, (_, i) => i % 4).join(',')}}'`;
    try {
      const result = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
        `EXPLAIN (${options}) EXECUTE young_append(1, '{${idList.join(',')}}', ${list('"t"')}, ${list('"k"')}, ${list('"{}"')}, ${list('"{}"')}, ${parts}, ${list('"2026-01-01T00:00:00Z"')}, 'c', 's', false, ${list('2')}, '{${idList.slice(0, given).join(',')}}')`,
      );
      return nodes(result.rows[0]!['QUERY PLAN'][0]!.Plan).filter(
        (n) => isLogSegment(n['Relation Name']) && n['Node Type'] !== 'ModifyTable',
      );
    } finally {
      await client.query('DEALLOCATE young_append');
    }
  }

  it('probes events only through the (stream_id, id) unique index, by id', async () => {
    const reads = await explainAppend('FORMAT JSON', 100, 'plan');
    expect(reads.length).toBeGreaterThan(0);
    for (const read of reads) {
      expect(isSegmentIndex(read['Index Name'], 'id_idx')).toBe(true);
      expect(read['Index Cond']).toContain('id =');
    }
  });

  it('probes once per caller-given id and never for the ids rheo generated', async () => {
    await client.query('BEGIN');
    try {
      // Run (ANALYZE) in a transaction rolled back: 30 of 100 ids came from the caller.
      const reads = await explainAppend('ANALYZE, FORMAT JSON', 30, 'run');
      expect(reads.length).toBeGreaterThan(0);
      for (const read of reads) expect(read['Actual Loops']).toBe(30);
    } finally {
      await client.query('ROLLBACK');
    }
  });
});
