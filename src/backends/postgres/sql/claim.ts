import { ms } from '../connection.js';
import { eventColumns, eventSize, nowSql } from '../rows.js';
import { memberBit, stillInRange } from './ranges.js';

/*
 * Past ~400 lines on purpose: the claim is one statement of some fifteen
 * CTEs, written once here and cut into its three paths (below). Split over
 * files, a CTE and the path that leaves it out would be read apart.
 */

/**
 * Which claim: `full` handles every kind of claimable delivery; `fresh` is the
 * same statement without the CTEs for open rows, expired ranges and spent
 * deliveries, for when the routine (routines.ts) has found none of those in
 * the requested partitions after locking their cursors: then both pick the
 * same leases, and `fresh` skips a dozen empty CTEs (measured: a one-event
 * claim's execution 1.17 -> 0.86 ms, round trip 1.7 -> 1.3 ms). `plain` is
 * `fresh` without replay holds, for when those partitions have none either
 * (no replay left open deliveries above their cursors, the usual case): no
 * hold lookups, and no statement that moves the cursor over holds or deletes
 * them. Its plan has one table to write fewer (replay_holds) and no hold
 * subplans to set up, which is most of what a one-event claim costs on the
 * server: measured with one event after 15 ms of idleness, interleaved, the
 * statement's round trip took 1.68 ms at the median against 1.82 for `fresh`.
 */
export type ClaimPath = 'full' | 'fresh' | 'plain';

const FULL_ONLY = new Set(['reopen', 'spent', 'xr', 'xm', 'spent_all', 'overflow', 'passed', 'buried', 'dead', 'took', 'emptied', 'shrunk', 'reclaimed']);

const FRESH_CANDIDATES = `candidates AS MATERIALIZED (
  SELECT partition, ord, sequence, 0 AS attempt, 'new' AS src, size_bytes FROM fresh
)`;

/** What `plain` leaves out of `fresh` besides FULL_ONLY: the replay holds' statements. */
const HOLDS_ONLY = new Set(['moved', 'unheld']);

/**
 * The requested partitions ($3, in visiting order) where a claim could find
 * something at `now`: an event above the group's cursor (the partition's
 * high watermark, bumped in each append's transaction, is above it), or an
 * open delivery or lease range whose `visible_at` has come (claimable, or
 * spent and due for the dead letters). Read without locks, so it takes no
 * transaction id: the claim routine (routines.ts) answers empty right here
 * when no partition qualifies, and locks only the cursors of those that do.
 *
 * An event above the cursor may be held by a replay; then the claim that
 * follows finds nothing, as it did before this check. It never reads the
 * log: a primary-key probe of each partition's log for an event above the
 * cursor cost a claim of 500 on 8 partitions 0.2–0.8 ms, the counter rows
 * next to the cursors almost nothing.
 *
 * Its second column is the fewest sequences between a ready partition's
 * cursor and its high watermark, which the routine uses to choose the direct
 * claim (directClaimSql). Read before the cursors are locked, it can be too
 * high when another claim moves a cursor meanwhile; the direct claim then
 * finds fewer events than it needs and writes nothing, and the routine
 * claims by the plain walk.
 */
export function claimableSql(s: string, now: string): string {
  return `SELECT array_agg(o.partition ORDER BY o.ord), min(p.high_watermark - c.cursor)
  FROM unnest($3::int[]) WITH ORDINALITY AS o(partition, ord)
  JOIN ${s}.group_cursors c ON c.group_id = $1 AND c.partition = o.partition
  JOIN ${s}.stream_partitions p ON p.stream_id = $2 AND p.partition = o.partition
  WHERE c.cursor < p.high_watermark
    OR EXISTS (
      SELECT 1 FROM ${s}.deliveries d
      WHERE d.group_id = $1 AND d.partition = c.partition AND d.visible_at <= ${now}
    )
    OR EXISTS (
      SELECT 1 FROM ${s}.lease_ranges r
      WHERE r.group_id = $1 AND r.partition = c.partition AND r.visible_at <= ${now}
    )`;
}

