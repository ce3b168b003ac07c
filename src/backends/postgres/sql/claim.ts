import { ms } from '../connection.js';
import { eventColumns, nowSql } from '../rows.js';

/**
 * fetch(): claim up to `limit` deliveries for one group in ONE statement, so
 * the round trips per fetch are independent of `limit` (no N+1 per lease).
 *
 * Claim strategy (DESIGN.md §3, docs/semantics.md): new events are claimed by
 * advancing the group's per-partition cursor over the log and inserting one
 * row per leased delivery; acks delete those rows. Claiming never flags log
 * rows in place, so it does not decay as dead index entries pile up, and the
 * group's storage stays bounded by its unsettled window plus dead letters.
 *
 * Steps, with the index and lock each relies on:
 * 1. `cur`: lock the group's cursor rows for the requested partitions with
 *    FOR UPDATE, always in partition order (group_cursors PK). Concurrent
 *    fetches of one group serialise per partition for the few milliseconds of
 *    this statement instead of claiming the same sequence twice, and the
 *    fixed lock order rules out deadlocks whatever the rotation. A waiter
 *    re-reads the advanced cursor (READ COMMITTED re-check of locked rows).
 * 2. `reopen`: claimable open deliveries (pending past their delay, or leases
 *    past expiry: `visible_at <= now`) through deliveries_visible_idx, lowest
 *    sequence first, FOR UPDATE SKIP LOCKED: a row being settled or claimed
 *    elsewhere is skipped, and a row reclaimed meanwhile fails the visible_at
 *    re-check. Rows whose next attempt would pass max_attempts are read
 *    separately (`spent`) so they never crowd out claimable ones.
 * 3. `fresh`: the next sequences after the cursor (events PK range scan),
 *    skipping ones already open. Open rows above the cursor only exist after
 *    a replay, so the deliveries PK is probed only for sequences at or below
 *    the partition's highest open sequence (`max_open`, one backward PK
 *    probe); the probe sits under an OR so the planner keeps it a per-row
 *    index probe instead of an anti-join that scans every open row. Only
 *    committed events are visible and they commit in sequence order, so none
 *    is skipped.
 * 4. Round-robin: rank candidates within a partition (rn), then take them
 *    ordered by (rn, position of the partition in $3), so each partition gets
 *    one per round starting at the rotating first partition in $3.
 * 5. `spent` rows the walk would have passed are dead-lettered
 *    ("max attempts exceeded"); picked open rows get a new lease id and
 *    attempt + 1; picked fresh ones are inserted with attempt 1; cursors move
 *    to the highest fresh sequence picked. Leases are returned straight from
 *    `picked` (the rows are locked by this statement, so every write above
 *    applies): joining `picked` back to the modifying CTEs made the planner
 *    nest-loop two 500-row CTEs (250k comparisons, 70 ms per claim).
 *
 * Sent as a named prepared statement (statements.ts), so each connection
 * plans it once and soon switches to the generic plan. DESIGN.md §3 records a
 * generic claim plan collapsing to 40 tps; this one reaches the log only
 * through events_pkey in the custom and the generic plan alike
 * (test/postgres/explain.test.ts), and the bench measured it flat from 1k to
 * 1M events of backlog.
 *
 * $1 group_id, $2 stream_id, $3 partitions in visiting order, $4 limit,
 * $5 now or null (database clock), $6 lease ms, $7 consumer id,
 * $8 max attempts.
 */
