import { ms } from '../connection.js';
import { eventColumns, eventSize, nowSql } from '../rows.js';

/**
 * Partition ownership (migration 005). The heartbeat and leave are short
 * transactions that lock the group's `group_ownership` row and run
 * core/membership.ts in TypeScript between a read and a write of only the
 * owner rows that changed. Everything else that changes owner rows (release,
 * and the generation bump of replay, reset and redrive) takes the same group
 * row first, so nothing changes them between a heartbeat's read and write.
 * Commits take their partition's owner row in share mode: they serialise
 * with a write of that row only, and re-check the fence against the
 * committed row (READ COMMITTED re-evaluates the join after the wait).
 * Heartbeats do not lock owner rows they only read: when they did (every
 * row, FOR UPDATE), every commit of the group queued behind every
 * heartbeat's transaction, and two member processes drained slower than
 * one. Lock order everywhere: group_ownership, partition_owners,
 * group_cursors.
 */

/**
 * Locks (creating if needed) the group's ownership row and says whether a
 * competing-consumer lease is live (deliveries_visible_idx; ranges of the
 * group by their primary key prefix). $1 group_id, $2 now or null.
 */
export function lockGroupSql(s: string): string {
  return `
WITH locked AS (
  INSERT INTO ${s}.group_ownership AS o (group_id) VALUES ($1)
  ON CONFLICT (group_id) DO UPDATE SET generation = o.generation
  RETURNING o.generation
)
SELECT locked.generation, ${ms(nowSql('$2'))} AS now_ms,
  (EXISTS (SELECT 1 FROM ${s}.deliveries d
           WHERE d.group_id = $1 AND d.visible_at > ${nowSql('$2')} AND d.lease_id IS NOT NULL)
   OR EXISTS (SELECT 1 FROM ${s}.lease_ranges r WHERE r.group_id = $1 AND r.visible_at > ${nowSql('$2')})) AS leased
FROM locked`;
}

/** Members and partition owners of the group (under the group lock). $1 group_id. */
export function readMembershipSql(s: string): string {
  return `
WITH slots AS (
  SELECT partition, owner, target, generation, ${ms('revoked_at')} AS revoked_at_ms
  FROM ${s}.partition_owners WHERE group_id = $1
  ORDER BY partition
)
SELECT
  (SELECT COALESCE(json_agg(json_build_array(member_id, ${ms('expires_at')})), '[]'::json)
   FROM ${s}.group_members WHERE group_id = $1) AS members,
  (SELECT COALESCE(json_agg(json_build_array(partition, owner, target, generation, revoked_at_ms)), '[]'::json)
   FROM slots) AS slots`;
}

/**
 * Writes what a membership step changed, in one statement: upserted and
 * deleted members, upserted owner rows, the group generation.
 * $1 group_id, $2 upserted member ids, $3 their expiries (ms), $4 deleted
 * member ids, $5 partitions, $6 owners, $7 targets, $8 generations,
 * $9 revoked_at (ms or null), $10 group generation.
 */
export function writeMembershipSql(s: string): string {
  return `
${membershipWrites(s)}
UPDATE ${s}.group_ownership SET generation = $10 WHERE group_id = $1`;
}

/**
 * writeMembershipSql, answering with the frontiers of partitions $11 as
 * frontiersSql does: a heartbeat that moved no partition (nothing to
 * explode, so nothing the frontiers read changes) writes and reads in one
 * round trip. The writes run whether or not the SELECT reads them.
 */
export function writeMembershipFrontiersSql(s: string): string {
  return `
${membershipWrites(s)},
ownership AS (
  UPDATE ${s}.group_ownership SET generation = $10 WHERE group_id = $1
)
${frontiersSelect(s, '$11')}`;
}

