import type { Command } from 'commander';
import { collect, withRheo } from '../command-context.js';

export function registerRedrive(program: Command): void {
  program
    .command('redrive')
    .argument('<stream>')
    .argument('<group>')
    .description('offer dead letters again with attempts reset: all, or those of the given events (needs the runtime role)')
    .option('--event-id <id>', 'redrive only this event (repeatable)', collect)
    .action(async (stream: string, group: string, options: { eventId?: string[] }, command: Command) =>
      withRheo(command, async (ctx) => {
        const redriven = await ctx.rheo.redrive(stream, group, options.eventId ? { eventIds: options.eventId } : {});
        if (ctx.json) return ctx.printJson({ stream, group, redriven });
        ctx.print(`redrove ${redriven} dead letter(s) of group "${group}" on stream "${stream}"`);
      }),
    );
}
