import { ms } from '../connection.js';
import { nowSql } from '../rows.js';
import { memberBit, stillInRange } from './ranges.js';

/**
 * Settle many leases (ack, nack, reject, release; any mix, any groups) in ONE
 * statement with array parameters: ackMany of 500 leases is one round trip.
 *
 * A lease is either a member of a lease range (migration 002; its id is
 * `token.sequence`) or a deliveries row. Range members:
 * - the range is found by token and locked FOR UPDATE, which also re-reads
 *   it at its latest version, so concurrent settles of one range apply in
 *   turn; the member must still be in it (its bit clear), else stale.
 * - the member leaves the range (its bit is set; the settle that sets the
 *   last bit deletes the range). An ack needs nothing more. A reject, or a
 *   nack at attempt 1 >= max_attempts, becomes a dead letter; a nack below
 *   max or a release becomes a pending deliveries row, as below.
 * Rows are fenced on the delivery's primary key (deliveries PK probe) plus
 * `lease_id = $lease`. The qual sits on the DELETE/UPDATE itself, so if a
 * concurrent fetch reclaimed the row after this statement's snapshot,
 * PostgreSQL re-checks it against the new row version (READ COMMITTED) and
 * the stale lease changes nothing. Ops arrive deduplicated per (delivery,
 * lease id) (the caller reports later duplicates as stale); ops on one
 * delivery under different ids may both arrive, but a delivery is held under
 * one id at a time (in one range with its bit clear, or in one row), so at
 * most one of them matches and nothing is touched twice.
 *
 * - ack: delete the row (acked state needs no storage).
 * - reject, or nack at attempt >= max_attempts: delete and insert a dead letter.
 * - nack below max: pending again at now + delay, lease cleared.
 * - release: pending now, attempt given back.
 *
 * $1 group ids, $2 partitions, $3 sequences, $4 lease ids, $5 kinds,
 * $6 reasons, $7 delays (ms), $8 max attempts, $9 now or null.
 * Returns the ordinals (1-based) of the ops that applied.
 */
export function settleSql(s: string): string {
  return `
WITH clock AS MATERIALIZED (
  SELECT ${nowSql('$9')} AS now
),
op AS MATERIALIZED (
  SELECT o.*, ${rangeColumns('o')}
  FROM unnest($1::int[], $2::int[], $3::int8[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::int[])
       WITH ORDINALITY AS o(group_id, partition, sequence, lease_id, kind, reason, delay_ms, max_attempts, i)
),
${rangeCtes(s)},
${leaveRangeCtes(s)},
pending AS (
  INSERT INTO ${s}.deliveries (group_id, partition, sequence, attempt, visible_at)
  SELECT rop.group_id, rop.partition, rop.sequence,
         CASE WHEN rop.kind = 'release' THEN 0 ELSE 1 END,
         CASE WHEN rop.kind = 'release' THEN (SELECT now FROM clock)
              ELSE (SELECT now FROM clock) + rop.delay_ms * interval '1 millisecond' END
  FROM rop
  WHERE rop.kind = 'release' OR (rop.kind = 'nack' AND 1 < rop.max_attempts)
),
rowop AS MATERIALIZED (
  SELECT * FROM op WHERE op.i NOT IN (SELECT i FROM rop)
),
removed AS (
  DELETE FROM ${s}.deliveries d
  USING rowop op
  WHERE d.group_id = op.group_id AND d.partition = op.partition AND d.sequence = op.sequence
    AND d.lease_id = op.lease_id
    AND (op.kind IN ('ack', 'reject') OR (op.kind = 'nack' AND d.attempt >= op.max_attempts))
  RETURNING op.i, op.kind, op.reason, d.group_id, d.partition, d.sequence, d.attempt
),
dead AS (
  INSERT INTO ${s}.dead_letters (group_id, partition, sequence, attempt, reason, dead_lettered_at)
  SELECT x.group_id, x.partition, x.sequence, x.attempt, x.reason, (SELECT now FROM clock)
  FROM (
    SELECT i, group_id, partition, sequence, attempt, reason FROM removed WHERE kind <> 'ack'
    UNION ALL
    SELECT i, group_id, partition, sequence, 1, reason FROM rop
    WHERE rop.kind = 'reject' OR (rop.kind = 'nack' AND 1 >= rop.max_attempts)
  ) x
  ORDER BY x.i
),
reopened AS (
  UPDATE ${s}.deliveries d
  SET lease_id = NULL,
      consumer_id = NULL,
      leased_at = NULL,
      attempt = CASE WHEN op.kind = 'release' THEN d.attempt - 1 ELSE d.attempt END,
      visible_at = CASE WHEN op.kind = 'release' THEN (SELECT now FROM clock)
                        ELSE (SELECT now FROM clock) + op.delay_ms * interval '1 millisecond' END
  FROM rowop op
  WHERE d.group_id = op.group_id AND d.partition = op.partition AND d.sequence = op.sequence
    AND d.lease_id = op.lease_id
    AND (op.kind = 'release' OR (op.kind = 'nack' AND d.attempt < op.max_attempts))
  RETURNING op.i
)
SELECT i FROM rop
UNION ALL
SELECT i FROM removed
UNION ALL
SELECT i FROM reopened`;
}

