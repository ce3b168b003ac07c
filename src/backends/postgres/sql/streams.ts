import { ms } from '../connection.js';
import { nowSql } from '../rows.js';

/**
 * $1 name, $2 partitions, $3 now or null, $4 retention max age ms or null,
 * $5 retention max events or null. ON CONFLICT DO NOTHING turns a
 * concurrent createStream of the same name into "no row returned"
 * (`already_exists`) instead of a unique violation: the loser waits for the
 * winner's insert to commit, then sees the conflict.
 */
export function createStreamSql(s: string): string {
  return `
WITH created AS (
  INSERT INTO ${s}.streams (name, partitions, created_at, retention_max_age_ms, retention_max_events)
  VALUES ($1, $2, ${nowSql('$3')}, $4::int8, $5::int8)
  ON CONFLICT (name) DO NOTHING
  RETURNING id, partitions
),
counters AS (
  INSERT INTO ${s}.stream_partitions (stream_id, partition)
  SELECT c.id, g FROM created c, generate_series(0, c.partitions - 1) g
),
lows AS (
  INSERT INTO ${s}.low_watermarks (stream_id, partition)
  SELECT c.id, g FROM created c, generate_series(0, c.partitions - 1) g
)
SELECT id FROM created`;
}

export function lookupStreamSql(s: string): string {
  return `SELECT id, partitions FROM ${s}.streams WHERE name = $1`;
}

/** With each stream's retention and, per partition, [partition, low watermark, high watermark]. */
export function listStreamsSql(s: string): string {
  return `
SELECT st.name, st.partitions, ${ms('st.created_at')} AS created_at_ms,
       st.retention_max_age_ms, st.retention_max_events,
       (SELECT json_agg(json_build_array(p.partition, COALESCE(l.low_watermark, 1), p.high_watermark) ORDER BY p.partition)
        FROM ${s}.stream_partitions p
        LEFT JOIN ${s}.low_watermarks l ON l.stream_id = p.stream_id AND l.partition = p.partition
        WHERE p.stream_id = st.id) AS watermarks
FROM ${s}.streams st
ORDER BY st.name COLLATE "C"`;
}

/**
 * A group and the partitions it covers: those with a cursor row (createGroup
 * writes one per covered partition, in the statement that creates the
 * group, and nothing adds or removes one later). JSON, because rows are
 * parsed by rheo's pinned parsers (connection.ts), which leave arrays as text.
 */
export function lookupGroupSql(s: string): string {
  return `
SELECT g.id, g.max_attempts,
       COALESCE((SELECT json_agg(c.partition ORDER BY c.partition) FROM ${s}.group_cursors c WHERE c.group_id = g.id), '[]') AS partitions
FROM ${s}.groups g WHERE g.stream_id = $1 AND g.name = $2`;
}

/**
 * The current ids behind a stream name and one of its group names, for a
 * cache check (catalog.ts revalidate): no row when the stream is gone,
 * group_id null when the group is (or $2 is null). $1 stream name, $2 group name or null.
 */
export function currentIdsSql(s: string): string {
  return `
SELECT st.id AS stream_id, (SELECT g.id FROM ${s}.groups g WHERE g.stream_id = st.id AND g.name = $2) AS group_id
FROM ${s}.streams st WHERE st.name = $1`;
}

export function listGroupsSql(s: string): string {
  return `SELECT name FROM ${s}.groups WHERE stream_id = $1 ORDER BY name COLLATE "C"`;
}

/**
 * The per-partition start cursor for a group start, over `stream_partitions p`
 * left-joined to the per-partition overrides `pp(partition, after)`.
 * $after the common startAfter, $at the startAt time (null for startAfter).
 * startAt resolves to (lowest sequence with ts >= at) - 1, or the high
 * watermark when there is none (events_stream_ts_idx).
 */
export function startCursorSql(s: string, after: string, at: string): string {
  // Never below the low watermark (docs/semantics.md, "Retention"): lw is
  // the partition's low_watermarks row, locked FOR SHARE by the statement
  // so that a trim cannot pass the start while it is being set.
  return `GREATEST(COALESCE(lw.low_watermark, 1) - 1, CASE WHEN ${at}::timestamptz IS NULL THEN COALESCE(pp.after, ${after}::int8)
    ELSE COALESCE(
      (SELECT min(e.sequence) - 1 FROM ${s}.events e
       WHERE e.stream_id = p.stream_id AND e.partition = p.partition AND e.ts >= ${at}::timestamptz),
      p.high_watermark)
    END)`;
}

/**
 * $1 stream_id, $2 name, $3 max_attempts, $4 now or null, $5 after,
 * $6 override partitions, $7 override cursors, $8 at or null, $9 the
 * partitions the group covers (null: all). A group's scope is the set of its
 * cursor rows: every group statement joins them, so fetch, lag, replay and
 * reset never touch another partition.
 */
export function createGroupSql(s: string): string {
  return `
WITH lows AS MATERIALIZED (
  SELECT partition, low_watermark FROM ${s}.low_watermarks
  WHERE stream_id = $1
  ORDER BY partition
  FOR SHARE
),
created AS (
  INSERT INTO ${s}.groups (stream_id, name, max_attempts, created_at)
  VALUES ($1, $2, $3, ${nowSql('$4')})
  ON CONFLICT (stream_id, name) DO NOTHING
  RETURNING id
),
cursors AS (
  INSERT INTO ${s}.group_cursors (group_id, partition, cursor)
  SELECT c.id, p.partition, ${startCursorSql(s, '$5', '$8')}
  FROM created c
  CROSS JOIN ${s}.stream_partitions p
  LEFT JOIN unnest($6::int[], $7::int8[]) AS pp(partition, after) ON pp.partition = p.partition
  LEFT JOIN lows lw ON lw.partition = p.partition
  WHERE p.stream_id = $1 AND ($9::int[] IS NULL OR p.partition = ANY ($9::int[]))
)
SELECT id FROM created`;
}
