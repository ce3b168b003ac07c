/**
 * The bit encoding of a lease range (migration 002), in one place: bit i of
 * `settled` is set once sequence `first_seq + i` has left the range.
 * Arguments are SQL expressions for the range's `settled` and `first_seq` and
 * for the member's sequence.
 */

/** True while the member is still in its range. */
export function stillInRange(settled: string, firstSeq: string, sequence: string): string {
  return `get_bit(${settled}, (${sequence} - ${firstSeq})::int) = 0`;
}

/** A bit string of the range's length with only the member's bit set, to OR into `settled`. */
export function memberBit(settled: string, firstSeq: string, sequence: string): string {
  return `set_bit(${settled} # ${settled}, (${sequence} - ${firstSeq})::int, 1)`;
}

/**
 * Explode every lease range of a group in the given partitions into
 * ordinary deliveries rows: each member still in a range becomes a row under
 * its own range-form lease id, with the range's attempt (1), consumer and
 * expiry, so nothing a holder can observe changes. Replay runs it first: it
 * moves cursors back below ranges and reopens sequences inside them, and
 * both work on rows. $1 group_id, $2 partitions.
 */
export function explodeGroupSql(s: string): string {
  return `
WITH x AS (
  DELETE FROM ${s}.lease_ranges r
  WHERE r.group_id = $1 AND r.partition = ANY ($2::int[])
  RETURNING r.group_id, r.partition, r.first_seq, r.last_seq, r.token, r.consumer_id, r.leased_at, r.visible_at, r.settled
)
INSERT INTO ${s}.deliveries (group_id, partition, sequence, attempt, lease_id, consumer_id, leased_at, visible_at)
SELECT x.group_id, x.partition, m.sequence, 1, x.token || '.' || m.sequence, x.consumer_id, x.leased_at, x.visible_at
FROM x CROSS JOIN LATERAL generate_series(x.first_seq, x.last_seq) AS m(sequence)
WHERE ${stillInRange('x.settled', 'x.first_seq', 'm.sequence')}`;
}
