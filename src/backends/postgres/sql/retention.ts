import { nowSql } from '../rows.js';

/*
 * Statements of trim, setRetention, deleteGroup and deleteStream
 * (docs/semantics.md, "Retention, trimming and deletion"). A trim runs in one
 * short transaction per batch, in this order, so its locks are always taken
 * as advisory lock -> low_watermarks -> group_cursors (only when forced) ->
 * state rows, the order replay and reset use too (they lock low_watermarks
 * FOR SHARE before their cursors):
 *   trimLock, lockLows, trimBounds, trimFrontiers,
 *   [forced: trimLockCursors, explode ranges, trimUnsettled, trimGroupState, replayAdvance],
 *   trimDeadLetters, droppableSegments + dropSegment, trimEvents (per partition), setLow.
 */

/**
 * One trimmer per stream at a time, across processes: a transaction-scoped
 * advisory lock on (hash of the schema, stream id). `pg_try_advisory_xact_lock`
 * for the background trimmer (skip when busy), `pg_advisory_xact_lock` for an
 * explicit trim (wait). $1 schema name, $2 stream_id.
 */
export function trimLockSql(wait: boolean): string {
  return wait
    ? `SELECT true AS locked FROM (SELECT pg_advisory_xact_lock(hashtext('rheo_trim:' || $1::text), $2::int)) x`
    : `SELECT pg_try_advisory_xact_lock(hashtext('rheo_trim:' || $1::text), $2::int) AS locked`;
}

/** The stream's low watermarks, locked FOR UPDATE in partition order. $1 stream_id. */
export function lockLowsSql(s: string): string {
  return `
SELECT partition, low_watermark FROM ${s}.low_watermarks
WHERE stream_id = $1
ORDER BY partition
FOR UPDATE`;
}

/**
 * Per partition, the highest sequence retention (or the explicit bounds)
 * allows, before the frontiers and the batch limit cap it: the higher of the
 * count bound (high watermark - keep) and the age bound (the last of the
 * leading run of events older than the cutoff, looking at most $5 events past
 * the low watermark: an events PK range scan). Explicit bounds when $2 is
 * true, else the stream's policy (none: nothing).
 * $1 stream_id, $2 explicit, $3 before or null, $4 keep or null, $5 limit, $6 now or null.
 */
export function trimBoundsSql(s: string): string {
  return `
WITH policy AS (
  SELECT CASE WHEN $2::boolean THEN $3::timestamptz
              WHEN st.retention_max_age_ms IS NULL THEN NULL
              ELSE ${nowSql('$6')} - st.retention_max_age_ms * interval '1 millisecond' END AS before,
         CASE WHEN $2::boolean THEN $4::int8 ELSE st.retention_max_events END AS keep
  FROM ${s}.streams st WHERE st.id = $1
)
SELECT l.partition, l.low_watermark, p.high_watermark,
       GREATEST(
         l.low_watermark - 1,
         CASE WHEN policy.keep IS NULL THEN l.low_watermark - 1 ELSE p.high_watermark - policy.keep END,
         CASE WHEN policy.before IS NULL THEN l.low_watermark - 1 ELSE (
           SELECT COALESCE(min(x.sequence) FILTER (WHERE x.ts >= policy.before) - 1, max(x.sequence), l.low_watermark - 1)
           FROM (
             SELECT e.sequence, e.ts FROM ${s}.events e
             WHERE e.stream_id = $1 AND e.partition = l.partition AND e.sequence >= l.low_watermark
             ORDER BY e.sequence
             LIMIT $5
           ) x
         ) END
       ) AS bound
FROM ${s}.low_watermarks l
JOIN ${s}.stream_partitions p ON p.stream_id = l.stream_id AND p.partition = l.partition
CROSS JOIN policy
WHERE l.stream_id = $1
ORDER BY l.partition`;
}

/**
 * Every group's frontier per partition, as lagSql computes it:
 * min(cursor, lowest open sequence - 1). Read without locks: a frontier only
 * moves back by replay/reset, which lock the low watermarks first.
 * $1 stream_id.
 */
export function trimFrontiersSql(s: string): string {
  return `
SELECT g.id AS group_id, g.name, c.partition,
       LEAST(c.cursor, COALESCE(LEAST(
         (SELECT min(d.sequence) FROM ${s}.deliveries d WHERE d.group_id = g.id AND d.partition = c.partition),
         (SELECT r.first_seq + position('0' IN r.settled::text) - 1
          FROM ${s}.lease_ranges r WHERE r.group_id = g.id AND r.partition = c.partition
          ORDER BY r.first_seq LIMIT 1)
       ) - 1, c.cursor)) AS frontier
FROM ${s}.groups g
JOIN ${s}.group_cursors c ON c.group_id = g.id
WHERE g.stream_id = $1
ORDER BY g.name COLLATE "C", c.partition`;
}