function membershipWrites(s: string): string {
  return `WITH upserted AS (
  INSERT INTO ${s}.group_members (group_id, member_id, expires_at)
  SELECT $1, m.member_id, to_timestamp(m.expires_ms / 1000.0)
  FROM unnest($2::text[], $3::int8[]) AS m(member_id, expires_ms)
  ON CONFLICT (group_id, member_id) DO UPDATE SET expires_at = EXCLUDED.expires_at
),
removed AS (
  DELETE FROM ${s}.group_members WHERE group_id = $1 AND member_id = ANY ($4::text[])
),
slots AS (
  INSERT INTO ${s}.partition_owners (group_id, partition, owner, target, generation, revoked_at)
  SELECT $1, x.partition, x.owner, x.target, x.generation,
         CASE WHEN x.revoked_ms IS NULL THEN NULL ELSE to_timestamp(x.revoked_ms / 1000.0) END
  FROM unnest($5::int[], $6::text[], $7::text[], $8::int8[], $9::int8[]) AS x(partition, owner, target, generation, revoked_ms)
  ON CONFLICT (group_id, partition) DO UPDATE
  SET owner = EXCLUDED.owner, target = EXCLUDED.target, generation = EXCLUDED.generation, revoked_at = EXCLUDED.revoked_at
)`;
}

/**
 * Frontier per partition for a member's view: min(cursor, lowest open - 1),
 * as lagSql computes it (ranges were exploded into rows when ownership was
 * granted, but the lowest range is taken too for a fetch that raced it).
 * $1 group_id, $2 partitions.
 */
export function frontiersSql(s: string): string {
  return frontiersSelect(s, '$2');
}

function frontiersSelect(s: string, partitions: string): string {
  return `
SELECT c.partition,
  LEAST(c.cursor,
        (SELECT min(d.sequence) - 1 FROM ${s}.deliveries d WHERE d.group_id = $1 AND d.partition = c.partition),
        (SELECT r.first_seq + position('0' IN r.settled::text) - 2
         FROM ${s}.lease_ranges r WHERE r.group_id = $1 AND r.partition = c.partition
         ORDER BY r.first_seq LIMIT 1)) AS frontier
FROM ${s}.group_cursors c
WHERE c.group_id = $1 AND c.partition = ANY (${partitions}::int[])`;
}

/**
 * Hands partitions back: straight to the target when that is another
 * member (with the next generation), otherwise unowned until a heartbeat
 * grants it. Fenced by owner and generation; returns the applied op indexes.
 * $1 group_ids, $2 partitions, $3 member ids, $4 generations.
 */
export function releaseSql(s: string): string {
  return `
WITH f AS (
  SELECT * FROM unnest($1::int[], $2::int[], $3::text[], $4::int8[]) WITH ORDINALITY AS f(group_id, partition, member_id, generation, i)
),
locked AS (
  SELECT o.group_id FROM ${s}.group_ownership o
  WHERE o.group_id IN (SELECT group_id FROM f)
  ORDER BY o.group_id
  FOR UPDATE
)
UPDATE ${s}.partition_owners po
SET owner = CASE WHEN po.target IS NOT NULL AND po.target <> po.owner THEN po.target END,
    generation = po.generation + CASE WHEN po.target IS NOT NULL AND po.target <> po.owner THEN 1 ELSE 0 END,
    revoked_at = NULL
FROM f
WHERE po.group_id = f.group_id AND po.partition = f.partition AND po.owner = f.member_id AND po.generation = f.generation
  AND po.group_id IN (SELECT group_id FROM locked)
RETURNING f.i`;
}

/**
 * Fenced range reads of several owned partitions in one statement (the
 * reads a consumer's workers ask for at once, coalesced by ownership.ts).
 * Per read: one row with `fenced` and no event when its fence is stale or
 * nothing is there, else its events like readSql, each row tagged with the
 * read's index `i` (1-based). Owner rows are read, not locked: a read
 * cannot change anything, and a commit under the same fence is fenced
 * again. $1 stream_ids, $2 partitions, $3 after, $4 limits, $5 max bytes,
 * $6 group_ids, $7 member ids, $8 generations.
 */
