import { RheoError } from './errors.js';

/**
 * The partitions a call on a group covers: the group's own (`covered`), or
 * the `requested` ones, each of which the group must cover. Backends check
 * the stream's range first (`invalid_partition` as out of range), then this.
 */
export function scopedPartitions(
  stream: string,
  group: string,
  covered: readonly number[],
  requested: readonly number[] | null,
): number[] {
  if (requested === null) return [...covered];
  const own = new Set(covered);
  for (const p of requested) {
    if (!own.has(p)) {
      throw new RheoError(
        'invalid_partition',
        `partition ${p} is not covered by group "${group}" of stream "${stream}" (its partitions: ${covered.join(', ')})`,
        { stream, group },
      );
    }
  }
  return [...requested];
}

/** A start map (`startAfter: { [partition]: sequence }`) may only name partitions in `scope`. */
export function checkStartScope(
  stream: string,
  group: string,
  perPartition: Record<number, number>,
  scope: readonly number[],
): void {
  scopedPartitions(stream, group, scope, Object.keys(perPartition).map(Number));
}
