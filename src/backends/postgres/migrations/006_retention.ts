/**
 * Migration 6: retention, low watermarks and stream deletion
 * (docs/semantics.md, "Retention, trimming and deletion").
 *
 * - `streams.retention_*`: the policy the background trimmer applies.
 * - `low_watermarks`: per partition, the first retained sequence. A table of
 *   its own rather than a column of `stream_partitions`: appends lock that
 *   row for every batch, and a trim (which locks its low-watermark rows
 *   FOR UPDATE) or a group start (FOR SHARE) must not queue behind or block
 *   appends. Backfilled at 1: nothing was ever trimmed before this migration.
 * - `deleted_streams`: streams whose catalog rows are gone but whose events
 *   are still being deleted in bounded batches (by deleteStream, and by the
 *   background trimmer if that process died first).
 * - The events table is vacuumed after 2% of its rows changed instead of the
 *   default 20% (and after 5% inserted): trimming deletes from its front all
 *   the time, and the sooner those pages are vacuumed the sooner new appends
 *   reuse them, which keeps the table and its indexes at the retained size.
 *   Storage parameters only: no rewrite, no long lock.
 */
export const migration006 = {
  version: 6,
  name: 'retention',
  sql: `
ALTER TABLE :schema.streams
  ADD COLUMN retention_max_age_ms bigint CHECK (retention_max_age_ms > 0),
  ADD COLUMN retention_max_events bigint CHECK (retention_max_events >= 0);

CREATE TABLE :schema.low_watermarks (
  stream_id      integer NOT NULL,
  partition      integer NOT NULL,
  low_watermark  bigint NOT NULL DEFAULT 1,
  PRIMARY KEY (stream_id, partition)
);
INSERT INTO :schema.low_watermarks (stream_id, partition)
SELECT stream_id, partition FROM :schema.stream_partitions;

CREATE TABLE :schema.deleted_streams (
  stream_id   integer PRIMARY KEY,
  deleted_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE :schema.events SET (
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_insert_scale_factor = 0.05
);
`,
} as const;