/**
 * ackMany's statement: settleSql with every op an ack, so it sends four
 * arrays instead of eight and skips the paths only other kinds take.
 * $1 group ids, $2 partitions, $3 sequences, $4 lease ids. Returns the
 * ordinals (1-based) of the acks that did NOT apply: nearly always none, so
 * the client parses no row per ack.
 */
export function ackSql(s: string): string {
  return `
WITH op AS MATERIALIZED (
  SELECT o.*, ${rangeColumns('o')}
  FROM unnest($1::int[], $2::int[], $3::int8[], $4::text[]) WITH ORDINALITY AS o(group_id, partition, sequence, lease_id, i)
),
${rangeCtes(s)},
${leaveRangeCtes(s)},
removed AS (
  DELETE FROM ${s}.deliveries d
  USING op
  WHERE op.i NOT IN (SELECT i FROM rop)
    AND d.group_id = op.group_id AND d.partition = op.partition AND d.sequence = op.sequence
    AND d.lease_id = op.lease_id
  RETURNING op.i
)
SELECT op.i FROM op
WHERE op.i NOT IN (SELECT i FROM rop UNION ALL SELECT i FROM removed)`;
}

/** The members in `rop` leave their ranges: bits set, and a range left empty is deleted. */
function leaveRangeCtes(s: string): string {
  return `merged AS MATERIALIZED (
  SELECT rng.group_id, rng.partition, rng.first_seq, rng.settled | bit_or(rop.bit) AS settled
  FROM rop
  JOIN rng ON rng.group_id = rop.group_id AND rng.partition = rop.partition AND rng.first_seq = rop.first_seq
  GROUP BY rng.group_id, rng.partition, rng.first_seq, rng.settled
),
emptied AS (
  DELETE FROM ${s}.lease_ranges r
  USING merged m
  WHERE r.group_id = m.group_id AND r.partition = m.partition AND r.first_seq = m.first_seq
    AND bit_count(m.settled) = length(m.settled)
),
shrunk AS (
  UPDATE ${s}.lease_ranges r
  SET settled = m.settled
  FROM merged m
  WHERE r.group_id = m.group_id AND r.partition = m.partition AND r.first_seq = m.first_seq
    AND bit_count(m.settled) < length(m.settled)
)`;
}

/** `token` and `ranged` (a range-form lease id naming its own sequence) of op rows aliased `o`. */
function rangeColumns(o: string): string {
  return `split_part(${o}.lease_id, '.', 1) AS token, split_part(${o}.lease_id, '.', 2) = ${o}.sequence::text AS ranged`;
}

/**
 * `rng`: the lease ranges named by range-form ops, locked; `rop`: the ops
 * whose member is still in its range, with the member's bit as a mask.
 */
