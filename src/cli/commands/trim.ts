import type { Command } from 'commander';
import type { TrimReport } from '../../core/backend.js';
import { requireCapability } from '../../core/capabilities.js';
import { streamNotFound } from '../../core/errors.js';
import type { Rheo } from '../../rheo.js';
import type { StreamInfo, TrimOptions } from '../../core/types.js';
import { withRheo } from '../command-context.js';
import { formatTable } from '../table.js';
import { parseCount, parseTime } from '../parse.js';

interface TrimFlags {
  before?: Date;
  keep?: number;
  force?: boolean;
  dryRun?: boolean;
}

/** What a trim would do, per partition: the same bounds the backend computes, from read-only calls. */
interface TrimPlan {
  deleted: number;
  partitions: Record<number, { deleted: number; lowWatermark: number }>;
  /** With --force: per group, how many deleted sequences lie above its frontier (at most that many unsettled). */
  forced: Array<{ group: string; partition: number; unsettledAtMost: number }>;
}

export function registerTrim(program: Command): void {
  program
    .command('trim')
    .argument('<stream>')
    .description("delete old events now: by --before/--keep, or by the stream's retention (needs DELETE)")
    .option('--before <time>', 'events with a timestamp before this (ISO 8601 or epoch ms)', parseTime)
    .option('--keep <n>', 'keep at most this many newest events per partition', parseCount)
    .option('--force', 'also delete events some group has not settled (they count as dead-lettered and gone)')
    .option('--dry-run', 'print what would be deleted, per partition, and change nothing')
    .addHelpText(
      'after',
      `
Without --before and --keep, trims what the stream's retention allows (a stream
without retention: nothing). Only events every group has settled go, unless
--force; a forced trim reports per group how many unsettled events it removed.
Works in batches of 10,000 events, each its own short transaction.`,
    )
    .action(async (stream: string, options: TrimFlags, command: Command) =>
      withRheo(command, async (ctx) => {
        const request: TrimOptions = { before: options.before, keep: options.keep, force: options.force === true };
        // The dry run reads only, but a backend that cannot trim must not promise a trim.
        requireCapability(ctx.backend, 'retention', 'rheo trim');
        if (options.dryRun) {
          const plan = await planTrim(ctx.rheo, stream, request);
          if (ctx.json) return ctx.printJson({ stream, dryRun: true, ...plan });
          print(ctx.print, stream, plan, true);
          return;
        }
        const report = await ctx.rheo.trim(stream, request);
        if (ctx.json) return ctx.printJson({ stream, ...report });
        print(ctx.print, stream, report, false);
      }),
    );
}

function print(out: (text: string) => void, stream: string, report: TrimReport | TrimPlan, dryRun: boolean): void {
  out(`${dryRun ? 'would trim' : 'trimmed'} ${report.deleted} event(s) from stream "${stream}"\n`);
  out(
    formatTable(
      ['PARTITION', dryRun ? 'WOULD DELETE' : 'DELETED', 'LOW'],
      Object.entries(report.partitions).map(([p, r]) => [p, r.deleted, r.lowWatermark]),
    ),
  );
  if (report.forced.length === 0) return;
  out('');
  out(
    formatTable(
      ['GROUP', 'PARTITION', dryRun ? 'UNSETTLED (AT MOST)' : 'UNSETTLED REMOVED'],
      report.forced.map((f) => [f.group, f.partition, 'unsettled' in f ? f.unsettled : f.unsettledAtMost]),
    ),
  );
}

/**
 * The dry run: per partition the retention/explicit bound (count from the
 * watermarks; age by reading the leading run of old events from the low
 * watermark), capped by every group's frontier unless forced.
 */
async function planTrim(rheo: Rheo, stream: string, options: TrimOptions): Promise<TrimPlan> {
  const info: StreamInfo | undefined = (await rheo.listStreams()).find((s) => s.name === stream);
  if (!info) throw streamNotFound(stream);
  const explicit = options.before !== undefined || options.keep !== undefined;
  const keep = explicit ? (options.keep ?? null) : (info.retention?.maxEvents ?? null);
  const before = explicit
    ? (options.before ?? null)
    : info.retention?.maxAgeMs != null
      ? new Date(Date.now() - info.retention.maxAgeMs)
      : null;
  const groups = await rheo.listGroups(stream);
  const lags = await Promise.all(groups.map(async (g) => ({ group: g, lag: await rheo.lag(stream, g) })));
  const plan: TrimPlan = { deleted: 0, partitions: {}, forced: [] };
  for (let p = 0; p < info.partitions; p++) {
    const { lowWatermark: low, highWatermark: high } = info.watermarks[p]!;
    let bound = low - 1;
    if (keep !== null) bound = Math.max(bound, high - keep);
    if (before !== null) bound = Math.max(bound, await lastBefore(rheo, stream, p, low, before));
    if (!options.force) for (const { lag } of lags) bound = Math.min(bound, lag.partitions[p]!.frontier);
    const deleted = Math.max(0, bound - low + 1);
    plan.deleted += deleted;
    plan.partitions[p] = { deleted, lowWatermark: Math.max(low, bound + 1) };
    if (deleted === 0) continue;
    for (const { group, lag } of lags) {
      const frontier = lag.partitions[p]!.frontier;
      if (frontier < bound) plan.forced.push({ group, partition: p, unsettledAtMost: bound - frontier });
    }
  }
  return plan;
}

/** The last sequence of the leading run of events with a timestamp before `before`, reading from the low watermark. */
async function lastBefore(rheo: Rheo, stream: string, partition: number, low: number, before: Date): Promise<number> {
  let last = low - 1;
  for (;;) {
    const page = await rheo.read(stream, { partition, after: last, limit: 1000 });
    for (const e of page) {
      if (e.timestamp.getTime() >= before.getTime()) return last;
      last = e.sequence;
    }
    if (page.length === 0) return last;
  }
}
