import type { GroupStart } from '../../core/backend.js';
import { invalidPartition } from '../../core/errors.js';
import { checkStartScope, scopedPartitions } from '../../core/partition-scope.js';

/* Which partitions a call on the Redis backend covers, checked against the stream and the group. */

/** What these checks read of a stream's catalog entry (store.ts StreamMeta). */
interface StreamShape {
  partitions: number;
}

/** What they read of a group's (store.ts GroupMeta): its partitions, absent for all of the stream's. */
interface GroupShape {
  partitions?: number[];
}

export function range(n: number): number[] {
  return [...Array(n).keys()];
}

export function partitionList(stream: string, partitions: number, only: number[] | null): number[] {
  if (only === null) return range(partitions);
  for (const p of only) if (p >= partitions) throw invalidPartition(stream, p, partitions);
  return only;
}

/** The partitions group `g` covers: its own, or all of the stream's. */
export function coveredOf(meta: StreamShape, g: GroupShape): number[] {
  return g.partitions ? [...g.partitions] : range(meta.partitions);
}

/** The partitions a call on a group covers: the group's, or `only` (each in the stream, else out of range, and in the group). */
export function scopeOf(stream: string, group: string, meta: StreamShape, g: GroupShape, only: number[] | null): number[] {
  if (only !== null) partitionList(stream, meta.partitions, only);
  return scopedPartitions(stream, group, coveredOf(meta, g), only);
}

/** A start map may only name partitions of the stream, and of `scope`. */
export function checkStart(stream: string, group: string, meta: StreamShape, start: GroupStart, scope: readonly number[]): void {
  if (start.kind !== 'after') return;
  for (const key of Object.keys(start.perPartition)) {
    if (Number(key) >= meta.partitions) throw invalidPartition(stream, key, meta.partitions);
  }
  checkStartScope(stream, group, start.perPartition, scope);
}

export function startArgs(start: GroupStart, partition: number): (string | number)[] {
  if (start.kind === 'at') return ['at', start.at.getTime()];
  return ['after', start.perPartition[partition] ?? start.after];
}