/**
 * fetch(): claim up to `limit` deliveries for one group in ONE statement, so
 * the round trips per fetch are independent of `limit` (no N+1 per lease).
 *
 * Claim strategy (docs/design.md#postgresql-measurements, docs/semantics.md): new events are claimed by
 * advancing the group's per-partition cursor over the log. A contiguous run
 * of them in one partition becomes ONE `lease_ranges` row (migration 002)
 * whose leases are `token.sequence`; acks set its bits. Other open
 * deliveries are one `deliveries` row each; acks delete them. Claiming never
 * flags log rows in place, so it does not decay as dead index entries pile
 * up, and the group's storage stays bounded by its unsettled window plus
 * dead letters.
 *
 * Steps, with the index and lock each relies on:
 * 1. `cur`: lock the group's cursor rows for the requested partitions with
 *    FOR UPDATE, always in partition order (group_cursors PK). Concurrent
 *    fetches of one group serialise per partition for the few milliseconds of
 *    this statement instead of claiming the same sequence twice, and the
 *    fixed lock order rules out deadlocks whatever the rotation. A waiter
 *    re-reads the advanced cursor (READ COMMITTED re-check of locked rows).
 * 2. `reopen`: claimable open deliveries rows (pending past their delay, or
 *    leases past expiry: `visible_at <= now`), lowest sequence first, FOR
 *    UPDATE SKIP LOCKED: a row being settled or claimed elsewhere is skipped,
 *    and a row reclaimed meanwhile fails the visible_at re-check. Rows whose
 *    next attempt would pass max_attempts are read separately (`spent`, all
 *    of them: the walk buries every one it passes) so they never crowd out
 *    claimable ones. `xr`/`xm`: the same for members of
 *    expired lease ranges (attempt 1); the ones picked or dead-lettered here
 *    leave their range (`took`), the rest stay in it under the old lease.
 * 3. `fresh`: the next sequences after the cursor (events PK range scan),
 *    skipping replay holds (migration 003): sequences a replay found open
 *    above the cursor it moved back, whether still open or settled since.
 *    Every open row above the cursor is held, so holds are all it checks.
 *    Holds only exist after a replay, so the replay_holds PK is probed only
 *    for sequences at or below the partition's highest hold (`max_held`, one
 *    backward PK probe); the probe sits under an OR so the planner keeps it
 *    a per-row index probe instead of an anti-join. Only committed events
 *    are visible and they commit in sequence order, so none is skipped.
 * 4. Round-robin: rank candidates within a partition (rn), then take them
 *    ordered by (rn, position of the partition in $3), so each partition gets
 *    one per round starting at the rotating first partition in $3. The
 *    leases come back unordered; leases.ts puts them in this order.
 *    Byte budget (`sized`): the walk stops before the first candidate whose
 *    event would take the running size (migration 003) past $8, except the
 *    first, so the one JSON value returned stays near $8 bytes whatever
 *    `limit` allows (six 100 MB events once made a JSON text past V8's string
 *    limit). Fresh candidates bring their size from the `fresh` scan; others
 *    take one events PK probe, only once picked. A spent delivery past the
 *    stop (`overflow`) is not passed, as in the memory backend. Cost, old vs
 *    new claim interleaved on one database (120k-event backlog, vacuumed, so
 *    the old `fresh` scan was index-only), p10 of 110 claims of 500: 8.56 vs
 *    9.00 ms with 1 partition, 6.49 vs 7.76 ms with 4 (the `fresh` scan now
 *    reads the heap for the size of each of its up to 4 x 500 rows); claims of
 *    10: 1.24 vs 1.29 ms. Looking sizes up only for the picked rows, by a
 *    range scan per partition joined back, made the planner nest-loop the
 *    join: 300 ms per claim.
 * 5. Spent deliveries the walk would have passed are dead-lettered
 *    ("max attempts exceeded"); picked rows get a new lease id and
 *    attempt + 1; picked members of expired ranges become rows at attempt 2;
 *    picked fresh ones become one range per partition (or rows with their own
 *    ids when a replay left them non-contiguous); cursors move to the highest
 *    fresh sequence picked, and on over holds directly above it. Leases
 *    are returned straight from `picked` (the rows are locked by this
 *    statement, so every write above applies): joining `picked` back to the
 *    modifying CTEs made the planner nest-loop two 500-row CTEs (250k
 *    comparisons, 70 ms per claim).
 *
 * Run inside the claim routine (routines.ts), which forces the generic plan:
 * PostgreSQL would otherwise plan it again on every call. docs/design.md#postgresql-measurements
 * records a generic claim plan collapsing to 40 tps; this one reaches the log
 * only through each segment's primary key (events_<n>_pkey) in the custom and the generic plan alike
 * (test/postgres/explain.test.ts), and the bench measured it flat from 1k to
 * 1M events of backlog.
 *
 * $1 group_id, $2 stream_id, $3 partitions in visiting order, $4 limit,
 * $5 now or null (database clock), $6 lease ms, $7 consumer id,
 * $8 max bytes, $9 max attempts. `partitions` replaces $3 by another
 * expression: the claim routine passes the partitions whose cursors it
 * has already locked (routines.ts), so `cur` re-locks rows it holds and
 * never waits; `contended`, an expression the routine returns as a fourth
 * column (a data-modifying WITH cannot be wrapped in another query), followed
 * by `known`, true: the group exists, for its cursors were locked;
 * `freshLimit`, the most fresh sequences read per partition in step 3 (`$4`
 * unless the routine has proved fewer are enough, routines.ts).
 */