export function readOwnedSql(s: string): string {
  return `
WITH r AS (
  SELECT * FROM unnest($1::int[], $2::int[], $3::int8[], $4::int[], $5::int8[], $6::int[], $7::text[], $8::int8[])
    WITH ORDINALITY AS r(stream_id, partition, after, lim, max_bytes, group_id, member_id, generation, i)
)
SELECT r.i, f.fenced, e.*
FROM r
CROSS JOIN LATERAL (SELECT EXISTS (
        SELECT 1 FROM ${s}.partition_owners po
        WHERE po.group_id = r.group_id AND po.partition = r.partition AND po.owner = r.member_id AND po.generation = r.generation
      ) AS fenced) f
LEFT JOIN LATERAL (
  SELECT ${eventColumns('e')}
  FROM (
    SELECT e.*, sum(${eventSize('e')}) OVER w AS running_bytes, row_number() OVER w AS k
    FROM (
      SELECT * FROM ${s}.events e
      WHERE e.stream_id = r.stream_id AND e.partition = r.partition AND e.sequence > r.after
        -- Implied by the line above, but a restriction on $1 itself: planned
        -- per call (the replanned routine), it leaves only these streams'
        -- segments in the plan, which the lateral join's condition cannot.
        AND e.stream_id = ANY ($1::int[])
      ORDER BY e.sequence
      LIMIT r.lim
    ) e
    WINDOW w AS (ORDER BY e.sequence ROWS UNBOUNDED PRECEDING)
  ) e
  WHERE e.running_bytes <= r.max_bytes OR e.k = 1
) e ON f.fenced
ORDER BY r.i, e.sequence`;
}

/**
 * Offset commits in one statement, one small write per partition: fenced by
 * the owner row (taken in share mode, so an ownership change waits for the
 * commit or the commit re-checks against the new owner), refused past the
 * partition's high watermark; then dead letters in (frontier, upTo], the
 * cursor moved up to upTo (GREATEST: never back), and open deliveries and
 * replay holds at or below it dropped. Returns every op with its status.
 * An op marked `once` (a commit in a handler's transaction) whose frontier
 * is already at or past upTo changes nothing and is `done`: an earlier run
 * whose COMMIT answer was lost did commit (the caller locked the cursor
 * first, lockCommitCursorsSql, so that run has ended and this statement's
 * snapshot sees what it wrote).
 * $1 group_ids, $2 stream_ids, $3 partitions, $4 member ids, $5 generations,
 * $6 upTo, $7 dead-letter op indexes (1-based), $8 sequences, $9 attempts,
 * $10 reasons, $11 now or null, $12 once flags.
 */
export function commitSql(s: string): string {
  return `
WITH o AS (
  SELECT * FROM unnest($1::int[], $2::int[], $3::int[], $4::text[], $5::int8[], $6::int8[], $12::boolean[])
    WITH ORDINALITY AS o(group_id, stream_id, partition, member_id, generation, up_to, once, i)
),
fenced AS (
  SELECT o.* FROM o
  JOIN ${s}.partition_owners po
    ON po.group_id = o.group_id AND po.partition = o.partition AND po.owner = o.member_id AND po.generation = o.generation
  FOR SHARE OF po
),
placed AS (
  SELECT f.*, LEAST(c.cursor, (SELECT min(d.sequence) - 1 FROM ${s}.deliveries d
                               WHERE d.group_id = f.group_id AND d.partition = f.partition)) AS frontier
  FROM fenced f
  JOIN ${s}.stream_partitions sp ON sp.stream_id = f.stream_id AND sp.partition = f.partition
  JOIN ${s}.group_cursors c ON c.group_id = f.group_id AND c.partition = f.partition
  WHERE f.up_to <= sp.high_watermark
),
good AS (
  SELECT p.* FROM placed p WHERE NOT p.once OR p.frontier < p.up_to
),
moved AS (
  UPDATE ${s}.group_cursors c SET cursor = g.up_to
  FROM good g
  WHERE c.group_id = g.group_id AND c.partition = g.partition AND c.cursor < g.up_to
),
dead AS (
  INSERT INTO ${s}.dead_letters (group_id, partition, sequence, attempt, reason, dead_lettered_at)
  SELECT g.group_id, g.partition, x.sequence, x.attempt, x.reason, ${nowSql('$11')}
  FROM unnest($7::int8[], $8::int8[], $9::int4[], $10::text[]) AS x(i, sequence, attempt, reason)
  JOIN good g ON g.i = x.i
  WHERE x.sequence > g.frontier AND x.sequence <= g.up_to
  ON CONFLICT (group_id, partition, sequence) DO NOTHING
),
closed AS (
  DELETE FROM ${s}.deliveries d USING good g
  WHERE d.group_id = g.group_id AND d.partition = g.partition AND d.sequence <= g.up_to AND g.up_to > g.frontier
),
unheld AS (
  DELETE FROM ${s}.replay_holds h USING good g
  WHERE h.group_id = g.group_id AND h.partition = g.partition AND h.sequence <= g.up_to AND g.up_to > g.frontier
)
SELECT o.i, CASE WHEN g.i IS NOT NULL THEN 'ok' WHEN p.i IS NOT NULL THEN 'done' WHEN f.i IS NOT NULL THEN 'beyond' ELSE 'stale' END AS status,
       sp.high_watermark
FROM o
LEFT JOIN fenced f ON f.i = o.i
LEFT JOIN placed p ON p.i = o.i
LEFT JOIN good g ON g.i = o.i
LEFT JOIN ${s}.stream_partitions sp ON sp.stream_id = o.stream_id AND sp.partition = o.partition
ORDER BY o.i`;
}

