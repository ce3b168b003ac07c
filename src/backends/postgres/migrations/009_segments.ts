import { migration007 } from './007_sql_append.js';

/**
 * Migration 9: the log in segments (docs/storage.md).
 *
 * `events` becomes a table partitioned by RANGE (stream_id, segment). A
 * segment is one stream's run of sequences in every partition; it is opened
 * by `roll_segment` and, once retention has passed all of it, dropped whole
 * by `drop_segment`: no DELETE, so no dead tuples, and its space goes back
 * to the operating system at once, whatever snapshot is held elsewhere.
 *
 * Segments are by sequence, not by time: the timestamp is the caller's
 * (appends may carry any time), group frontiers and `keep` are sequences,
 * and a segment is dropped exactly when every partition's low watermark has
 * passed its last sequence, which needs no scan. A segment is opened when
 * any partition's current segment holds `span` events (a quarter of
 * `retention.maxEvents`, at least 256, at most the backend's segment size),
 * or, under `retention.maxAgeMs`, when it is older than a quarter of it, so
 * retention keeping N events holds at most N plus one segment (N/4) of
 * events that wait for their segment to go.
 *
 * Migration from the unsegmented table runs no copy and no rewrite: the old
 * table gets the `segment` column (a constant default, catalog only), a
 * CHECK (segment = 0) (one read of the table, no writes) and becomes the
 * DEFAULT partition: segment 0, shared by every stream. Its indexes are
 * reused as they are. Events written before stay in it and are trimmed by
 * row deletes as before; every stream's next append check opens its first
 * real segment, and from then on appends go there. The CHECK is what lets
 * every later ATTACH skip scanning segment 0 (PostgreSQL proves the new
 * range disjoint from it).
 *
 * The primary key (stream_id, partition, sequence) and the unique index
 * (stream_id, id) are per segment: a partitioned table's unique index must
 * include the partition key. Sequences stay unique because the counter row
 * hands them out. Ids stay unique because an append looks up every retained
 * segment first and because a roll locks every counter row of the stream:
 * all appends in flight at one moment write the same segment, so two of
 * them racing on one id meet in that segment's unique index, exactly as
 * before (the loser's statement fails and is retried).
 *
 * `roll_segment` and `drop_segment` are SECURITY DEFINER (the migrating
 * role owns the tables, so a role with only the runtime privileges can
 * still open and drop segments through them) and take their DDL locks with
 * a short lock_timeout: a session that holds a lock on `events` (a
 * pg_dump, say) makes them give up and report it, never queue every
 * append behind them.
 */
/** The functions migration 9 installs (append is migration 7's, replaced). */
export const SEGMENT_FUNCTIONS = ['roll_segment', 'drop_segment'] as const;

const APPEND_FUNCTION = migration007.sql.slice(migration007.sql.indexOf('CREATE FUNCTION :schema.append('));

/** migration 7's SQL append, writing into the partition counter's current segment. */
const SEGMENTED_APPEND = [
  ['CREATE FUNCTION :schema.append(', 'CREATE OR REPLACE FUNCTION :schema.append('],
  ['  v_sequence bigint;\n', '  v_sequence bigint;\n  v_segment bigint;\n'],
  ['RETURNING p.high_watermark INTO v_sequence;', 'RETURNING p.high_watermark, p.segment INTO v_sequence, v_segment;'],
  [
    'INSERT INTO :schema.events (stream_id, "partition", sequence, id, type, key, payload, metadata, ts, size_bytes)\n      VALUES (s_id, v_partition, v_sequence, v_id, type, key, payload, metadata, v_ts, v_size);',
    'INSERT INTO :schema.events (stream_id, "partition", sequence, id, type, key, payload, metadata, ts, size_bytes, segment)\n      VALUES (s_id, v_partition, v_sequence, v_id, type, key, payload, metadata, v_ts, v_size, v_segment);',
  ],
].reduce((sql, [from, to]) => {
  if (!sql.includes(from!)) throw new Error(`migration 9: migration 7's append no longer contains ${from}`);
  return sql.replace(from!, to!);
}, APPEND_FUNCTION);