export function claimSql(s: string, path: ClaimPath = 'full', partitions = '$3', contended?: string, freshLimit = '$4'): string {
  // `plain` knows the locked partitions have no replay holds (see ClaimPath).
  const holds = path !== 'plain';
  const ctes: Array<[name: string, sql: string]> = [
    ['clock', `clock AS MATERIALIZED (
  SELECT ${nowSql('$5')} AS now
)`],
    ['stamps', `stamps AS MATERIALIZED (
  -- Returned on every lease: computed once, not per row.
  SELECT ${ms('now')} AS leased_at_ms, ${ms(`now + $6::float8 * interval '1 millisecond'`)} AS expires_at_ms
  FROM clock
)`],
    ['cur', `cur AS MATERIALIZED (
  SELECT c.partition, c.cursor, o.ord${holds ? `,
         (SELECT max(h.sequence) FROM ${s}.replay_holds h WHERE h.group_id = $1 AND h.partition = c.partition) AS max_held` : ''}
  FROM ${s}.group_cursors c
  JOIN unnest(${partitions}::int[]) WITH ORDINALITY AS o(partition, ord) ON o.partition = c.partition
  WHERE c.group_id = $1
  ORDER BY c.partition
  FOR UPDATE OF c
)`],
    ['reopen', `reopen AS MATERIALIZED (
  SELECT cur.partition, cur.ord, d.sequence, d.attempt
  FROM cur CROSS JOIN LATERAL (
    SELECT d.sequence, d.attempt
    FROM ${s}.deliveries d
    WHERE d.group_id = $1 AND d.partition = cur.partition
      AND d.visible_at <= (SELECT now FROM clock) AND d.attempt < $9
    ORDER BY d.sequence
    LIMIT $4
    FOR UPDATE SKIP LOCKED
  ) d
)`],
    ['spent', `spent AS MATERIALIZED (
  SELECT cur.partition, cur.ord, d.sequence, d.attempt
  FROM cur CROSS JOIN LATERAL (
    SELECT d.sequence, d.attempt
    FROM ${s}.deliveries d
    WHERE d.group_id = $1 AND d.partition = cur.partition
      AND d.visible_at <= (SELECT now FROM clock) AND d.attempt >= $9
    ORDER BY d.sequence
    -- No LIMIT: a walk that passes spent deliveries dead-letters every one
    -- of them and goes on (memory does), so one fetch of limit 1 over three
    -- spent rows buries all three; a LIMIT $4 here left the rest behind.
    FOR UPDATE SKIP LOCKED
  ) d
)`],
    ['xr', `xr AS MATERIALIZED (
  -- Expired lease ranges of these partitions (migration 002). The members
  -- this claim picks (or dead-letters) leave their range; the rest stay in it,
  -- still leased under the old token, exactly like expired deliveries rows
  -- nobody has reclaimed yet. SKIP LOCKED like \`reopen\`: a range being
  -- settled or split elsewhere is left to that statement.
  SELECT cur.partition, cur.ord, r.first_seq, r.last_seq, r.settled
  FROM cur CROSS JOIN LATERAL (
    SELECT r.first_seq, r.last_seq, r.settled
    FROM ${s}.lease_ranges r
    WHERE r.group_id = $1 AND r.partition = cur.partition AND r.visible_at <= (SELECT now FROM clock)
    ORDER BY r.first_seq
    FOR UPDATE SKIP LOCKED
  ) r
)`],
    ['xm', `xm AS MATERIALIZED (
  -- Their members still in the range, each a delivery at attempt 1.
  SELECT xr.partition, xr.ord, m.sequence
  FROM xr CROSS JOIN LATERAL generate_series(xr.first_seq, xr.last_seq) AS m(sequence)
  WHERE ${stillInRange('xr.settled', 'xr.first_seq', 'm.sequence')}
)`],
    ['fresh', `fresh AS MATERIALIZED (
  SELECT cur.partition, cur.ord, e.sequence, e.size_bytes
  FROM cur CROSS JOIN LATERAL (
    SELECT e.sequence, ${eventSize('e')} AS size_bytes
    FROM ${s}.events e
    WHERE e.stream_id = $2 AND e.partition = cur.partition AND e.sequence > cur.cursor${holds ? `
      AND (e.sequence > cur.max_held OR cur.max_held IS NULL OR NOT EXISTS (
        SELECT 1 FROM ${s}.replay_holds h
        WHERE h.group_id = $1 AND h.partition = cur.partition AND h.sequence = e.sequence
      ))` : ''}
    ORDER BY e.sequence
    LIMIT ${freshLimit}
  ) e
)`],
    ['candidates', `candidates AS MATERIALIZED (
  -- src: 'row' an open deliveries row, 'range' a member of an expired range,
  -- 'new' a sequence never offered.
  -- size_bytes: known for 'new' from the log scan, looked up once picked otherwise.
  SELECT partition, ord, sequence, attempt, 'row' AS src, NULL::int8 AS size_bytes FROM reopen
  UNION ALL
  SELECT partition, ord, sequence, 1, 'range', NULL FROM xm WHERE 1 < $9
  UNION ALL
  SELECT partition, ord, sequence, 0, 'new', size_bytes FROM fresh
)`],
    ['spent_all', `spent_all AS MATERIALIZED (
  SELECT partition, ord, sequence, attempt, 'row' AS src FROM spent
  UNION ALL
  SELECT partition, ord, sequence, 1, 'range' FROM xm WHERE 1 >= $9
)`],
    ['sized', `sized AS MATERIALIZED (
  SELECT r.*, sum(r.bytes) OVER w AS running_bytes, row_number() OVER w AS k
  FROM (
    SELECT r.*, COALESCE(r.size_bytes, (
      SELECT ${eventSize('e')} FROM ${s}.events e
      WHERE e.stream_id = $2 AND e.partition = r.partition AND e.sequence >= r.sequence AND e.sequence <= r.sequence
      ORDER BY e.sequence
      LIMIT 1
    )) AS bytes
    FROM (
      SELECT c.*, row_number() OVER (PARTITION BY c.partition ORDER BY c.sequence) AS rn
      FROM candidates c
    ) r
    ORDER BY r.rn, r.ord
    LIMIT $4
  ) r
  WINDOW w AS (ORDER BY r.rn, r.ord ROWS UNBOUNDED PRECEDING)
)`],
    ['picked', `picked AS MATERIALIZED (
  SELECT partition, ord, sequence, attempt, src, rn FROM sized WHERE running_bytes <= $8 OR k = 1
)`],
    ['overflow', `overflow AS MATERIALIZED (
  -- The first candidate left out for the byte budget, if any: the walk stops there.
  SELECT rn, ord FROM sized WHERE running_bytes > $8 AND k > 1 ORDER BY k LIMIT 1
)`],
    ['runs', `runs AS MATERIALIZED (
  -- Per partition, the fresh sequences picked: one lease range when they are
  -- contiguous (always, unless a replay left open rows above the cursor).
  -- The fencing token is minted here (pg_strong_random behind
  -- gen_random_uuid), one per range rather than one per lease.
  SELECT partition, min(sequence) AS first_seq, max(sequence) AS last_seq,
         count(*) = max(sequence) - min(sequence) + 1 AS contiguous,
         gen_random_uuid()::text AS token
  FROM picked
  WHERE src = 'new'
  GROUP BY partition
)`],
    ['leased', `leased AS MATERIALIZED (
  -- Members of a new range need no id of their own here (see the final SELECT).
  SELECT p.partition, p.sequence, p.attempt, p.src, COALESCE(u.contiguous, false) AS ranged,
         CASE WHEN u.contiguous THEN NULL ELSE gen_random_uuid()::text END AS lease_id
  FROM picked p
  LEFT JOIN runs u ON p.src = 'new' AND u.partition = p.partition
)`],
    ['passed', `passed AS MATERIALIZED (
  -- A spent delivery is visited when the walk reaches its partition's turn in
  -- round (claimable candidates below it + 1) before the limit is hit.
  SELECT x.partition, x.sequence, x.attempt, x.src
  FROM spent_all x
  CROSS JOIN LATERAL (
    SELECT (SELECT count(*) FROM candidates c WHERE c.partition = x.partition AND c.sequence < x.sequence) + 1 AS rn
  ) at
  WHERE (
    SELECT count(*) FROM picked p
    WHERE (p.rn, p.ord) < (at.rn, x.ord)
  ) < $4
    AND NOT EXISTS (SELECT 1 FROM overflow o WHERE (o.rn, o.ord) < (at.rn, x.ord))
)`],
    ['buried', `buried AS (
  DELETE FROM ${s}.deliveries d
  USING passed x
  WHERE x.src = 'row' AND d.group_id = $1 AND d.partition = x.partition AND d.sequence = x.sequence
  RETURNING d.partition, d.sequence, d.attempt
)`],
    ['dead', `dead AS (
  INSERT INTO ${s}.dead_letters (group_id, partition, sequence, attempt, reason, dead_lettered_at)
  SELECT $1, b.partition, b.sequence, b.attempt,
         'max attempts exceeded',
         (SELECT now FROM clock)
  FROM (
    SELECT partition, sequence, attempt FROM buried
    UNION ALL
    SELECT partition, sequence, attempt FROM passed WHERE src = 'range'
  ) b
  ORDER BY b.partition, b.sequence
)`],
    ['took', `took AS MATERIALIZED (
  -- Per expired range, its bits with the members picked or dead-lettered here set.
  SELECT xr.partition, xr.first_seq,
         xr.settled | bit_or(${memberBit('xr.settled', 'xr.first_seq', 't.sequence')}) AS settled
  FROM (
    SELECT partition, sequence FROM picked WHERE src = 'range'
    UNION ALL
    SELECT partition, sequence FROM passed WHERE src = 'range'
  ) t
  JOIN xr ON xr.partition = t.partition AND t.sequence BETWEEN xr.first_seq AND xr.last_seq
  GROUP BY xr.partition, xr.first_seq, xr.settled
)`],
    ['emptied', `emptied AS (
  DELETE FROM ${s}.lease_ranges r
  USING took t
  WHERE r.group_id = $1 AND r.partition = t.partition AND r.first_seq = t.first_seq
    AND bit_count(t.settled) = length(t.settled)
)`],
    ['shrunk', `shrunk AS (
  UPDATE ${s}.lease_ranges r
  SET settled = t.settled
  FROM took t
  WHERE r.group_id = $1 AND r.partition = t.partition AND r.first_seq = t.first_seq
    AND bit_count(t.settled) < length(t.settled)
)`],
    ['reclaimed', `reclaimed AS (
  UPDATE ${s}.deliveries d
  SET attempt = d.attempt + 1,
      lease_id = l.lease_id,
      consumer_id = $7,
      leased_at = (SELECT now FROM clock),
      visible_at = (SELECT now FROM clock) + $6::float8 * interval '1 millisecond'
  FROM leased l
  WHERE l.src = 'row' AND d.group_id = $1 AND d.partition = l.partition AND d.sequence = l.sequence
)`],
    ['inserted', `inserted AS (
  INSERT INTO ${s}.deliveries (group_id, partition, sequence, attempt, lease_id, consumer_id, leased_at, visible_at)
  SELECT $1, l.partition, l.sequence, l.attempt + 1, l.lease_id, $7,
         (SELECT now FROM clock), (SELECT now FROM clock) + $6::float8 * interval '1 millisecond'
  FROM leased l
  WHERE l.src = 'range' OR (l.src = 'new' AND NOT l.ranged)
)`],
    ['opened', `opened AS (
  ${openRanges(s, 'runs', '(SELECT now FROM clock)', 'u.contiguous')}
)`],
    ['moved', `moved AS MATERIALIZED (
  -- The cursor moves to the highest fresh sequence picked, and on over
  -- replay holds directly above it (migration 003), so \`cursor + 1\` is
  -- never held and the frontier is min(cursor, min(open) - 1). Only
  -- partitions with holds above the new top (max_held, read in \`cur\`)
  -- look at replay_holds.
  SELECT t.partition, t.max_held,
         CASE WHEN t.max_held IS NULL OR t.max_held <= t.top OR NOT EXISTS (
                SELECT 1 FROM ${s}.replay_holds h
                WHERE h.group_id = $1 AND h.partition = t.partition AND h.sequence = t.top + 1
              )
              THEN t.top
              ELSE (
                SELECT min(h.sequence) FROM ${s}.replay_holds h
                WHERE h.group_id = $1 AND h.partition = t.partition AND h.sequence > t.top
                  AND NOT EXISTS (
                    SELECT 1 FROM ${s}.replay_holds h2
                    WHERE h2.group_id = $1 AND h2.partition = t.partition AND h2.sequence = h.sequence + 1
                  )
              )
         END AS top
  FROM (
    SELECT cur.partition, cur.max_held, COALESCE(u.last_seq, cur.cursor) AS top
    FROM cur
    LEFT JOIN runs u ON u.partition = cur.partition
  ) t
)`],
    ['advanced', holds ? `advanced AS (
  UPDATE ${s}.group_cursors c
  SET cursor = n.top
  FROM moved n
  WHERE c.group_id = $1 AND c.partition = n.partition AND c.cursor < n.top
)` : `advanced AS (
  -- No holds: the cursor moves to the highest sequence picked.
  UPDATE ${s}.group_cursors c
  SET cursor = u.last_seq
  FROM runs u
  WHERE c.group_id = $1 AND c.partition = u.partition AND c.cursor < u.last_seq
)`],
    ['unheld', `unheld AS (
  -- Holds the cursor has passed are ordinary settled or open sequences now.
  DELETE FROM ${s}.replay_holds h
  USING moved n
  WHERE n.max_held IS NOT NULL AND h.group_id = $1 AND h.partition = n.partition AND h.sequence <= n.top
)`],
  ];
  const kept = ctes
    .filter(([name]) => path === 'full' || (!FULL_ONLY.has(name) && (path === 'fresh' || !HOLDS_ONLY.has(name))))
    .map(([name, sql]) => (path !== 'full' && name === 'candidates' ? FRESH_CANDIDATES : sql));
  return `
WITH ${kept.join(',\n')}
-- All leases come back as ONE json array of arrays, in the order of ClaimedLease
-- (leases.ts), with the two timestamps once: parsing 500 rows of 12 columns
-- cost the client ~5.8 ms of CPU per claim, one JSON.parse of the same
-- leases ~2.1 ms.
SELECT (SELECT leased_at_ms FROM stamps) AS leased_at_ms,
       (SELECT expires_at_ms FROM stamps) AS expires_at_ms,
       COALESCE(json_agg(json_build_array(x.lease_id, x.attempt, x.id, x.partition, x.sequence, x.type, x.key, x.payload, x.metadata, x.ts_ms)), '[]') AS leases${contended === undefined ? '' : `,
       ${contended} AS contended, true AS known`}
FROM (
  SELECT l.lease_id, l.attempt + 1 AS attempt, ${eventColumns('e')}
  FROM leased l
  CROSS JOIN LATERAL (
    -- One events PK probe per lease; as a plain join the planner hash-joined a
    -- sequential scan of the whole log while the log was small. Written as a
    -- one-row range in sequence order, not \`sequence = x\`: for a stream newer
    -- than the table's statistics both indexes led by stream_id cost the same
    -- for an equality probe, and the planner took events_stream_ts_idx, which
    -- walks the stream's whole log per lease (44 ms per 500 leases, growing
    -- with the log). Only the primary key returns the range in order.
    SELECT * FROM ${s}.events e
    WHERE e.stream_id = $2 AND e.partition = l.partition AND e.sequence >= l.sequence AND e.sequence <= l.sequence
    ORDER BY e.sequence
    LIMIT 1
  ) e
  WHERE NOT l.ranged
  UNION ALL
  -- A new range's events in one primary-key range scan instead of a probe per
  -- lease (3 of 9 ms per 500 leases).
  SELECT u.token || '.' || e.sequence, 1, ${eventColumns('e')}
  FROM runs u
  ${rangeEvents(s)}
  WHERE u.contiguous
) x`;
}