/** Forced trim: the cursors of the groups it passes, in (group, partition) order. $1 group ids, $2 partitions (aligned). */
export function trimLockCursorsSql(s: string): string {
  return `
SELECT c.group_id, c.partition FROM ${s}.group_cursors c
JOIN unnest($1::int[], $2::int[]) AS t(group_id, partition) ON t.group_id = c.group_id AND t.partition = c.partition
ORDER BY c.group_id, c.partition
FOR UPDATE OF c`;
}

/**
 * Forced trim, after the ranges of the passed (group, partition)s became
 * rows: per pair, how many sequences up to the bound the group had not
 * settled (open rows, plus never-offered sequences above the cursor that no
 * replay hold marks as seen). $1 group ids, $2 partitions, $3 bounds (aligned).
 */
export function trimUnsettledSql(s: string): string {
  return `
SELECT t.group_id, t.partition,
       (SELECT count(*) FROM ${s}.deliveries d
        WHERE d.group_id = t.group_id AND d.partition = t.partition AND d.sequence <= t.bound)
       + GREATEST(0, t.bound - c.cursor - (
           SELECT count(*) FROM ${s}.replay_holds h
           WHERE h.group_id = t.group_id AND h.partition = t.partition AND h.sequence > c.cursor AND h.sequence <= t.bound
         )) AS unsettled
FROM unnest($1::int[], $2::int[], $3::int8[]) AS t(group_id, partition, bound)
JOIN ${s}.group_cursors c ON c.group_id = t.group_id AND c.partition = t.partition`;
}

/**
 * Forced trim: the passed groups lose their state up to the bound (open
 * rows and holds) and their cursors move up to it; replayAdvanceSql then
 * moves them over holds directly above. $1 group ids, $2 partitions, $3 bounds.
 */
export function trimGroupStateSql(s: string): string {
  return `
WITH t AS (
  SELECT * FROM unnest($1::int[], $2::int[], $3::int8[]) AS t(group_id, partition, bound)
),
dropped AS (
  DELETE FROM ${s}.deliveries d USING t
  WHERE d.group_id = t.group_id AND d.partition = t.partition AND d.sequence <= t.bound
),
unheld AS (
  DELETE FROM ${s}.replay_holds h USING t
  WHERE h.group_id = t.group_id AND h.partition = t.partition AND h.sequence <= t.bound
)
UPDATE ${s}.group_cursors c
SET cursor = t.bound
FROM t
WHERE c.group_id = t.group_id AND c.partition = t.partition AND c.cursor < t.bound`;
}

/**
 * Every group's dead letters (and, against a racing redrive, open rows) of
 * the trimmed sequences of one partition (dead_letters and deliveries
 * unique keys). $1 stream_id, $2 partition, $3 bound.
 */
export function trimDeadLettersSql(s: string): string {
  return `
WITH gs AS (SELECT id FROM ${s}.groups WHERE stream_id = $1),
dead AS (
  DELETE FROM ${s}.dead_letters dl USING gs
  WHERE dl.group_id = gs.id AND dl.partition = $2 AND dl.sequence <= $3
)
DELETE FROM ${s}.deliveries d USING gs
WHERE d.group_id = gs.id AND d.partition = $2 AND d.sequence <= $3`;
}

/**
 * The stream's closed segments (migration 009) that lie wholly at or below
 * the bounds: per partition a segment ends where the stream's next segment
 * begins, so a segment with a next one in every partition whose start is at
 * most bound + 1 holds nothing the trim keeps. The current segment has no
 * next one and never qualifies. $1 stream_id, $2 partitions, $3 bounds
 * (aligned; every partition of the stream).
 */
export function droppableSegmentsSql(s: string): string {
  return `
WITH b AS (SELECT * FROM unnest($2::int[], $3::int8[]) AS b(partition, bound)),
starts AS (
  SELECT sg.segment, sg.partition,
         lead(sg.first_seq) OVER (PARTITION BY sg.partition ORDER BY sg.segment) AS next_first
  FROM ${s}.segments sg WHERE sg.stream_id = $1
)
SELECT st.segment FROM starts st JOIN b ON b.partition = st.partition
GROUP BY st.segment
HAVING bool_and(st.next_first IS NOT NULL AND st.next_first - 1 <= b.bound)
ORDER BY st.segment`;
}

