import type { Command } from 'commander';
import { withRheo, type CommandContext } from '../command-context.js';
import { formatAge, formatTable } from '../table.js';
import { partitionsOf } from '../lag-figures.js';
import { renderLagFrame, type LagSample } from '../lag-screen.js';
import { parseCount } from '../parse.js';
import { isRheoError } from '../../core/errors.js';
import type { LagReport } from '../../core/types.js';

/** Alternate screen on, cursor hidden; the reverse restores the operator's terminal. */
const ENTER_SCREEN = '\x1b[?1049h\x1b[?25l';
const LEAVE_SCREEN = '\x1b[?25h\x1b[?1049l';
const CLEAR = '\x1b[H\x1b[2J';

export function registerLag(program: Command): void {
  program
    .command('lag')
    .argument('<stream>')
    .argument('[group]', 'one group (default: every group of the stream)')
    .description('lag per partition as count and age; --watch keeps a live full-screen view (needs SELECT)')
    .option('-w, --watch', 'redraw every second with a bar per partition and the rate of change, until Ctrl-C')
    .option('--interval-ms <ms>', 'refresh interval for --watch', parseCount, 1000)
    .action(async (stream: string, group: string | undefined, options: { watch?: boolean; intervalMs: number }, command: Command) =>
      withRheo(command, async (ctx) => {
        const load = async (): Promise<LagReport[]> => {
          const groups = group === undefined ? await ctx.rheo.listGroups(stream) : [group];
          return Promise.all(groups.map((g) => ctx.rheo.lag(stream, g)));
        };
        if (options.watch) return watch(stream, load, Math.max(100, options.intervalMs));
        printOnce(ctx, stream, await load());
      }),
    );
}

function printOnce(ctx: CommandContext, stream: string, reports: LagReport[]): void {
  if (ctx.json) return ctx.printJson(reports);
  if (reports.length === 0) return ctx.print(`stream "${stream}" has no groups`);
  const now = Date.now();
  const rows = reports.flatMap((r) =>
    partitionsOf(r).map(([p, lag]) => [
      r.group,
      p,
      lag.lag,
      lag.oldestUnsettledAt ? formatAge(now - lag.oldestUnsettledAt.getTime()) : '-',
      lag.lowWatermark,
      lag.frontier,
      lag.highWatermark,
    ]),
  );
  ctx.print(formatTable(['GROUP', 'PARTITION', 'LAG', 'OLDEST', 'LOW', 'FRONTIER', 'HIGH'], rows));
}

/**
 * Redraws until SIGINT or SIGTERM, then restores the terminal. A failed poll
 * because the database is unreachable (restarting) is shown on screen and retried: the view operators
 * keep open during an incident must outlive the incident.
 */
async function watch(stream: string, load: () => Promise<LagReport[]>, intervalMs: number): Promise<void> {
  const out = process.stdout;
  let stopped = false;
  let wake: (() => void) | null = null;
  const stop = (): void => {
    stopped = true;
    wake?.();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  out.write(ENTER_SCREEN);
  let previous: LagSample | null = null;
  try {
    while (!stopped) {
      let text: string;
      try {
        const frame = renderLagFrame(stream, await load(), previous, Date.now());
        previous = frame.sample;
        text = frame.text;
      } catch (error) {
        if (!isRheoError(error, 'backend_unavailable')) throw error;
        text = `rheo lag ${stream}   ${new Date().toISOString()}\n\nerror: ${(error as Error).message}\nretrying...`;
      }
      if (stopped) break;
      out.write(CLEAR + text);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, intervalMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  } finally {
    out.write(LEAVE_SCREEN);
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
}