/**
 * The claim when every locked partition is known to hold its whole
 * round-robin share of fresh events above its cursor, with no open rows,
 * ranges or replay holds there (the routine's `plain` case, routines.ts):
 * then the leases are known without ranking candidates. With n partitions
 * and `limit` = q·n + r, round-robin takes q from each and one more from
 * the first r in visiting order, so each share is one contiguous range
 * from cursor + 1: one lease range per partition, read by one primary-key
 * range scan each. It does what `plain` would (same leases, ranges and
 * cursors) without `plain`'s candidate read, two sorts and two window
 * passes over the candidates: measured for claims of 500 on 8 partitions,
 * interleaved on one database, 3.43 ms against 4.68 at the median from the
 * call to the parsed answer.
 *
 * It checks what it relies on and writes nothing, answering no row, when
 * the shares hold fewer events than `limit` (the routine's proof was wrong)
 * or their sizes add up past the byte budget $8 (then `plain`'s walk decides
 * where to stop); the routine then runs `plain`. The shares' events are read
 * once, for the check and the answer alike.
 *
 * Parameters as in claimSql; `partitions` are the locked partitions in
 * visiting order, `contended` as there.
 */
export function directClaimSql(s: string, partitions = '$3', contended = 'false'): string {
  const share = `$4 / n.n + CASE WHEN o.ord <= $4 % n.n THEN 1 ELSE 0 END`;
  return `
WITH stamps AS MATERIALIZED (
  SELECT clock.now, ${ms('clock.now')} AS leased_at_ms, ${ms(`clock.now + $6::float8 * interval '1 millisecond'`)} AS expires_at_ms
  FROM (SELECT ${nowSql('$5')} AS now) clock
),
shares AS MATERIALIZED (
  -- The cursors are locked by this transaction already (routines.ts).
  SELECT c.partition, c.cursor + 1 AS first_seq, c.cursor + ${share} AS last_seq,
         gen_random_uuid()::text AS token
  FROM (SELECT cardinality(${partitions}::int[]) AS n) n
  CROSS JOIN unnest(${partitions}::int[]) WITH ORDINALITY AS o(partition, ord)
  JOIN ${s}.group_cursors c ON c.group_id = $1 AND c.partition = o.partition
  WHERE ${share} > 0
),
picked AS MATERIALIZED (
  SELECT u.token || '.' || e.sequence AS lease_id, ${eventColumns('e')}, ${eventSize('e')} AS size_bytes
  FROM shares u
  ${rangeEvents(s)}
),
fits AS MATERIALIZED (
  SELECT count(*) = $4 AND (count(*) = 1 OR sum(size_bytes) <= $8) AS ok FROM picked
),
opened AS (
  ${openRanges(s, 'shares', '(SELECT now FROM stamps)', '(SELECT ok FROM fits)')}
),
advanced AS (
  UPDATE ${s}.group_cursors c
  SET cursor = u.last_seq
  FROM shares u
  WHERE c.group_id = $1 AND c.partition = u.partition AND (SELECT ok FROM fits)
)
SELECT (SELECT leased_at_ms FROM stamps) AS leased_at_ms,
       (SELECT expires_at_ms FROM stamps) AS expires_at_ms,
       json_agg(json_build_array(x.lease_id, 1, x.id, x.partition, x.sequence, x.type, x.key, x.payload, x.metadata, x.ts_ms)) AS leases,
       ${contended} AS contended, true AS known
FROM picked x
HAVING (SELECT ok FROM fits)`;
}

/**
 * The events of lease range `u` (partition, first_seq, last_seq), alias `e`:
 * one primary-key range scan per range instead of a probe per lease (3 of 9
 * ms per 500 leases), in sequence order, which keeps the planner on the
 * primary key (see the final SELECT of claimSql).
 */
function rangeEvents(s: string): string {
  return `CROSS JOIN LATERAL (
    SELECT * FROM ${s}.events e
    WHERE e.stream_id = $2 AND e.partition = u.partition AND e.sequence >= u.first_seq AND e.sequence <= u.last_seq
    ORDER BY e.sequence
  ) e`;
}

/** One new lease range per row of `from` (alias `u`) where `when` holds: leased by $7 at `now` for $6 ms, no member settled. */
function openRanges(s: string, from: string, now: string, when: string): string {
  return `INSERT INTO ${s}.lease_ranges (group_id, partition, first_seq, last_seq, token, consumer_id, leased_at, visible_at, settled)
  SELECT $1, u.partition, u.first_seq, u.last_seq, u.token, $7,
         ${now}, ${now} + $6::float8 * interval '1 millisecond',
         repeat('0', (u.last_seq - u.first_seq + 1)::int)::varbit
  FROM ${from} u
  WHERE ${when}`;
}
