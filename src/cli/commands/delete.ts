import type { Command } from 'commander';
import type { DeleteOptions } from '../../core/types.js';
import { withRheo } from '../command-context.js';

interface ConfirmFlags {
  confirm?: boolean;
}

/** The facade refuses without `confirm: true` (confirm_required, exit 2). */
function confirmation(options: ConfirmFlags): DeleteOptions {
  return { confirm: options.confirm === true } as DeleteOptions;
}

export function registerDeleteGroup(program: Command): void {
  program
    .command('delete-group')
    .argument('<stream>')
    .argument('<group>')
    .description("delete a group with its progress, leases and dead letters; refuses without --confirm (needs DELETE)")
    .option('--confirm', 'really delete the group')
    .action(async (stream: string, group: string, options: ConfirmFlags, command: Command) =>
      withRheo(command, async (ctx) => {
        await ctx.rheo.deleteGroup(stream, group, confirmation(options));
        if (ctx.json) return ctx.printJson({ stream, group, deleted: true });
        ctx.print(`deleted group "${group}" of stream "${stream}"`);
      }),
    );
}

export function registerDeleteStream(program: Command): void {
  program
    .command('delete-stream')
    .argument('<stream>')
    .description('delete a stream with all its events and groups; refuses without --confirm (needs DELETE)')
    .option('--confirm', 'really delete the stream')
    .action(async (stream: string, options: ConfirmFlags, command: Command) =>
      withRheo(command, async (ctx) => {
        await ctx.rheo.deleteStream(stream, confirmation(options));
        if (ctx.json) return ctx.printJson({ stream, deleted: true });
        ctx.print(`deleted stream "${stream}" with its events and groups`);
      }),
    );
}
