import { ms } from '../connection.js';
import { eventColumns, eventSize, nowSql } from '../rows.js';
import { startCursorSql } from './streams.js';

/**
 * Per partition: cursor, high watermark, lowest open sequence (the lower of
 * a min() over the deliveries PK prefix and the first unsettled member of
 * the lowest lease range), and the timestamp of the first
 * unsettled event (events PK probe). frontier = min(cursor, min(open) - 1):
 * after a replay moved the cursor back below open deliveries, the sequences
 * just above the cursor are unsettled again, so the cursor bounds the
 * frontier too (invariant 6). One snapshot, so the numbers are mutually
 * consistent. $1 group_id, $2 stream_id, $3 partitions.
 */
export function lagSql(s: string): string {
  return `
SELECT c.partition, c.cursor, p.high_watermark, m.min_open, ${ms('e.ts')} AS oldest_ms,
       COALESCE(lw.low_watermark, 1) AS low_watermark
FROM ${s}.group_cursors c
JOIN ${s}.stream_partitions p ON p.stream_id = $2 AND p.partition = c.partition
LEFT JOIN ${s}.low_watermarks lw ON lw.stream_id = $2 AND lw.partition = c.partition
CROSS JOIN LATERAL (
  SELECT LEAST(
    (SELECT min(d.sequence) FROM ${s}.deliveries d WHERE d.group_id = $1 AND d.partition = c.partition),
    -- Ranges are disjoint and never fully settled: the lowest one holds the
    -- lowest unsettled member, at its first clear bit.
    (SELECT r.first_seq + position('0' IN r.settled::text) - 1
     FROM ${s}.lease_ranges r WHERE r.group_id = $1 AND r.partition = c.partition
     ORDER BY r.first_seq LIMIT 1)
  ) AS min_open
) m
LEFT JOIN ${s}.events e
  ON e.stream_id = $2 AND e.partition = c.partition AND e.sequence = LEAST(m.min_open - 1, c.cursor) + 1
WHERE c.group_id = $1 AND c.partition = ANY ($3::int[])
ORDER BY c.partition`;
}

/** Range members count one delivery each, like the rows they stand for. $1 group_id. */
export function countsSql(s: string): string {
  return `
WITH ranged AS (
  SELECT COALESCE(sum(length(settled) - bit_count(settled)), 0)::int8 AS open
  FROM ${s}.lease_ranges WHERE group_id = $1
)
SELECT (SELECT count(*) FROM ${s}.deliveries WHERE group_id = $1) + (SELECT open FROM ranged) AS deliveries,
       (SELECT count(*) FROM ${s}.deliveries WHERE group_id = $1 AND lease_id IS NOT NULL) + (SELECT open FROM ranged) AS inflight,
       (SELECT count(*) FROM ${s}.dead_letters WHERE group_id = $1) AS dead_letters`;
}

/**
 * countsSql per partition, for groupInfo: leased rows and unsettled range
 * members, and dead letters (dead_letters unique key prefix). $1 group_id.
 */
export function partitionCountsSql(s: string): string {
  return `
SELECT c.partition,
       (SELECT count(*) FROM ${s}.deliveries d
        WHERE d.group_id = $1 AND d.partition = c.partition AND d.lease_id IS NOT NULL)
       + (SELECT COALESCE(sum(length(r.settled) - bit_count(r.settled)), 0)::int8 FROM ${s}.lease_ranges r
          WHERE r.group_id = $1 AND r.partition = c.partition) AS inflight,
       (SELECT count(*) FROM ${s}.dead_letters dl WHERE dl.group_id = $1 AND dl.partition = c.partition) AS dead_letters
FROM ${s}.group_cursors c
WHERE c.group_id = $1
ORDER BY c.partition`;
}

/**
 * Lock the group's cursors for the given partitions (all when null), in
 * partition order like fetch does, so admin changes queue behind in-flight
 * claims and later statements of the transaction see their effects.
 * $1 group_id, $2 partitions or null.
 */
export function lockCursorsSql(s: string): string {
  return `
SELECT partition, cursor FROM ${s}.group_cursors
WHERE group_id = $1 AND ($2::int[] IS NULL OR partition = ANY ($2::int[]))
ORDER BY partition
FOR UPDATE`;
}

/**
 * Lock a stream's low watermarks FOR SHARE, in partition order, before a
 * replay or reset moves cursors back: a trim (FOR UPDATE on the same rows)
 * then either finished before (and the new cursors respect its low
 * watermark) or waits and sees the new cursors. Taken before the cursor
 * locks, as the trim takes them. $1 stream_id.
 */
export function lockLowWatermarksSql(s: string): string {
  return `
SELECT partition, low_watermark FROM ${s}.low_watermarks
WHERE stream_id = $1
ORDER BY partition
FOR SHARE`;
}

