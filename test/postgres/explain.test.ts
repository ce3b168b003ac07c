import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { nowSql } from '../../src/backends/postgres/rows.js';
import { claimableSql, claimSql, directClaimSql } from '../../src/backends/postgres/sql/claim.js';
import { commitSql } from '../../src/backends/postgres/sql/ownership.js';
import { ackSql, renewSql, settleSql } from '../../src/backends/postgres/sql/settle.js';
import { ManualClock } from '../../src/core/clock.js';
import type { Lease } from '../../src/core/types.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { makeTestBackend, sharedPool } from '../support/postgres.js';
import { isLogSegment, nodes, type PlanNode } from './plan-nodes.js';

function literal(client: pg.PoolClient, value: unknown): string {
  if (value === null) return 'NULL';
  if (typeof value === 'number') return String(value);
  if (Array.isArray(value)) {
    const items = value.map((v) => (v === null ? 'NULL' : `"${String(v).replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`));
    return client.escapeLiteral(`{${items.join(',')}}`);
  }
  return client.escapeLiteral(String(value));
}

/** Plan nodes that read `relation`, as "Node Type/Index Name". */
/**
 * For the log, the accesses of its segments (plan-nodes.ts) other than an
 * empty segment 0: every stream opens its first segment at creation, so in a
 * schema created at this version segment 0 holds nothing and a sequential
 * scan of its zero pages is the planner's right choice. Over a migrated
 * schema's segment 0 the claim probes its primary key like any segment's
 * (test/postgres/segments.test.ts).
 */
function accesses(plan: PlanNode, relation: string): string[] {
  return nodes(plan)
    .filter((n) =>
      relation === 'events'
        ? isLogSegment(n['Relation Name']) && !(n['Relation Name'] === 'events_0' && n['Node Type'] === 'Seq Scan')
        : n['Relation Name'] === relation,
    )
    .map((n) => `${n['Node Type']}/${n['Index Name'] ?? ''}`);
}

/**
 * The hot statements' plans, both custom (planned with the actual values) and
 * generic: settle, ack and renew are named prepared statements, which switch
 * to the generic plan after five executions, and the claim runs in a routine
 * that forces its generic plan (routines.ts; docs/design.md#postgresql-measurements records a generic
 * claim plan collapsing to 40 tps). Behind a transaction-mode pooler
 * (`pooler: 'transaction'`) nothing is named and every statement but the
 * routines' gets the custom plan. Over a realistic table state: thousands
 * of events, hundreds of live leases, statistics gathered.
 */
