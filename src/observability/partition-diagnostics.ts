import { log, type Logger } from '../core/logger.js';
import type { MemberJoinEvent, RebalanceEvent } from './lease-events.js';
import type { RheoTelemetry } from './telemetry.js';

/** What is observed of a partition-mode consumer: its events and its current share. */
export interface ObservedPartitionConsumer {
  readonly stream: string;
  readonly group: string;
  stats(): { owned: readonly number[] };
  on(event: 'member-join' | 'member-leave', listener: (event: MemberJoinEvent) => void): unknown;
  on(event: 'rebalance', listener: (event: RebalanceEvent) => void): unknown;
  off(event: 'member-join' | 'member-leave', listener: (event: MemberJoinEvent) => void): unknown;
  off(event: 'rebalance', listener: (event: RebalanceEvent) => void): unknown;
}

/**
 * Sends a partition consumer's joins, leaves and rebalances to the logger
 * (info; warn when partitions were lost without a release) and to the
 * telemetry (`rheo.consumer.rebalances`, `rheo.consumer.partitions.owned`).
 * Returns the function that stops observing it.
 */
export function observePartitionConsumer(consumer: ObservedPartitionConsumer, logger: Logger, telemetry: RheoTelemetry | null): () => void {
  const joined = (e: MemberJoinEvent): void =>
    log(logger, 'info', { stream: e.stream, group: e.group, memberId: e.memberId }, `rheo member ${e.memberId} joined group "${e.group}" of stream "${e.stream}"`);
  const left = (e: MemberJoinEvent): void =>
    log(logger, 'info', { stream: e.stream, group: e.group, memberId: e.memberId }, `rheo member ${e.memberId} left group "${e.group}" of stream "${e.stream}"`);
  const rebalanced = (e: RebalanceEvent): void => {
    telemetry?.rebalanced(e.stream, e.group);
    const fields = {
      stream: e.stream,
      group: e.group,
      memberId: e.memberId,
      groupGeneration: e.groupGeneration,
      assigned: e.assigned.map((a) => a.partition),
      revoked: [...e.revoked],
      lost: [...e.lost],
      owned: [...e.owned],
    };
    const change = [
      e.assigned.length > 0 ? `assigned ${fields.assigned.join(', ')}` : '',
      e.revoked.length > 0 ? `revoked ${e.revoked.join(', ')}` : '',
      e.lost.length > 0 ? `lost ${e.lost.join(', ')}` : '',
    ].filter((part) => part !== '');
    log(logger, e.lost.length > 0 ? 'warn' : 'info', fields,
      `rheo member ${e.memberId} of group "${e.group}" on stream "${e.stream}" rebalanced (generation ${e.groupGeneration}): ${change.join('; ')}`);
  };
  consumer.on('member-join', joined);
  consumer.on('member-leave', left);
  consumer.on('rebalance', rebalanced);
  const untrack = telemetry?.trackOwner({
    stream: consumer.stream,
    group: consumer.group,
    get ownedCount() {
      return consumer.stats().owned.length;
    },
  });
  return () => {
    consumer.off('member-join', joined);
    consumer.off('member-leave', left);
    consumer.off('rebalance', rebalanced);
    untrack?.();
  };
}
