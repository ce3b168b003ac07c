import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { claimRoutine } from '../../src/backends/postgres/routines.js';
import { claimSql, directClaimSql } from '../../src/backends/postgres/sql/claim.js';
import { ManualClock } from '../../src/core/clock.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { makeTestBackend, sharedPool } from '../support/postgres.js';

/**
 * The direct claim (sql/claim.ts directClaimSql) stands in for the `plain`
 * claim when every locked partition holds its whole round-robin share: it
 * must lease exactly what `plain` would, and write nothing and answer no row
 * when its own checks fail, so the routine falls back to `plain`. Each case
 * runs both statements on the same state, each in a transaction that is
 * rolled back, and compares the leases, the range rows and the cursors.
 */
type Claimed = [leaseId: string, attempt: number, id: string, partition: number, sequence: number];

interface Outcome {
  rows: number;
  leases: Array<{ partition: number; sequence: number; attempt: number; token: string }>;
  ranges: Array<{ partition: number; first_seq: string; last_seq: string; settled: string; consumer_id: string; token: string }>;
  cursors: Array<{ partition: number; cursor: string }>;
}

describe('postgres direct claim', () => {
  let rheo: Rheo;
  let schema: string;
  let client: pg.PoolClient;
  let ids: { group: number; stream: number };

  beforeAll(async () => {
    const clock = new ManualClock();
    const backend = await makeTestBackend(clock);
    schema = `"${backend.schema}"`;
    rheo = createRheo({ backend, clock });
    await rheo.createStream('s', { partitions: 3 });
    await rheo.createGroup('s', 'g');
    // Partition 0 and 2 get 10 events each, partition 1 only 4; payloads of 13 bytes.
    const inputs = [];
    for (let i = 0; i < 10; i++) for (const partition of [0, 1, 2]) if (partition !== 1 || i < 4) inputs.push({ payload: { n: i, p: partition }, partition });
    await rheo.appendBatch('s', inputs);
    client = await sharedPool().connect();
    const { rows } = await client.query<{ group: number; stream: number }>(
      `SELECT g.id AS group, s.id AS stream FROM ${schema}.groups g JOIN ${schema}.streams s ON s.id = g.stream_id WHERE s.name = 's' AND g.name = 'g'`,
    );
    ids = rows[0]!;
  });

  afterAll(() => client.release());

  /** `work` inside a transaction that is always rolled back, so every case starts from the same state. */
  async function rolledBack<R>(work: () => Promise<R>): Promise<R> {
    await client.query('BEGIN');
    try {
      return await work();
    } finally {
      await client.query('ROLLBACK');
    }
  }

  function run(text: string, partitions: number[], limit: number, maxBytes = 1 << 20): Promise<Outcome> {
    return rolledBack(async () => {
      await client.query(`SELECT 1 FROM ${schema}.group_cursors WHERE group_id = $1 ORDER BY partition FOR UPDATE`, [ids.group]);
      const answer = await client.query<{ leases: Claimed[] }>(text, [ids.group, ids.stream, partitions, limit, null, 30_000, 'c1', maxBytes]);
      const ranges = await client.query<Outcome['ranges'][number]>(
        `SELECT partition, first_seq, last_seq, settled::text AS settled, consumer_id, token FROM ${schema}.lease_ranges ORDER BY partition`,
      );
      const cursors = await client.query<Outcome['cursors'][number]>(
        `SELECT partition, cursor FROM ${schema}.group_cursors WHERE group_id = $1 ORDER BY partition`,
        [ids.group],
      );
      const leases = (answer.rows[0]?.leases ?? [])
        .map(([leaseId, attempt, , partition, sequence]) => {
          expect(leaseId).toBe(`${leaseId.split('.')[0]}.${sequence}`);
          return { partition, sequence, attempt, token: leaseId.split('.')[0]! };
        })
        .sort((a, b) => a.partition - b.partition || a.sequence - b.sequence);
      return { rows: answer.rows.length, leases, ranges: ranges.rows, cursors: cursors.rows };
    });
  }

  /** Tokens are random per claim: compare them only through what they link (a lease to its range). */
  function untokened(o: Outcome) {
    const byPartition = new Map(o.ranges.map((r) => [r.partition, r.token]));
    for (const lease of o.leases) expect(lease.token).toBe(byPartition.get(lease.partition));
    return {
      rows: o.rows,
      leases: o.leases.map(({ token: _token, ...rest }) => rest),
      ranges: o.ranges.map(({ token: _token, ...rest }) => rest),
      cursors: o.cursors,
    };
  }

  const plain = () => claimSql(schema, 'plain', '$3', 'false', '$4');
  const direct = () => directClaimSql(schema, '$3', 'false');

  it('leases the same shares, ranges and cursors as the plain claim', async () => {
    // Every visiting order and limit whose shares partition 1 (4 events) can fill.
    const cases: Array<[number[], number]> = [
      [[0, 2], 1], [[2, 0], 1], [[0, 2], 7], [[2, 0], 7], [[0, 2], 20],
      [[0, 1, 2], 2], [[1, 2, 0], 5], [[2, 1, 0], 10], [[0, 1, 2], 12], [[1], 4], [[2], 9],
    ];
    for (const [partitions, limit] of cases) {
      const expected = untokened(await run(plain(), partitions, limit));
      const got = untokened(await run(direct(), partitions, limit));
      expect(got, `partitions ${partitions.join(',')}, limit ${limit}`).toEqual(expected);
      expect(got.leases).toHaveLength(limit);
    }
    // One share by hand: limit 5 over [1, 2, 0] is 2, 2 and 1.
    const five = untokened(await run(direct(), [1, 2, 0], 5));
    expect(five.ranges.map((r) => [r.partition, r.first_seq, r.last_seq, r.settled, r.consumer_id])).toEqual([
      [0, '1', '1', '0', 'c1'],
      [1, '1', '2', '00', 'c1'],
      [2, '1', '2', '00', 'c1'],
    ]);
    expect(five.cursors).toEqual([
      { partition: 0, cursor: '1' },
      { partition: 1, cursor: '2' },
      { partition: 2, cursor: '2' },
    ]);
  });

  it('answers no row and writes nothing when a share holds fewer events than the limit needs', async () => {
    // Limit 15 over three partitions is 5 each; partition 1 has 4.
    const short = await run(direct(), [0, 1, 2], 15);
    expect(short).toEqual({
      rows: 0,
      leases: [],
      ranges: [],
      cursors: [0, 1, 2].map((partition) => ({ partition, cursor: '0' })),
    });
    expect((await run(direct(), [1], 5)).rows).toBe(0);
    // The plain claim takes the share partition 1 lacks from the others.
    expect((await run(plain(), [0, 1, 2], 15)).leases).toHaveLength(15);
  });

  it('answers no row and writes nothing past the byte budget, except for a single event', async () => {
    const expected = await run(plain(), [0, 2], 4, 30);
    expect(expected.leases.length).toBeGreaterThan(0);
    expect(expected.leases.length).toBeLessThan(4);
    const over = await run(direct(), [0, 2], 4, 30);
    expect(over).toEqual({ rows: 0, leases: [], ranges: [], cursors: [0, 1, 2].map((partition) => ({ partition, cursor: '0' })) });
    // The first event is always leased, whatever its size.
    const one = untokened(await run(direct(), [2], 1, 1));
    expect(one).toEqual(untokened(await run(plain(), [2], 1, 1)));
    expect(one.leases).toEqual([{ partition: 2, sequence: 1, attempt: 1 }]);
  });

  it('the claim routine takes the direct claim exactly when each share is known to be there', async () => {
    // The log's index scans this transaction made, nested statements included:
    // the direct claim makes one range scan per partition; the plain path
    // probes each partition, reads its candidates and reads the picked ones.
    function claim(partitions: number[], limit: number, maxBytes = 1 << 20, setup?: string): Promise<{ leases: number; scans: number }> {
      return rolledBack(async () => {
        if (setup) await client.query(setup);
        // Counted since the backend last reported its statistics: the difference is this claim's.
        const scans = async () => {
          const { rows } = await client.query<{ n: string }>(
            `SELECT COALESCE(sum(idx_scan), 0) AS n FROM pg_stat_xact_user_tables WHERE schemaname = $1 AND relname LIKE 'events%'`,
            [schema.slice(1, -1)],
          );
          return Number(rows[0]!.n);
        };
        const before = await scans();
        const { rows } = await client.query<{ leases: Claimed[] }>(claimRoutine.call(schema), [
          ids.group, ids.stream, partitions, limit, null, 30_000, 'c1', maxBytes, 5, partitions.length,
        ]);
        return { leases: rows[0]!.leases.length, scans: (await scans()) - before };
      });
    }
    // A generic plan scans each segment of the log once per partition read
    // (segment 0 of a new schema is empty): what one partition's range costs.
    const one = await claim([1], 4);
    expect(one.leases).toBe(4);
    const perRange = one.scans;
    expect(perRange).toBeGreaterThan(0);
    expect(await claim([0, 1, 2], 12)).toEqual({ leases: 12, scans: 3 * perRange });
    expect(await claim([2, 0], 20)).toEqual({ leases: 20, scans: 2 * perRange });
    // Partition 1 holds 4 of the 5 a claim of 15 would take from it: the plain walk.
    const short = await claim([0, 1, 2], 15);
    expect(short.leases).toBe(15);
    expect(short.scans).toBeGreaterThan(3 * perRange);
    // Past the byte budget the direct claim gives way, and the plain walk stops short.
    const over = await claim([0, 2], 4, 30);
    expect(over.leases).toBeLessThan(4);
    expect(over.scans).toBeGreaterThan(2 * perRange);
    // The readiness check saw more than is there (as when another claim moves a
    // cursor after it): the direct claim finds too few events and writes
    // nothing, and the plain walk claims what is there.
    const stale = await claim([0, 1, 2], 15, 1 << 20, `UPDATE ${schema}.stream_partitions SET high_watermark = 100 WHERE stream_id = ${ids.stream}`);
    expect(stale.leases).toBe(15);
  });

  it('through fetch: a backlog is leased in the same round-robin order, then the partitions left run dry', async () => {
    const fetched = await rheo.fetch('s', 'g', { limit: 6 });
    expect(fetched.map((l) => [l.event.partition, l.event.sequence])).toEqual([
      [0, 1], [1, 1], [2, 1],
      [0, 2], [1, 2], [2, 2],
    ]);
    // Partition 1 has two left: the next claim of 9 (visiting 1, 2, 0) cannot
    // take 3 from each, and the plain walk takes over.
    const next = await rheo.fetch('s', 'g', { limit: 9 });
    expect(next.map((l) => [l.event.partition, l.event.sequence])).toEqual([
      [1, 3], [2, 3], [0, 3],
      [1, 4], [2, 4], [0, 4],
      [2, 5], [0, 5], [2, 6],
    ]);
    await rheo.ackMany([...fetched, ...next]);
    expect((await rheo.lag('s', 'g')).lag).toBe(24 - 15);
  });
});