describe('postgres hot statement plans', () => {
  let rheo: Rheo;
  let schema: string;
  let leases: Lease[];
  let client: pg.PoolClient;

  beforeAll(async () => {
    const clock = new ManualClock();
    const backend = await makeTestBackend(clock);
    schema = `"${backend.schema}"`;
    rheo = createRheo({ backend, clock });
    await rheo.createStream('s', { partitions: 2 });
    await rheo.createGroup('s', 'g');
    for (let i = 0; i < 20_000; i += 5000) {
      await rheo.appendBatch('s', Array.from({ length: 5000 }, (_, j) => ({ payload: { n: i + j }, key: `k${j}` })));
    }
    for (let i = 0; i < 5; i++) await rheo.ackMany(await rheo.fetch('s', 'g', { limit: 1000 }));
    leases = await rheo.fetch('s', 'g', { limit: 400 });
    client = await sharedPool().connect();
    await client.query(`ANALYZE ${schema}.events, ${schema}.deliveries, ${schema}.group_cursors`);
  });

  afterAll(async () => {
    await client.query('RESET plan_cache_mode');
    client.release();
  });

  const claimParams = () => [1, 1, [0, 1], 500, null, 30_000, 'c', 16 << 20, 5];
  const settleParams = () => [
    leases.map(() => 1),
    leases.map((l) => l.event.partition),
    leases.map((l) => l.event.sequence),
    leases.map((l) => l.leaseId),
    leases.map(() => 'ack'),
    leases.map(() => null),
    leases.map(() => 0),
    leases.map(() => 5),
    null,
  ];
  const renewParams = () => [
    leases.map(() => 1),
    leases.map((l) => l.event.partition),
    leases.map((l) => l.event.sequence),
    leases.map((l) => l.leaseId),
    30_000,
    null,
  ];

  async function plans(name: string, text: string, params: unknown[]): Promise<{ custom: PlanNode; generic: PlanNode }> {
    const custom = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${text}`, params);
    await client.query('SET plan_cache_mode = force_generic_plan');
    await client.query(`PREPARE ${name} AS ${text}`);
    // EXECUTE takes no bind parameters: pass the same values as literals.
    const args = params.map((value) => literal(client, value)).join(', ');
    const generic = await client.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `EXPLAIN (FORMAT JSON) EXECUTE ${name}(${args})`,
    );
    await client.query(`DEALLOCATE ${name}`);
    await client.query('RESET plan_cache_mode');
    return { custom: custom.rows[0]!['QUERY PLAN'][0]!.Plan, generic: generic.rows[0]!['QUERY PLAN'][0]!.Plan };
  }

  it('claim (full, fresh-only, plain and direct) reads the log only through its primary key, never by scanning it', async () => {
    for (const path of ['full', 'fresh', 'plain', 'direct'] as const) {
      // The fresh, plain and direct claims never read $9 (max attempts): nothing they claim has been attempted.
      const params = path === 'full' ? claimParams() : claimParams().slice(0, 8);
      const text = path === 'direct' ? directClaimSql(schema) : claimSql(schema, path);
      const { custom, generic } = await plans(`rheo_claim_${path}`, text, params);
      for (const plan of [custom, generic]) {
        const events = accesses(plan, 'events');
        expect(events.length).toBeGreaterThan(0);
        expect(events.every((a) => /\/events_\d+_pkey$/.test(a))).toBe(true);
      }
    }
  });

  it('claim still reads the log by primary key for a stream newer than the statistics', async () => {
    // Statistics gathered above know only stream 1: the planner estimates one
    // row for any other stream_id, and an equality probe costs the same
    // through events_stream_ts_idx, which walks the stream's log per lease.
    await rheo.createStream('newer');
    await rheo.createGroup('newer', 'g');
    await rheo.appendBatch('newer', Array.from({ length: 2000 }, (_, j) => ({ payload: { n: j } })));
    for (const path of ['full', 'fresh', 'plain', 'direct'] as const) {
      const params = [2, 2, [0], 500, null, 30_000, 'c', 16 << 20, 5].slice(0, path === 'full' ? 9 : 8);
      const text = path === 'direct' ? directClaimSql(schema) : claimSql(schema, path);
      const { custom, generic } = await plans(`rheo_claim_newer_${path}`, text, params);
      for (const plan of [custom, generic]) {
        const events = accesses(plan, 'events');
        expect(events.length).toBeGreaterThan(0);
        expect(events).toEqual(events.map(() => expect.stringMatching(/\/events_\d+_pkey$/)));
      }
    }
  });

  it("the claim's readiness check never reads the log, for a stream the statistics know and one they do not", async () => {
    // The routine passes its clock variable; here the fourth parameter stands in for it.
    const text = claimableSql(schema, nowSql('$4'));
    for (const [name, params] of [
      ['rheo_claimable', [1, 1, [0, 1], null]],
      ['rheo_claimable_newer', [2, 2, [0], null]],
    ] as const) {
      const { custom, generic } = await plans(name, text, [...params]);
      for (const plan of [custom, generic]) {
        expect(nodes(plan).filter((n) => isLogSegment(n['Relation Name']))).toEqual([]);
        expect(accesses(plan, 'group_cursors').length).toBeGreaterThan(0);
      }
    }
  });

  it('settle, ack and renew find each lease by an exact deliveries primary-key match', async () => {
    for (const [name, text, params] of [
      ['rheo_settle', settleSql(schema), settleParams()],
      ['rheo_ack', ackSql(schema), settleParams().slice(0, 4)],
      ['rheo_renew', renewSql(schema), renewParams()],
    ] as const) {
      const { custom, generic } = await plans(name, text, params);
      for (const plan of [custom, generic]) {
        // Either one hash join over the (small) table, or an exact primary-key
        // probe per lease; never an index range walked once per lease.
        const scans = nodes(plan).filter((n) => n['Relation Name'] === 'deliveries' && n['Node Type'].includes('Scan'));
        expect(scans.length).toBeGreaterThan(0);
        for (const scan of scans) {
          if (scan['Node Type'] === 'Seq Scan') continue;
          expect(scan['Index Name']).toBe('deliveries_pkey');
          expect(scan['Index Cond']).toContain('sequence =');
        }
      }
    }
  });

  it('the offset commit (sent unnamed behind a transaction-mode pooler) reaches deliveries, cursors and owners only by primary key', async () => {
    const params = [[1, 1], [1, 1], [0, 1], ['m', 'm'], [1, 1], [500, 600], [], [], [], [], null, [true, true]];
    const { custom, generic } = await plans('rheo_commit', commitSql(schema), params);
    for (const plan of [custom, generic]) {
      for (const relation of ['deliveries', 'group_cursors', 'partition_owners']) {
        const scans = nodes(plan).filter((n) => n['Relation Name'] === relation && n['Node Type'].includes('Scan'));
        expect(scans.length).toBeGreaterThan(0);
        for (const scan of scans) {
          // A small table may be read whole; an index other than the primary key walks a range per partition.
          if (scan['Node Type'] === 'Seq Scan') continue;
          expect(scan['Index Name']).toBe(`${relation}_pkey`);
        }
      }
      expect(accesses(plan, 'events')).toEqual([]);
    }
  });
});
