import type { LagReport, PartitionLag } from '../core/types.js';

/** Partitions of a lag report in numeric order. */
export function partitionsOf(report: LagReport): Array<[number, PartitionLag]> {
  return Object.entries(report.partitions)
    .map(([p, lag]): [number, PartitionLag] => [Number(p), lag])
    .sort((a, b) => a[0] - b[0]);
}

/** The oldest unsettled event's timestamp over all partitions: the group's lag as age. */
export function oldestUnsettled(report: LagReport): Date | null {
  let oldest: Date | null = null;
  for (const [, lag] of partitionsOf(report)) {
    if (lag.oldestUnsettledAt && (oldest === null || lag.oldestUnsettledAt < oldest)) oldest = lag.oldestUnsettledAt;
  }
  return oldest;
}