/**
 * $1 group_id, $2 stream_id, $3 after, $4 override partitions, $5 override
 * cursors, $6 at or null, $7 the partitions to reset (the others keep their
 * state).
 */
export function resetSql(s: string): string {
  return `
WITH open_rows AS (DELETE FROM ${s}.deliveries WHERE group_id = $1 AND partition = ANY ($7::int[])),
open_ranges AS (DELETE FROM ${s}.lease_ranges WHERE group_id = $1 AND partition = ANY ($7::int[])),
dead_rows AS (DELETE FROM ${s}.dead_letters WHERE group_id = $1 AND partition = ANY ($7::int[])),
holds AS (DELETE FROM ${s}.replay_holds WHERE group_id = $1 AND partition = ANY ($7::int[]))
UPDATE ${s}.group_cursors c
SET cursor = ${startCursorSql(s, '$3', '$6')}
FROM ${s}.stream_partitions p
LEFT JOIN unnest($4::int[], $5::int8[]) AS pp(partition, after) ON pp.partition = p.partition
LEFT JOIN ${s}.low_watermarks lw ON lw.stream_id = p.stream_id AND lw.partition = p.partition
WHERE c.group_id = $1 AND p.stream_id = $2 AND p.partition = c.partition AND c.partition = ANY ($7::int[])`;
}

/**
 * Replay from a sequence (per partition): acked and dead sequences at or above
 * it become claimable again by moving the cursor back and dropping those dead
 * letters and their holds; open deliveries stay as they are and are held
 * (migration 003) so they are not offered again once settled. Deleted holds
 * are those of sequences no longer open and inserted ones are of open
 * sequences, so the two never touch one row. Run replayAdvanceSql next.
 * $1 group_id, $2 partitions, $3 from-sequences (aligned with $2).
 */
export function replayFromSql(s: string): string {
  return `
WITH target AS (
  SELECT * FROM unnest($2::int[], $3::int8[]) AS t(partition, from_seq)
),
undead AS (
  DELETE FROM ${s}.dead_letters dl USING target t
  WHERE dl.group_id = $1 AND dl.partition = t.partition AND dl.sequence >= t.from_seq
),
unheld AS (
  DELETE FROM ${s}.replay_holds h USING target t
  WHERE h.group_id = $1 AND h.partition = t.partition AND h.sequence >= t.from_seq
    AND NOT EXISTS (
      SELECT 1 FROM ${s}.deliveries d
      WHERE d.group_id = $1 AND d.partition = h.partition AND d.sequence = h.sequence
    )
),
held AS (
  INSERT INTO ${s}.replay_holds (group_id, partition, sequence)
  SELECT $1, d.partition, d.sequence
  FROM target t
  JOIN ${s}.deliveries d ON d.group_id = $1 AND d.partition = t.partition AND d.sequence >= t.from_seq
  ON CONFLICT (group_id, partition, sequence) DO NOTHING
)
UPDATE ${s}.group_cursors c
SET cursor = LEAST(c.cursor, t.from_seq - 1)
FROM target t
WHERE c.group_id = $1 AND c.partition = t.partition`;
}

/**
 * After a replay: move each cursor on over the run of holds directly above
 * it and drop those holds, so `cursor + 1` is never held (the claim keeps
 * the same rule). $1 group_id, $2 partitions.
 */
export function replayAdvanceSql(s: string): string {
  return `
WITH moved AS (
  UPDATE ${s}.group_cursors c
  SET cursor = (
    SELECT min(h.sequence) FROM ${s}.replay_holds h
    WHERE h.group_id = $1 AND h.partition = c.partition AND h.sequence > c.cursor
      AND NOT EXISTS (
        SELECT 1 FROM ${s}.replay_holds h2
        WHERE h2.group_id = $1 AND h2.partition = c.partition AND h2.sequence = h.sequence + 1
      )
  )
  WHERE c.group_id = $1 AND c.partition = ANY ($2::int[])
    AND EXISTS (
      SELECT 1 FROM ${s}.replay_holds h
      WHERE h.group_id = $1 AND h.partition = c.partition AND h.sequence = c.cursor + 1
    )
  RETURNING c.partition, c.cursor
)
DELETE FROM ${s}.replay_holds h
USING moved m
WHERE h.group_id = $1 AND h.partition = m.partition AND h.sequence <= m.cursor`;
}

/**
 * Per partition, the lowest sequence whose timestamp is >= $3 (partitions
 * without one are left out). $1 stream_id, $2 partitions, $3 time.
 */
export function resolveFromTimeSql(s: string): string {
  return `
SELECT e.partition, min(e.sequence) AS from_seq
FROM ${s}.events e
WHERE e.stream_id = $1 AND e.partition = ANY ($2::int[]) AND e.ts >= $3::timestamptz
GROUP BY e.partition`;
}

