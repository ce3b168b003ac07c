import type { Command } from 'commander';
import { withRheo } from '../command-context.js';
import { parseCount, parseTime } from '../parse.js';
import type { ResetOptions } from '../../core/types.js';

interface ResetFlags {
  confirm?: boolean;
  startAfter?: number;
  startAt?: Date;
}

export function registerReset(program: Command): void {
  program
    .command('reset')
    .argument('<stream>')
    .argument('<group>')
    .description("drop ALL of a group's progress, leases and dead letters; refuses without --confirm (needs the runtime role)")
    .option('--confirm', 'really drop the progress')
    .option('--start-after <sequence>', 'restart after this sequence in every partition (default 0: from the start)', parseCount)
    .option('--start-at <time>', 'restart at the first event at or after this time (ISO 8601 or epoch ms)', parseTime)
    .action(async (stream: string, group: string, options: ResetFlags, command: Command) =>
      withRheo(command, async (ctx) => {
        // The facade refuses without confirm: true (confirm_required, exit 2).
        const reset = {
          confirm: options.confirm === true,
          startAfter: options.startAfter,
          startAt: options.startAt,
        } as ResetOptions;
        await ctx.rheo.resetGroup(stream, group, reset);
        const lag = await ctx.rheo.lag(stream, group);
        if (ctx.json) return ctx.printJson({ stream, group, reset: true, lag: lag.lag });
        ctx.print(`reset group "${group}" on stream "${stream}": lag is now ${lag.lag}`);
      }),
    );
}
