import type { GroupStart } from '../../core/backend.js';
import { invalidPartition } from '../../core/errors.js';
import type { MembershipState } from '../../core/membership.js';
import { checkStartScope, scopedPartitions } from '../../core/partition-scope.js';
import type { LagReport, PartitionLag } from '../../core/types.js';
import type { DeadLetterList } from './dead-letter-list.js';
import { GroupPartition } from './group-partition.js';
import type { StreamLog } from './stream-log.js';

/** One consumer group's state over one stream, in the memory backend. */
export interface GroupState {
  readonly name: string;
  readonly maxAttempts: number;
  /** The partitions the group covers, ascending; it never changes. */
  readonly partitions: readonly number[];
  /** Indexed by partition; only the covered partitions have an entry (the array is sparse). */
  parts: GroupPartition[];
  readonly deadLetters: DeadLetterList;
  /** Partition that the next fetch starts its round-robin at. */
  rotation: number;
  /** Partition ownership (members, owners, generations); `null` until the first heartbeat. */
  membership: MembershipState | null;
}

/** Frontier, high watermark, lag and oldest unsettled timestamp per partition (docs/semantics.md). */
export function groupLag(log: StreamLog, g: GroupState, only: readonly number[] = g.partitions): LagReport {
  const partitions: Record<number, PartitionLag> = {};
  let total = 0;
  for (const p of only) {
    const part = g.parts[p]!;
    const frontier = part.frontier();
    const highWatermark = log.highWatermark(p);
    const lag = Math.max(0, highWatermark - frontier);
    total += lag;
    partitions[p] = {
      lowWatermark: log.lowWatermark(p),
      frontier,
      highWatermark,
      lag,
      oldestUnsettledAt: lag > 0 ? new Date(log.event(p, frontier + 1)!.timestamp) : null,
    };
  }
  return { stream: log.name, group: g.name, lag: total, partitions };
}

/**
 * The state of partitions `scope` at the start position (after a sequence,
 * per partition or all, or at a time), in a sparse array indexed by
 * partition. A start map may only name partitions of `scope`.
 */
export function startPartitions(log: StreamLog, group: string, start: GroupStart, scope: readonly number[]): GroupPartition[] {
  if (start.kind === 'after') {
    for (const key of Object.keys(start.perPartition)) {
      if (Number(key) >= log.partitions) throw invalidPartition(log.name, key, log.partitions);
    }
    checkStartScope(log.name, group, start.perPartition, scope);
  }
  // A start below the low watermark starts at it (docs/semantics.md, "Retention").
  const parts: GroupPartition[] = [];
  for (const p of scope) {
    const floor = log.lowWatermark(p) - 1;
    if (start.kind === 'after') {
      parts[p] = new GroupPartition(Math.max(floor, start.perPartition[p] ?? start.after));
    } else {
      const first = log.firstSequenceAt(p, start.at.getTime());
      parts[p] = new GroupPartition(first === null ? log.highWatermark(p) : Math.max(floor, first - 1));
    }
  }
  return parts;
}

/** Every requested partition exists in the stream (`invalid_partition` otherwise); `null` stands for all of them. */
export function partitionList(log: StreamLog, only: readonly number[] | null): number[] {
  if (only === null) return [...Array(log.partitions).keys()];
  for (const p of only) if (p >= log.partitions) throw invalidPartition(log.name, p, log.partitions);
  return [...only];
}

/** The partitions a call on `g` covers: the group's, or the requested ones (each in the stream and in the group). */
export function groupScope(log: StreamLog, g: GroupState, only: readonly number[] | null): number[] {
  if (only !== null) partitionList(log, only);
  return scopedPartitions(log.name, g.name, g.partitions, only);
}
