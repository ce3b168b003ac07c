import { ms } from '../connection.js';
import { nowSql } from '../rows.js';

/**
 * Settle many leases (ack, nack, reject, release; any mix, any groups) in ONE
 * statement with array parameters: ackMany of 500 leases is one round trip.
 *
 * Every change is fenced on the delivery's primary key (deliveries PK probe)
 * plus `lease_id = $lease`. The qual sits on the DELETE/UPDATE itself, so if a
 * concurrent fetch reclaimed the row after this statement's snapshot,
 * PostgreSQL re-checks it against the new row version (READ COMMITTED) and the
 * stale lease changes nothing. Ops arrive deduplicated per delivery (the
 * caller reports later duplicates as stale), so no row is touched twice.
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
  SELECT *
  FROM unnest($1::int[], $2::int[], $3::int8[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::int[])
       WITH ORDINALITY AS o(group_id, partition, sequence, lease_id, kind, reason, delay_ms, max_attempts, i)
),
removed AS (
  DELETE FROM ${s}.deliveries d
  USING op
  WHERE d.group_id = op.group_id AND d.partition = op.partition AND d.sequence = op.sequence
    AND d.lease_id = op.lease_id
    AND (op.kind IN ('ack', 'reject') OR (op.kind = 'nack' AND d.attempt >= op.max_attempts))
  RETURNING op.i, op.kind, op.reason, d.group_id, d.partition, d.sequence, d.attempt
),
dead AS (
  INSERT INTO ${s}.dead_letters (group_id, partition, sequence, attempt, reason, dead_lettered_at)
  SELECT r.group_id, r.partition, r.sequence, r.attempt,
         r.reason, (SELECT now FROM clock)
  FROM removed r
  WHERE r.kind <> 'ack'
  ORDER BY r.i
),
reopened AS (
  UPDATE ${s}.deliveries d
  SET lease_id = NULL,
      consumer_id = NULL,
      leased_at = NULL,
      attempt = CASE WHEN op.kind = 'release' THEN d.attempt - 1 ELSE d.attempt END,
      visible_at = CASE WHEN op.kind = 'release' THEN (SELECT now FROM clock)
                        ELSE (SELECT now FROM clock) + op.delay_ms * interval '1 millisecond' END
  FROM op
  WHERE d.group_id = op.group_id AND d.partition = op.partition AND d.sequence = op.sequence
    AND d.lease_id = op.lease_id
    AND (op.kind = 'release' OR (op.kind = 'nack' AND d.attempt < op.max_attempts))
  RETURNING op.i
)
SELECT i FROM removed
UNION ALL
SELECT i FROM reopened`;
}

/**
 * Renew many leases in one statement, fenced like settle (deliveries PK probe
 * plus lease_id). An expired lease nobody reclaimed still renews.
 *
 * $1 group ids, $2 partitions, $3 sequences, $4 lease ids, $5 lease ms,
 * $6 now or null. Returns the ordinal of each renewed ref and its new expiry.
 */
export function renewSql(s: string): string {
  return `
WITH clock AS MATERIALIZED (
  SELECT ${nowSql('$6')} AS now
),
op AS MATERIALIZED (
  SELECT *
  FROM unnest($1::int[], $2::int[], $3::int8[], $4::text[]) WITH ORDINALITY AS o(group_id, partition, sequence, lease_id, i)
)
UPDATE ${s}.deliveries d
SET visible_at = (SELECT now FROM clock) + $5::float8 * interval '1 millisecond'
FROM op
WHERE d.group_id = op.group_id AND d.partition = op.partition AND d.sequence = op.sequence
  AND d.lease_id = op.lease_id
RETURNING op.i, ${ms('d.visible_at')} AS expires_at_ms`;
}