/**
 * Drops one segment's table (a SECURITY DEFINER function of migration 009);
 * false when the segment is current or unknown, or when its DDL lock was not
 * granted within the function's lock_timeout. $1 stream_id, $2 segment.
 */
export function dropSegmentSql(s: string): string {
  return `SELECT ${s}.drop_segment($1::int, $2::int8) AS dropped`;
}

/** Every segment of a deleted stream. $1 stream_id. */
export function streamSegmentsSql(s: string): string {
  return `SELECT DISTINCT segment FROM ${s}.segments WHERE stream_id = $1 ORDER BY segment`;
}

/**
 * Opens the stream's next segment when its current one is full or old
 * enough (migration 009); returns the new segment or null, and the
 * stream's retention as it stands (segments.ts spaces the next check by
 * it). $1 stream_id, $2 the largest span.
 */
export function rollSegmentSql(s: string): string {
  return `SELECT ${s}.roll_segment($1::int, $2::int8) AS segment,
       st.retention_max_events AS max_events, st.retention_max_age_ms IS NOT NULL AS by_age
FROM (SELECT 1) one LEFT JOIN ${s}.streams st ON st.id = $1`;
}

/**
 * Events PK range delete, in the segments the trim could not drop whole
 * (segment 0, the partly trimmed one, one whose DROP timed out).
 * $1 stream_id, $2 partition, $3 old low watermark, $4 bound.
 */
export function trimEventsSql(s: string): string {
  return `
DELETE FROM ${s}.events
WHERE stream_id = $1 AND partition = $2 AND sequence >= $3 AND sequence <= $4`;
}

/** $1 stream_id, $2 partition, $3 new low watermark. */
export function setLowSql(s: string): string {
  return `UPDATE ${s}.low_watermarks SET low_watermark = $3 WHERE stream_id = $1 AND partition = $2`;
}

/** $1 name, $2 max age ms or null, $3 max events or null. */
export function setRetentionSql(s: string): string {
  return `
UPDATE ${s}.streams SET retention_max_age_ms = $2::int8, retention_max_events = $3::int8
WHERE name = $1
RETURNING id`;
}

/**
 * A group and all its state, in one statement; the cursors go first in the
 * plan's eyes only by being locked: a claim in flight holds them, so the
 * delete waits for it. $1 group_id.
 */
export function deleteGroupSql(s: string): string {
  return `
WITH locked AS MATERIALIZED (
  SELECT partition FROM ${s}.group_cursors WHERE group_id = $1 ORDER BY partition FOR UPDATE
),
open_rows AS (DELETE FROM ${s}.deliveries WHERE group_id = $1 AND (SELECT count(*) FROM locked) >= 0),
open_ranges AS (DELETE FROM ${s}.lease_ranges WHERE group_id = $1 AND (SELECT count(*) FROM locked) >= 0),
dead_rows AS (DELETE FROM ${s}.dead_letters WHERE group_id = $1 AND (SELECT count(*) FROM locked) >= 0),
holds AS (DELETE FROM ${s}.replay_holds WHERE group_id = $1 AND (SELECT count(*) FROM locked) >= 0),
owners AS (DELETE FROM ${s}.partition_owners WHERE group_id = $1 AND (SELECT count(*) FROM locked) >= 0),
members AS (DELETE FROM ${s}.group_members WHERE group_id = $1 AND (SELECT count(*) FROM locked) >= 0),
ownership AS (DELETE FROM ${s}.group_ownership WHERE group_id = $1 AND (SELECT count(*) FROM locked) >= 0),
cursors AS (DELETE FROM ${s}.group_cursors WHERE group_id = $1 AND (SELECT count(*) FROM locked) >= 0)
DELETE FROM ${s}.groups WHERE id = $1 AND (SELECT count(*) FROM locked) >= 0
RETURNING id`;
}

/**
 * The stream's catalog rows and every group's state, in one statement; the
 * stream is recorded in deleted_streams so its events can go in batches
 * afterwards. Returns the stream id, or nothing when it does not exist.
 * $1 name.
 */