/**
 * Before a `once` commit in a transaction (sql above): takes the owner rows
 * in share mode, then the cursor rows for update, in the lock order of this
 * file, and sets the transaction's idle limit (transaction.ts). An earlier
 * run of the same handler whose COMMIT answer was lost may still be open on
 * the server, holding the cursor row it moved: waiting for it here, in a
 * statement of its own, lets the commit statement's snapshot see whether it
 * committed. Without the wait the commit would read the old frontier, then
 * find the cursor moved under its update and still answer ok.
 * $1 idle limit (ms, text), $2 group_ids, $3 partitions.
 */
export function lockCommitCursorsSql(s: string): string {
  return `
WITH k AS (
  SELECT DISTINCT * FROM unnest($2::int[], $3::int[]) AS k(group_id, partition)
),
owners AS (
  SELECT po.group_id, po.partition FROM ${s}.partition_owners po
  JOIN k ON k.group_id = po.group_id AND k.partition = po.partition
  ORDER BY po.group_id, po.partition
  FOR SHARE OF po
)
SELECT set_config('idle_in_transaction_session_timeout', $1, true) AS idle,
  (SELECT count(*) FROM (
     SELECT 1 FROM ${s}.group_cursors c
     JOIN owners o ON o.group_id = c.group_id AND o.partition = c.partition
     ORDER BY c.group_id, c.partition
     FOR UPDATE OF c
   ) l) AS locked`;
}

/** Live members and every partition's owner. $1 group_id, $2 now or null. */
export function membersSql(s: string): string {
  return `
SELECT
  (SELECT generation FROM ${s}.group_ownership WHERE group_id = $1) AS generation,
  (SELECT COALESCE(json_agg(json_build_array(member_id, ${ms('expires_at')}) ORDER BY member_id COLLATE "C"), '[]'::json)
   FROM ${s}.group_members WHERE group_id = $1 AND expires_at > ${nowSql('$2')}) AS members,
  (SELECT COALESCE(json_agg(json_build_array(partition, owner, target) ORDER BY partition), '[]'::json)
   FROM ${s}.partition_owners WHERE group_id = $1) AS slots`;
}

/**
 * A replay, reset or redrive of these partitions fences their owners, under
 * the group lock (see above). $1 group_id, $2 partitions or null (all).
 */
export function bumpGenerationsSql(s: string): string {
  return `
WITH locked AS (
  SELECT group_id FROM ${s}.group_ownership WHERE group_id = $1 FOR UPDATE
)
UPDATE ${s}.partition_owners SET generation = generation + 1
WHERE group_id IN (SELECT group_id FROM locked) AND owner IS NOT NULL AND ($2::int[] IS NULL OR partition = ANY ($2::int[]))`;
}
