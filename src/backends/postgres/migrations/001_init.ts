/**
 * Migration 1: the log, consumer-group state and the migrations ledger.
 * Released migrations never change; add `002_*.ts` instead. `:schema` is
 * replaced by the validated, quoted schema name before execution.
 *
 * Group state follows docs/semantics.md: per group and partition a cursor over
 * the log (`group_cursors`), plus rows only for open deliveries
 * (`deliveries`: leased or pending) and dead letters. An ack deletes its
 * delivery row, so storage is bounded by the unsettled window plus dead
 * letters, and claiming new events never rewrites old rows (docs/design.md#postgresql-measurements: a
 * claim that flags rows in place decays as dead index entries pile up).
 */
export const migration001 = {
  version: 1,
  name: 'init',
  sql: `
CREATE TABLE :schema.streams (
  id          integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name        text NOT NULL UNIQUE,
  partitions  integer NOT NULL CHECK (partitions > 0),
  created_at  timestamptz NOT NULL
);

-- One row per partition: the sequence counter. Appenders take its row lock
-- (UPDATE ... SET high_watermark = high_watermark + n) inside the append, so
-- appenders to one partition serialise and commit in sequence order: a
-- reader can never see sequence n+1 without n (invariant 3).
CREATE TABLE :schema.stream_partitions (
  stream_id       integer NOT NULL REFERENCES :schema.streams (id),
  partition       integer NOT NULL,
  high_watermark  bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (stream_id, partition)
);

CREATE TABLE :schema.events (
  stream_id  integer NOT NULL,
  partition  integer NOT NULL,
  sequence   bigint NOT NULL,
  id         text NOT NULL,
  type       text NOT NULL,
  key        text,
  payload    jsonb NOT NULL,
  metadata   jsonb NOT NULL,
  ts         timestamptz NOT NULL,
  -- No foreign key to stream_partitions: the append statement only inserts
  -- into partitions whose counter row it has just locked and bumped, and the
  -- per-row FK trigger was 28% of an append's execution time (EXPLAIN ANALYZE,
  -- 1000 rows: 6.7 of 23.8 ms).
  PRIMARY KEY (stream_id, partition, sequence)
);
-- Idempotent appends: an id is unique per stream.
CREATE UNIQUE INDEX events_stream_id_idx ON :schema.events (stream_id, id);
-- query() orders by (timestamp, partition, sequence); replay/startAt by time.
CREATE INDEX events_stream_ts_idx ON :schema.events (stream_id, ts, partition, sequence);
CREATE INDEX events_stream_key_idx ON :schema.events (stream_id, key, ts) WHERE key IS NOT NULL;

CREATE TABLE :schema.groups (
  id            integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  stream_id     integer NOT NULL REFERENCES :schema.streams (id),
  name          text NOT NULL,
  max_attempts  integer NOT NULL CHECK (max_attempts > 0),
  created_at    timestamptz NOT NULL,
  UNIQUE (stream_id, name)
);

-- The highest sequence the group has claimed by advancing over the log.
-- Fetch locks these rows (in partition order) to advance them.
CREATE TABLE :schema.group_cursors (
  group_id   integer NOT NULL REFERENCES :schema.groups (id),
  partition  integer NOT NULL,
  cursor     bigint NOT NULL,
  PRIMARY KEY (group_id, partition)
);

-- Open deliveries only: leased (lease_id set, visible_at = expiry) or pending
-- (lease_id null, visible_at = when it may be claimed again).
CREATE TABLE :schema.deliveries (
  group_id     integer NOT NULL,
  partition    integer NOT NULL,
  sequence     bigint NOT NULL,
  attempt      integer NOT NULL,
  lease_id     text,
  consumer_id  text,
  leased_at    timestamptz,
  visible_at   timestamptz NOT NULL,
  PRIMARY KEY (group_id, partition, sequence)
);
-- Claimable open deliveries (visible_at <= now) without walking live leases.
-- Deliberately not (group_id, partition, ...): sharing the primary key's
-- prefix let the planner probe this index with a filter on sequence for
-- fenced settles (O(open rows) per lease, 70 ms per 500-lease ack) instead of
-- the primary key's exact match.
CREATE INDEX deliveries_visible_idx ON :schema.deliveries (group_id, visible_at);

CREATE TABLE :schema.dead_letters (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  group_id         integer NOT NULL,
  partition        integer NOT NULL,
  sequence         bigint NOT NULL,
  attempt          integer NOT NULL,
  reason           text,
  dead_lettered_at timestamptz NOT NULL,
  UNIQUE (group_id, partition, sequence)
);
CREATE INDEX dead_letters_group_idx ON :schema.dead_letters (group_id, id);
`,
} as const;