/** $1 stream_id, $2 event ids. */
export function eventsByIdSql(s: string): string {
  return `SELECT id, partition, sequence FROM ${s}.events WHERE stream_id = $1 AND id = ANY ($2::text[])`;
}

/**
 * Reopen exactly these deliveries with attempt 0: dead ones leave the
 * dead-letter list, acked ones (at or below the cursor or held above it, not
 * open) get a pending row, open ones are left alone (ON CONFLICT on the
 * deliveries PK).
 * $1 group_id, $2 partitions, $3 sequences, $4 now or null. `target` may
 * replace the list by a query yielding `(partition, sequence)`
 * (replay by query, sql/query.ts).
 */
export function reopenSql(s: string, target = 'SELECT * FROM unnest($2::int[], $3::int8[]) AS t(partition, sequence)'): string {
  return `
WITH target AS (
  ${target}
),
undead AS (
  DELETE FROM ${s}.dead_letters dl USING target t
  WHERE dl.group_id = $1 AND dl.partition = t.partition AND dl.sequence = t.sequence
)
INSERT INTO ${s}.deliveries (group_id, partition, sequence, attempt, visible_at)
SELECT $1, t.partition, t.sequence, 0, ${nowSql('$4')}
FROM target t
JOIN ${s}.group_cursors c ON c.group_id = $1 AND c.partition = t.partition
WHERE t.sequence <= c.cursor OR EXISTS (
  SELECT 1 FROM ${s}.replay_holds h
  WHERE h.group_id = $1 AND h.partition = t.partition AND h.sequence = t.sequence
)
ON CONFLICT (group_id, partition, sequence) DO NOTHING`;
}

/**
 * Redrive: dead letters (all, or those of the given events) become pending
 * deliveries with attempt 0. $1 group_id, $2 stream_id, $3 event ids or null,
 * $4 now or null. Returns how many moved.
 */
export function redriveSql(s: string): string {
  return `
WITH moved AS (
  DELETE FROM ${s}.dead_letters dl
  WHERE dl.group_id = $1
    AND ($3::text[] IS NULL OR EXISTS (
      SELECT 1 FROM ${s}.events e
      WHERE e.stream_id = $2 AND e.partition = dl.partition AND e.sequence = dl.sequence AND e.id = ANY ($3::text[])
    ))
  RETURNING dl.partition, dl.sequence
),
reopened AS (
  INSERT INTO ${s}.deliveries (group_id, partition, sequence, attempt, visible_at)
  SELECT $1, m.partition, m.sequence, 0, ${nowSql('$4')} FROM moved m
  ON CONFLICT (group_id, partition, sequence) DO NOTHING
),
-- Owners of partitions with redriven events read again from the frontier,
-- under the group's ownership lock (sql/ownership.ts).
owning AS (
  SELECT group_id FROM ${s}.group_ownership WHERE group_id = $1 FOR UPDATE
),
fenced AS (
  UPDATE ${s}.partition_owners po SET generation = po.generation + 1
  WHERE po.group_id IN (SELECT group_id FROM owning) AND po.owner IS NOT NULL AND po.partition IN (SELECT partition FROM moved)
)
SELECT count(*) AS moved FROM moved`;
}

/** $1 group_id, $2 dead-letter id. */
export function deadLetterExistsSql(s: string): string {
  return `SELECT 1 AS found FROM ${s}.dead_letters WHERE group_id = $1 AND id = $2::int8`;
}

/**
 * Dead letters in id order (dead_letters_group_idx). $1 group_id, $2 stream_id, $3 after id, $4 limit, $5 max bytes: the page
 * ends before the first event that would take the running size (migration
 * 003) past $5, so a page never carries `limit` events of the largest size.
 */
export function deadLettersSql(s: string): string {
  return `
SELECT x.dead_letter_id, x.attempt, x.reason, x.dead_lettered_at_ms, ${eventColumns('x')}
FROM (
  SELECT x.*, sum(x.size) OVER w AS running_bytes, row_number() OVER w AS k
  FROM (
    SELECT dl.id AS dl_id, dl.id::text AS dead_letter_id, dl.attempt, dl.reason, ${ms('dl.dead_lettered_at')} AS dead_lettered_at_ms,
           e.*, ${eventSize('e')} AS size
    FROM ${s}.dead_letters dl
    JOIN ${s}.events e ON e.stream_id = $2 AND e.partition = dl.partition AND e.sequence = dl.sequence
    WHERE dl.group_id = $1 AND dl.id > $3::int8
    ORDER BY dl.id
    LIMIT $4
  ) x
  WINDOW w AS (ORDER BY x.dl_id ROWS UNBOUNDED PRECEDING)
) x
WHERE x.running_bytes <= $5 OR x.k = 1
ORDER BY x.dl_id`;
}