function rangeCtes(s: string): string {
  return `rng AS MATERIALIZED (
  SELECT r.group_id, r.partition, r.first_seq, r.last_seq, r.token, r.consumer_id, r.leased_at, r.settled
  FROM ${s}.lease_ranges r
  WHERE r.token = ANY (ARRAY(SELECT DISTINCT token FROM op WHERE ranged))
  FOR UPDATE
),
rop AS MATERIALIZED (
  SELECT op.*, rng.first_seq, rng.consumer_id, rng.leased_at,
         ${memberBit('rng.settled', 'rng.first_seq', 'op.sequence')} AS bit
  FROM op
  JOIN rng ON rng.token = op.token AND rng.group_id = op.group_id AND rng.partition = op.partition
  WHERE op.ranged AND op.sequence BETWEEN rng.first_seq AND rng.last_seq
    AND ${stillInRange('rng.settled', 'rng.first_seq', 'op.sequence')}
)`;
}

/**
 * Renew many leases in one statement. Rows are fenced like settle (deliveries
 * PK probe plus lease_id). A range whose every remaining member is renewed
 * gets the new expiry as a whole; otherwise the renewed members leave it as
 * deliveries rows under their own lease ids, so the others keep their expiry.
 * An expired lease nobody reclaimed still renews.
 *
 * $1 group ids, $2 partitions, $3 sequences, $4 lease ids, $5 lease ms,
 * $6 now or null. Returns the ordinal of each renewed ref and its new expiry.
 */
export function renewSql(s: string): string {
  const expiry = `(SELECT now FROM clock) + $5::float8 * interval '1 millisecond'`;
  return `
WITH clock AS MATERIALIZED (
  SELECT ${nowSql('$6')} AS now
),
op AS MATERIALIZED (
  SELECT o.*, ${rangeColumns('o')}
  FROM unnest($1::int[], $2::int[], $3::int8[], $4::text[]) WITH ORDINALITY AS o(group_id, partition, sequence, lease_id, i)
),
${rangeCtes(s)},
cover AS MATERIALIZED (
  SELECT rng.group_id, rng.partition, rng.first_seq,
         count(*) = length(rng.settled) - bit_count(rng.settled) AS whole,
         rng.settled | bit_or(rop.bit) AS settled
  FROM rop
  JOIN rng ON rng.group_id = rop.group_id AND rng.partition = rop.partition AND rng.first_seq = rop.first_seq
  GROUP BY rng.group_id, rng.partition, rng.first_seq, rng.settled
),
extended AS (
  UPDATE ${s}.lease_ranges r
  SET visible_at = ${expiry}
  FROM cover c
  WHERE c.whole AND r.group_id = c.group_id AND r.partition = c.partition AND r.first_seq = c.first_seq
),
shrunk AS (
  UPDATE ${s}.lease_ranges r
  SET settled = c.settled
  FROM cover c
  WHERE NOT c.whole AND r.group_id = c.group_id AND r.partition = c.partition AND r.first_seq = c.first_seq
),
moved AS (
  INSERT INTO ${s}.deliveries (group_id, partition, sequence, attempt, lease_id, consumer_id, leased_at, visible_at)
  SELECT rop.group_id, rop.partition, rop.sequence, 1, rop.lease_id, rop.consumer_id, rop.leased_at, ${expiry}
  FROM rop
  JOIN cover c ON c.group_id = rop.group_id AND c.partition = rop.partition AND c.first_seq = rop.first_seq
  WHERE NOT c.whole
),
renewed AS (
  UPDATE ${s}.deliveries d
  SET visible_at = ${expiry}
  FROM op
  WHERE op.i NOT IN (SELECT i FROM rop)
    AND d.group_id = op.group_id AND d.partition = op.partition AND d.sequence = op.sequence
    AND d.lease_id = op.lease_id
  RETURNING op.i, ${ms('d.visible_at')} AS expires_at_ms
)
SELECT i, ${ms(expiry)} AS expires_at_ms FROM rop
UNION ALL
SELECT i, expires_at_ms FROM renewed`;
}
