import { eventColumns, eventSize } from '../rows.js';

/**
 * Append one batch in one statement (one round trip, one implicit transaction).
 *
 * - Idempotency: ids already in the stream come back as stored events and
 *   take no sequence (one probe of unique index events_stream_id_idx per
 *   caller-given id). A concurrent append of the same id makes this statement
 *   fail on that index; the caller retries and then finds the stored event.
 *   Ids rheo generated in this call (UUIDv7) cannot be stored yet, so they
 *   are not probed: with segments every probe visits each of the stream's
 *   segments and segment 0, which was 15 % of a 1,000-event append's time.
 * - Sequences: the partition counter rows (stream_partitions PK) are locked in
 *   partition order, then bumped by the number of new events. The row lock is
 *   held until commit, so appenders to one partition serialise and commit in
 *   sequence order: sequences are gapless and become visible in order, and a
 *   claim that sees sequence n has seen every sequence below it.
 * - Rows go in with one INSERT ... SELECT over unnest() of array parameters
 *   (docs/design.md#postgresql-measurements: multi-row inserts write ~219k rows/s; single-row commits
 *   top out near 12k/s).
 * - NOTIFY: at most one pg_notify per call, and only when something new was
 *   written (docs/design.md#postgresql-measurements: a notify per event halves commit throughput).
 *
 * $1 stream_id, $2 ids, $3 types, $4 keys, $5 payloads, $6 metadata,
 * $7 partitions, $8 timestamps, $9 channel, $10 stream name, $11 notify,
 * $12 sizes (payload plus metadata bytes by the core size rule, migration 003),
 * $13 the caller-given ids among $2 (the only ones probed).
 * Returns new rows as (id, partition, sequence, existed = false) and stored
 * rows in full with existed = true.
 */
export function appendSql(s: string): string {
  return `
WITH input AS (
  SELECT *
  FROM unnest($2::text[], $3::text[], $4::text[], $5::jsonb[], $6::jsonb[], $7::int[], $8::timestamptz[], $12::int[])
       WITH ORDINALITY AS i(id, type, key, payload, metadata, partition, ts, size_bytes, ord)
),
existing AS MATERIALIZED (
  -- One probe of events_stream_id_idx per caller-given id. Sent as a named statement,
  -- this is planned generically once per connection, often while the log is
  -- still small: written as \`id = ANY($2)\` that generic plan scanned the whole
  -- stream through events_stream_ts_idx (appends slowed from 30 ms to 480 ms
  -- per 1000 rows over 20 calls). An equality on both columns of the unique
  -- index, under a LIMIT that keeps the subquery from being flattened into a
  -- hash join over the stream, leaves the planner no other choice.
  SELECT ${eventColumns('e')}
  FROM (SELECT DISTINCT id FROM unnest($13::text[]) AS q(id)) q
  CROSS JOIN LATERAL (
    SELECT * FROM ${s}.events e WHERE e.stream_id = $1 AND e.id = q.id LIMIT 1
  ) e
),
fresh AS MATERIALIZED (
  SELECT i.*, row_number() OVER (PARTITION BY i.partition ORDER BY i.ord) AS rn
  FROM input i
  WHERE NOT EXISTS (SELECT 1 FROM existing x WHERE x.id = i.id)
),
counts AS (
  SELECT partition, count(*) AS n FROM fresh GROUP BY partition
),
locked AS MATERIALIZED (
  SELECT p.partition
  FROM ${s}.stream_partitions p
  WHERE p.stream_id = $1 AND p.partition IN (SELECT partition FROM counts)
  ORDER BY p.partition
  FOR UPDATE
),
bumped AS (
  UPDATE ${s}.stream_partitions p
  SET high_watermark = p.high_watermark + c.n
  FROM counts c JOIN locked l ON l.partition = c.partition
  WHERE p.stream_id = $1 AND p.partition = c.partition
  RETURNING p.partition, p.high_watermark - c.n AS base, p.segment
),
inserted AS (
  INSERT INTO ${s}.events (stream_id, partition, sequence, id, type, key, payload, metadata, ts, size_bytes, segment)
  SELECT $1, f.partition, b.base + f.rn, f.id, f.type, f.key, f.payload, f.metadata, f.ts, f.size_bytes, b.segment
  FROM fresh f JOIN bumped b ON b.partition = f.partition
  RETURNING id, partition, sequence
),
notified AS (
  SELECT pg_notify($9, $10) FROM (SELECT 1 FROM inserted LIMIT 1) x WHERE $11::boolean
)
SELECT i.id, i.partition, i.sequence, false AS existed,
       NULL::text AS type, NULL::text AS key, NULL::jsonb AS payload, NULL::jsonb AS metadata, NULL::int8 AS ts_ms
FROM inserted i CROSS JOIN (SELECT count(*) FROM notified) n
UNION ALL
SELECT x.id, x.partition, x.sequence, true, x.type, x.key, x.payload, x.metadata, x.ts_ms
FROM existing x`;
}

/**
 * $1 stream_id, $2 partition, $3 after, $4 limit, $5 max bytes. Events PK
 * range scan; the running size (migration 003) ends the page before the
 * first event past $5 bytes, so a read never sends `limit` events of the
 * largest size allowed. The inner LIMIT bounds the window's work.
 */
export function readSql(s: string): string {
  return `
SELECT ${eventColumns('e')}
FROM (
  SELECT e.*, sum(${eventSize('e')}) OVER w AS running_bytes, row_number() OVER w AS k
  FROM (
    SELECT * FROM ${s}.events e
    WHERE e.stream_id = $1 AND e.partition = $2 AND e.sequence > $3
    ORDER BY e.sequence
    LIMIT $4
  ) e
  WINDOW w AS (ORDER BY e.sequence ROWS UNBOUNDED PRECEDING)
) e
WHERE e.running_bytes <= $5 OR e.k = 1
ORDER BY e.sequence`;
}
