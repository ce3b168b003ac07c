/**
 * Migration 4: replay holds. A replay from sequence `s` moves a group's
 * cursor back to `s - 1` so that the acked and dead sequences above it are
 * claimed again as new. Deliveries still open at that moment must not be:
 * while open, their `deliveries` row keeps them out of the fresh claim, but
 * an ack deletes the row and a dead letter moves it, and then nothing told
 * them apart from never-offered sequences. They were delivered again, and a
 * dead one was leased while still listed as dead (the differential model
 * test found both; docs/semantics.md, "Replay").
 *
 * A hold is one row per such sequence, written by the replay, skipped by the
 * fresh claim, and deleted when the cursor moves past it (claim and replay
 * keep `cursor + 1` unheld, so the frontier stays `min(cursor, min(open) - 1)`).
 * Holds are bounded by the deliveries open at replays. The backfill holds
 * what an earlier version left above a replayed-back cursor.
 */
export const migration004 = {
  version: 4,
  name: 'replay_holds',
  sql: `
CREATE TABLE :schema.replay_holds (
  group_id   integer NOT NULL,
  partition  integer NOT NULL,
  sequence   bigint NOT NULL,
  PRIMARY KEY (group_id, partition, sequence)
);
INSERT INTO :schema.replay_holds (group_id, partition, sequence)
SELECT d.group_id, d.partition, d.sequence
FROM :schema.deliveries d
JOIN :schema.group_cursors c ON c.group_id = d.group_id AND c.partition = d.partition
WHERE d.sequence > c.cursor
UNION
SELECT dl.group_id, dl.partition, dl.sequence
FROM :schema.dead_letters dl
JOIN :schema.group_cursors c ON c.group_id = dl.group_id AND c.partition = dl.partition
WHERE dl.sequence > c.cursor;
`,
} as const;