export function claimSql(s: string): string {
  return `
WITH clock AS MATERIALIZED (
  SELECT ${nowSql('$5')} AS now
),
cur AS MATERIALIZED (
  SELECT c.partition, c.cursor, o.ord,
         (SELECT max(d.sequence) FROM ${s}.deliveries d WHERE d.group_id = $1 AND d.partition = c.partition) AS max_open
  FROM ${s}.group_cursors c
  JOIN unnest($3::int[]) WITH ORDINALITY AS o(partition, ord) ON o.partition = c.partition
  WHERE c.group_id = $1
  ORDER BY c.partition
  FOR UPDATE OF c
),
reopen AS MATERIALIZED (
  SELECT cur.partition, cur.ord, d.sequence, d.attempt
  FROM cur CROSS JOIN LATERAL (
    SELECT d.sequence, d.attempt
    FROM ${s}.deliveries d
    WHERE d.group_id = $1 AND d.partition = cur.partition
      AND d.visible_at <= (SELECT now FROM clock) AND d.attempt < $8
    ORDER BY d.sequence
    LIMIT $4
    FOR UPDATE SKIP LOCKED
  ) d
),
spent AS MATERIALIZED (
  SELECT cur.partition, cur.ord, d.sequence, d.attempt
  FROM cur CROSS JOIN LATERAL (
    SELECT d.sequence, d.attempt
    FROM ${s}.deliveries d
    WHERE d.group_id = $1 AND d.partition = cur.partition
      AND d.visible_at <= (SELECT now FROM clock) AND d.attempt >= $8
    ORDER BY d.sequence
    LIMIT $4
    FOR UPDATE SKIP LOCKED
  ) d
),
fresh AS MATERIALIZED (
  SELECT cur.partition, cur.ord, e.sequence
  FROM cur CROSS JOIN LATERAL (
    SELECT e.sequence
    FROM ${s}.events e
    WHERE e.stream_id = $2 AND e.partition = cur.partition AND e.sequence > cur.cursor
      AND (e.sequence > cur.max_open OR cur.max_open IS NULL OR NOT EXISTS (
        SELECT 1 FROM ${s}.deliveries d
        WHERE d.group_id = $1 AND d.partition = cur.partition AND d.sequence = e.sequence
      ))
    ORDER BY e.sequence
    LIMIT $4
  ) e
),
candidates AS MATERIALIZED (
  SELECT partition, ord, sequence, attempt, false AS is_new FROM reopen
  UNION ALL
  SELECT partition, ord, sequence, 0, true FROM fresh
),
picked AS MATERIALIZED (
  -- The fencing token is minted here, one per picked row (pg_strong_random
  -- behind gen_random_uuid): sending a client-made id per possible claim cost
  -- an escaped text array of \`limit\` ids per call and an O(k) array subscript
  -- per row.
  SELECT r.*, row_number() OVER (ORDER BY r.rn, r.ord) AS k, gen_random_uuid()::text AS lease_id
  FROM (
    SELECT c.*, row_number() OVER (PARTITION BY c.partition ORDER BY c.sequence) AS rn
    FROM candidates c
  ) r
  ORDER BY r.rn, r.ord
  LIMIT $4
),
passed AS (
  -- A spent row is visited when the walk reaches its partition's turn in
  -- round (claimable rows below it + 1) before the limit is hit.
  SELECT x.partition, x.sequence, x.attempt
  FROM spent x
  WHERE (
    SELECT count(*) FROM picked p
    WHERE (p.rn, p.ord) < (
      (SELECT count(*) FROM candidates c WHERE c.partition = x.partition AND c.sequence < x.sequence) + 1,
      x.ord
    )
  ) < $4
),
buried AS (
  DELETE FROM ${s}.deliveries d
  USING passed x
  WHERE d.group_id = $1 AND d.partition = x.partition AND d.sequence = x.sequence
  RETURNING d.partition, d.sequence, d.attempt
),
dead AS (
  INSERT INTO ${s}.dead_letters (group_id, partition, sequence, attempt, reason, dead_lettered_at)
  SELECT $1, b.partition, b.sequence, b.attempt,
         'max attempts exceeded',
         (SELECT now FROM clock)
  FROM buried b
  ORDER BY b.partition, b.sequence
),
reclaimed AS (
  UPDATE ${s}.deliveries d
  SET attempt = d.attempt + 1,
      lease_id = p.lease_id,
      consumer_id = $7,
      leased_at = (SELECT now FROM clock),
      visible_at = (SELECT now FROM clock) + $6::float8 * interval '1 millisecond'
  FROM picked p
  WHERE NOT p.is_new AND d.group_id = $1 AND d.partition = p.partition AND d.sequence = p.sequence
),
inserted AS (
  INSERT INTO ${s}.deliveries (group_id, partition, sequence, attempt, lease_id, consumer_id, leased_at, visible_at)
  SELECT $1, p.partition, p.sequence, 1, p.lease_id, $7,
         (SELECT now FROM clock), (SELECT now FROM clock) + $6::float8 * interval '1 millisecond'
  FROM picked p
  WHERE p.is_new
),
advanced AS (
  UPDATE ${s}.group_cursors c
  SET cursor = m.top
  FROM (SELECT partition, max(sequence) AS top FROM picked WHERE is_new GROUP BY partition) m
  WHERE c.group_id = $1 AND c.partition = m.partition AND c.cursor < m.top
)
SELECT p.lease_id, p.attempt + 1 AS attempt,
       ${ms('(SELECT now FROM clock)')} AS leased_at_ms,
       ${ms(`(SELECT now FROM clock) + $6::float8 * interval '1 millisecond'`)} AS expires_at_ms,
       ${eventColumns('e')}
FROM picked p
CROSS JOIN LATERAL (
  -- One events PK probe per lease; as a plain join the planner hash-joined a
  -- sequential scan of the whole log while the log was small.
  SELECT * FROM ${s}.events e
  WHERE e.stream_id = $2 AND e.partition = p.partition AND e.sequence = p.sequence
  LIMIT 1
) e
ORDER BY p.k`;
}
