import type { GroupStart } from '../../core/backend.js';
import { invalidPartition } from '../../core/errors.js';
import type { MembershipState } from '../../core/membership.js';
import type { LagReport, PartitionLag } from '../../core/types.js';
import type { DeadLetterList } from './dead-letter-list.js';
import { GroupPartition } from './group-partition.js';
import type { StreamLog } from './stream-log.js';

/** One consumer group's state over one stream, in the memory backend. */
export interface GroupState {
  readonly name: string;
  readonly maxAttempts: number;
  parts: GroupPartition[];
  readonly deadLetters: DeadLetterList;
  /** Partition that the next fetch starts its round-robin at. */
  rotation: number;
  /** Partition ownership (members, owners, generations); `null` until the first heartbeat. */
  membership: MembershipState | null;
}

/** Frontier, high watermark, lag and oldest unsettled timestamp per partition (docs/semantics.md). */
export function groupLag(log: StreamLog, g: GroupState): LagReport {
  const partitions: Record<number, PartitionLag> = {};
  let total = 0;
  g.parts.forEach((part, p) => {
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
  });
  return { stream: log.name, group: g.name, lag: total, partitions };
}

/** The group's per-partition state at its start position: after a sequence (per partition or all), or at a time. */
export function startPartitions(log: StreamLog, start: GroupStart): GroupPartition[] {
  if (start.kind === 'after') {
    for (const key of Object.keys(start.perPartition)) {
      if (Number(key) >= log.partitions) throw invalidPartition(log.name, key, log.partitions);
    }
  }
  // A start below the low watermark starts at it (docs/semantics.md, "Retention").
  return Array.from({ length: log.partitions }, (_, p) => {
    const floor = log.lowWatermark(p) - 1;
    if (start.kind === 'after') return new GroupPartition(Math.max(floor, start.perPartition[p] ?? start.after));
    const first = log.firstSequenceAt(p, start.at.getTime());
    return new GroupPartition(first === null ? log.highWatermark(p) : Math.max(floor, first - 1));
  });
}

/** The partitions a call covers: all of them, or the requested ones (each must exist). */
export function partitionList(log: StreamLog, only: number[] | null): number[] {
  if (only === null) return [...Array(log.partitions).keys()];
  for (const p of only) if (p >= log.partitions) throw invalidPartition(log.name, p, log.partitions);
  return only;
}