export function deleteStreamSql(s: string): string {
  return `
WITH st AS MATERIALIZED (
  SELECT id FROM ${s}.streams WHERE name = $1 FOR UPDATE
),
-- Low watermarks before cursors, the order a forced trim takes them in.
lows_locked AS MATERIALIZED (
  SELECT l.partition FROM ${s}.low_watermarks l JOIN st ON l.stream_id = st.id
  ORDER BY l.partition FOR UPDATE OF l
),
gs AS MATERIALIZED (
  SELECT g.id FROM ${s}.groups g JOIN st ON g.stream_id = st.id
  WHERE (SELECT count(*) FROM lows_locked) >= 0
),
locked AS MATERIALIZED (
  SELECT c.group_id FROM ${s}.group_cursors c JOIN gs ON gs.id = c.group_id
  ORDER BY c.group_id, c.partition FOR UPDATE OF c
),
open_rows AS (DELETE FROM ${s}.deliveries d USING gs WHERE d.group_id = gs.id AND (SELECT count(*) FROM locked) >= 0),
open_ranges AS (DELETE FROM ${s}.lease_ranges r USING gs WHERE r.group_id = gs.id AND (SELECT count(*) FROM locked) >= 0),
dead_rows AS (DELETE FROM ${s}.dead_letters dl USING gs WHERE dl.group_id = gs.id AND (SELECT count(*) FROM locked) >= 0),
holds AS (DELETE FROM ${s}.replay_holds h USING gs WHERE h.group_id = gs.id AND (SELECT count(*) FROM locked) >= 0),
owners AS (DELETE FROM ${s}.partition_owners o USING gs WHERE o.group_id = gs.id AND (SELECT count(*) FROM locked) >= 0),
members AS (DELETE FROM ${s}.group_members m USING gs WHERE m.group_id = gs.id AND (SELECT count(*) FROM locked) >= 0),
ownership AS (DELETE FROM ${s}.group_ownership go USING gs WHERE go.group_id = gs.id AND (SELECT count(*) FROM locked) >= 0),
cursors AS (DELETE FROM ${s}.group_cursors c USING gs WHERE c.group_id = gs.id AND (SELECT count(*) FROM locked) >= 0),
groups_gone AS (DELETE FROM ${s}.groups g USING gs WHERE g.id = gs.id AND (SELECT count(*) FROM locked) >= 0),
counters AS (DELETE FROM ${s}.stream_partitions p USING st WHERE p.stream_id = st.id),
lows AS (DELETE FROM ${s}.low_watermarks l USING st WHERE l.stream_id = st.id),
gone AS (DELETE FROM ${s}.streams x USING st WHERE x.id = st.id),
pending AS (INSERT INTO ${s}.deleted_streams (stream_id) SELECT id FROM st ON CONFLICT DO NOTHING)
SELECT id FROM st`;
}

/** One batch of a deleted stream's events (events PK order). $1 stream_id, $2 batch size. Returns how many. */
export function purgeEventsSql(s: string): string {
  return `
WITH gone AS (
  DELETE FROM ${s}.events e
  WHERE e.stream_id = $1 AND (e.partition, e.sequence) IN (
    SELECT x.partition, x.sequence FROM ${s}.events x
    WHERE x.stream_id = $1
    ORDER BY x.partition, x.sequence
    LIMIT $2
  )
  RETURNING 1
)
SELECT count(*)::int AS deleted FROM gone`;
}

/** $1 stream_id. */
export function purgeDoneSql(s: string): string {
  return `DELETE FROM ${s}.deleted_streams WHERE stream_id = $1`;
}

/** A deleted stream whose events are not all gone yet, if any. */
export function nextPurgeSql(s: string): string {
  return `SELECT stream_id FROM ${s}.deleted_streams ORDER BY deleted_at LIMIT 1`;
}

/** Every retention statement, rendered once per backend for its schema. */
export function renderRetentionStatements(s: string) {
  return {
    trimLockWait: trimLockSql(true),
    trimLockTry: trimLockSql(false),
    lockLows: lockLowsSql(s),
    trimBounds: trimBoundsSql(s),
    trimFrontiers: trimFrontiersSql(s),
    trimLockCursors: trimLockCursorsSql(s),
    trimUnsettled: trimUnsettledSql(s),
    trimGroupState: trimGroupStateSql(s),
    trimDeadLetters: trimDeadLettersSql(s),
    trimEvents: trimEventsSql(s),
    droppableSegments: droppableSegmentsSql(s),
    dropSegment: dropSegmentSql(s),
    streamSegments: streamSegmentsSql(s),
    rollSegment: rollSegmentSql(s),
    setLow: setLowSql(s),
    setRetention: setRetentionSql(s),
    deleteGroup: deleteGroupSql(s),
    deleteStream: deleteStreamSql(s),
    purgeEvents: purgeEventsSql(s),
    purgeDone: purgeDoneSql(s),
    nextPurge: nextPurgeSql(s),
  } as const;
}

export type RetentionStatements = ReturnType<typeof renderRetentionStatements>;