export const migration009 = {
  version: 9,
  name: 'segments',
  sql: `
ALTER TABLE :schema.stream_partitions ADD COLUMN segment bigint NOT NULL DEFAULT 0;

ALTER TABLE :schema.events ADD COLUMN segment bigint NOT NULL DEFAULT 0;
ALTER TABLE :schema.events ADD CONSTRAINT events_0_segment CHECK (segment = 0);
ALTER TABLE :schema.events RENAME TO events_0;
ALTER INDEX :schema.events_pkey RENAME TO events_0_pkey;
ALTER INDEX :schema.events_stream_id_idx RENAME TO events_0_id_idx;
ALTER INDEX :schema.events_stream_ts_idx RENAME TO events_0_ts_idx;
ALTER INDEX :schema.events_stream_key_idx RENAME TO events_0_key_idx;

-- The same columns, NOT NULLs and defaults as segment 0.
CREATE TABLE :schema.events (LIKE :schema.events_0 INCLUDING DEFAULTS) PARTITION BY RANGE (stream_id, segment);
-- Same definitions as segment 0's: ATTACH adopts its indexes instead of building new ones.
CREATE INDEX events_stream_ts_idx ON :schema.events (stream_id, ts, partition, sequence);
CREATE INDEX events_stream_key_idx ON :schema.events (stream_id, key, ts) WHERE key IS NOT NULL;
ALTER TABLE :schema.events ATTACH PARTITION :schema.events_0 DEFAULT;

-- Per stream, the segments opened by roll_segment and where each begins in
-- every partition; a segment ends where the next one of its stream begins.
CREATE TABLE :schema.segments (
  stream_id  integer NOT NULL,
  segment    bigint NOT NULL,
  partition  integer NOT NULL,
  first_seq  bigint NOT NULL,
  opened_at  timestamptz NOT NULL,
  PRIMARY KEY (stream_id, segment, partition)
);
CREATE SEQUENCE :schema.segment_ids START 1;

CREATE FUNCTION :schema.roll_segment(p_stream integer, p_max_span bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Restored when the function returns: the caller's own statements keep theirs.
SET lock_timeout = '200ms'
AS $rheo$
DECLARE
  v_max_events bigint;
  v_max_age_ms bigint;
  v_span bigint;
  v_due boolean;
  v_segment bigint;
  v_table text;
BEGIN
  -- One roll per stream at a time; a second caller finds the work done.
  PERFORM pg_advisory_xact_lock(hashtext('rheo_segment:' || ':schema'), p_stream);
  SELECT st.retention_max_events, st.retention_max_age_ms INTO v_max_events, v_max_age_ms
  FROM :schema.streams st WHERE st.id = p_stream;
  IF NOT FOUND THEN RETURN NULL; END IF;
  v_span := least(p_max_span, greatest(256, coalesce(v_max_events / 4, p_max_span)));
  SELECT bool_or(p.segment = 0 OR p.high_watermark - s.first_seq + 1 >= v_span
                 OR (v_max_age_ms IS NOT NULL AND p.high_watermark >= s.first_seq
                     AND s.opened_at <= clock_timestamp() - (v_max_age_ms / 4) * interval '1 millisecond'))
  INTO v_due
  FROM :schema.stream_partitions p
  LEFT JOIN :schema.segments s ON s.stream_id = p.stream_id AND s.segment = p.segment AND s.partition = p.partition
  WHERE p.stream_id = p_stream;
  IF NOT coalesce(v_due, false) THEN RETURN NULL; END IF;

  v_segment := nextval(':schema.segment_ids');
  v_table := 'events_' || v_segment;
  -- The CHECK lets ATTACH skip its validation scan; segment 0's CHECK lets
  -- it skip scanning segment 0.
  -- Index names as segment 0's: events_<segment>_pkey and events_<segment>_id_idx.
  EXECUTE format('CREATE TABLE %s.%I (LIKE %s.events INCLUDING DEFAULTS,'
                 ' CONSTRAINT %I PRIMARY KEY (stream_id, partition, sequence),'
                 ' CONSTRAINT %I UNIQUE (stream_id, id),'
                 ' CONSTRAINT %I CHECK (stream_id = %s AND segment = %s))',
                 ':schema', v_table, ':schema', v_table || '_pkey', v_table || '_id_idx', v_table || '_segment',
                 p_stream, v_segment);
  EXECUTE format('ALTER TABLE %s.events ATTACH PARTITION %s.%I FOR VALUES FROM (%s, %s) TO (%s, %s)',
                 ':schema', ':schema', v_table, p_stream, v_segment, p_stream, v_segment + 1);
  -- Appends hold their counter rows until commit, so every append into the
  -- previous segment commits before this roll does, and every later one
  -- reads the new segment from the row it locks.
  PERFORM 1 FROM :schema.stream_partitions p WHERE p.stream_id = p_stream ORDER BY p.partition FOR UPDATE;
  INSERT INTO :schema.segments (stream_id, segment, partition, first_seq, opened_at)
  SELECT p.stream_id, v_segment, p.partition, p.high_watermark + 1, clock_timestamp()
  FROM :schema.stream_partitions p WHERE p.stream_id = p_stream;
  UPDATE :schema.stream_partitions p SET segment = v_segment WHERE p.stream_id = p_stream;
  RETURN v_segment;
END
$rheo$;

CREATE FUNCTION :schema.drop_segment(p_stream integer, p_segment bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '200ms'
AS $rheo$
BEGIN
  IF p_segment < 1
     OR NOT EXISTS (SELECT 1 FROM :schema.segments s WHERE s.stream_id = p_stream AND s.segment = p_segment)
     OR EXISTS (SELECT 1 FROM :schema.stream_partitions p WHERE p.stream_id = p_stream AND p.segment = p_segment) THEN
    RETURN false;
  END IF;
  BEGIN
      EXECUTE format('DROP TABLE IF EXISTS %s.%I', ':schema', 'events_' || p_segment);
  EXCEPTION WHEN lock_not_available THEN
    RETURN false;
  END;
  DELETE FROM :schema.segments s WHERE s.stream_id = p_stream AND s.segment = p_segment;
  RETURN true;
END
$rheo$;

${SEGMENTED_APPEND}`,
} as const;
