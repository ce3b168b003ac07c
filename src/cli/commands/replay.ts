import type { Command } from 'commander';
import { collect, withRheo, type CommandContext } from '../command-context.js';
import { formatTable } from '../table.js';
import { collectPartition, parseCount, parseTime } from '../parse.js';
import { partitionsOf } from '../lag-figures.js';
import { RheoError, invalidArgument } from '../../core/errors.js';
import type { LagReport, ReplaySpec } from '../../core/types.js';

interface ReplayFlags {
  fromSequence?: number;
  from?: Date;
  eventId?: string[];
  partition?: number[];
  dryRun?: boolean;
}

interface PartitionChange {
  partition: number;
  highWatermark: number;
  frontierBefore: number;
  frontierAfter: number;
  lagBefore: number;
  lagAfter: number;
}

export function registerReplay(program: Command): void {
  program
    .command('replay')
    .argument('<stream>')
    .argument('<group>')
    .description('offer settled events to the group again; the log is unchanged (needs the runtime role; --dry-run only SELECT)')
    .option('--from-sequence <n>', 'replay every sequence >= n of each partition', parseCount)
    .option('--from <time>', 'replay from the first event at or after this time, per partition (ISO 8601 or epoch ms)', parseTime)
    .option('--event-id <id>', 'replay exactly this event (repeatable)', collect)
    .option('--partition <p>', 'only this partition (repeatable; default all)', collectPartition)
    .option('--dry-run', 'print the lag the replay would create per partition, change nothing')
    .addHelpText(
      'after',
      `
Give exactly one of --from-sequence, --from, --event-id. --dry-run works with
all three: --from assumes timestamps rise with the sequence within a partition
(true unless producers set timestamps themselves); --event-id reads the stream
in order until it has found every id, so it costs as much as reading up to the
last of them.`,
    )
    .action(async (stream: string, group: string, options: ReplayFlags, command: Command) =>
      withRheo(command, async (ctx) => {
        const spec = replaySpec(stream, group, options);
        const partitions = options.partition;
        const before = await ctx.rheo.lag(stream, group);
        if (options.dryRun) {
          const changes = await predict(ctx, stream, group, spec, before, partitions);
          return report(ctx, stream, group, changes, true);
        }
        await ctx.rheo.replay(stream, group, spec, partitions ? { partitions } : {});
        const after = await ctx.rheo.lag(stream, group);
        const changes = partitionsOf(before).map(([p, lag]): PartitionChange => {
          const now = after.partitions[p] ?? lag;
          return {
            partition: p,
            highWatermark: now.highWatermark,
            frontierBefore: lag.frontier,
            frontierAfter: now.frontier,
            lagBefore: lag.lag,
            lagAfter: now.lag,
          };
        });
        report(ctx, stream, group, changes, false);
      }),
    );
}

function replaySpec(stream: string, group: string, options: ReplayFlags): ReplaySpec {
  const given = [options.fromSequence !== undefined, options.from !== undefined, options.eventId !== undefined];
  if (given.filter(Boolean).length !== 1) {
    throw new RheoError('invalid_argument', `replay of group "${group}" on stream "${stream}": give exactly one of --from-sequence, --from, --event-id`, {
      stream,
      group,
    });
  }
  if (options.fromSequence !== undefined) return { fromSequence: options.fromSequence };
  if (options.from !== undefined) return { from: options.from };
  return { eventIds: options.eventId ?? [] };
}

/**
 * Replay moves each partition's frontier back to just below the first
 * replayed sequence (semantics.md, "Replay"): lag after = high - min(frontier, first - 1).
 */
async function predict(
  ctx: CommandContext,
  stream: string,
  group: string,
  spec: ReplaySpec,
  before: LagReport,
  partitions: number[] | undefined,
): Promise<PartitionChange[]> {
  if ('query' in spec) {
    throw new RheoError('unsupported', `replay --dry-run of group "${group}" on stream "${stream}" supports --from-sequence, --from and --event-id, not a query`, {
      stream,
      group,
    });
  }
  const firstById = 'eventIds' in spec ? await firstSequencesOf(ctx, stream, group, spec.eventIds) : null;
  const selected = partitions ? new Set(partitions) : null;
  const changes: PartitionChange[] = [];
  for (const [p, lag] of partitionsOf(before)) {
    let first: number | null = null;
    if (selected === null || selected.has(p)) {
      if (firstById) first = firstById.get(p) ?? null;
      else if ('fromSequence' in spec) first = Math.max(1, spec.fromSequence);
      else if ('from' in spec) {
        const { events } = await ctx.rheo.query(stream, { from: spec.from, partition: p, order: 'asc', limit: 1 });
        first = events[0]?.sequence ?? null;
      }
    }
    const frontierAfter = first === null ? lag.frontier : Math.min(lag.frontier, first - 1);
    changes.push({
      partition: p,
      highWatermark: lag.highWatermark,
      frontierBefore: lag.frontier,
      frontierAfter,
      lagBefore: lag.lag,
      lagAfter: Math.max(0, lag.highWatermark - frontierAfter),
    });
  }
  return changes;
}

function report(ctx: CommandContext, stream: string, group: string, changes: PartitionChange[], dryRun: boolean): void {
  const lagBefore = changes.reduce((sum, c) => sum + c.lagBefore, 0);
  const lagAfter = changes.reduce((sum, c) => sum + c.lagAfter, 0);
  if (ctx.json) return ctx.printJson({ stream, group, dryRun, lagBefore, lagAfter, partitions: changes });
  ctx.print(
    dryRun
      ? `dry run: replay would raise the lag of group "${group}" on stream "${stream}" from ${lagBefore} to ${lagAfter}; nothing changed`
      : `replayed group "${group}" on stream "${stream}": lag ${lagBefore} -> ${lagAfter}`,
  );
  ctx.print(
    formatTable(
      ['PARTITION', 'HIGH', 'FRONTIER', dryRun ? 'FRONTIER AFTER' : 'NOW', 'LAG', dryRun ? 'LAG AFTER' : 'NOW'],
      changes.map((c) => [c.partition, c.highWatermark, c.frontierBefore, c.frontierAfter, c.lagBefore, c.lagAfter]),
    ),
  );
}

/**
 * The lowest sequence per partition among `ids`, for a dry run of
 * `--event-id`: a replay reopens exactly those events, so a partition's
 * frontier moves back to just below the lowest one it settled. Reads the
 * stream in order (`queryAll`, page by page) until every id is found: its
 * cost grows with how far into the stream the last id lies. An id that is not
 * in the stream is `invalid_argument`, as the replay itself would answer.
 */
async function firstSequencesOf(ctx: CommandContext, stream: string, group: string, ids: string[]): Promise<Map<number, number>> {
  const wanted = new Set(ids);
  const first = new Map<number, number>();
  for await (const event of ctx.rheo.queryAll(stream, { order: 'asc' })) {
    if (!wanted.delete(event.id)) continue;
    const seen = first.get(event.partition);
    if (seen === undefined || event.sequence < seen) first.set(event.partition, event.sequence);
    if (wanted.size === 0) break;
  }
  if (wanted.size > 0) {
    const missing = [...wanted].slice(0, 5).map((id) => JSON.stringify(id)).join(', ');
    throw invalidArgument(`replay --dry-run of group "${group}": no event with id ${missing} in stream "${stream}"`, { stream, group });
  }
  return first;
}
