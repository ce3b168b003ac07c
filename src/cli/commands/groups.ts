import type { Command } from 'commander';
import { withRheo } from '../command-context.js';
import { formatAge, formatTable } from '../table.js';
import { oldestUnsettled } from '../lag-figures.js';

export function registerGroups(program: Command): void {
  program
    .command('groups')
    .argument('<stream>')
    .description("list a stream's consumer groups with lag, leases held and dead letters (needs SELECT)")
    .action(async (stream: string, _options: unknown, command: Command) =>
      withRheo(command, async (ctx) => {
        const names = await ctx.rheo.listGroups(stream);
        const infos = await Promise.all(names.map((group) => ctx.rheo.groupInfo(stream, group)));
        if (ctx.json) return ctx.printJson(infos);
        if (infos.length === 0) return ctx.print(`stream "${stream}" has no groups`);
        const now = Date.now();
        ctx.print(
          formatTable(
            ['GROUP', 'LAG', 'OLDEST', 'LEASED', 'DEAD', 'MAX ATTEMPTS'],
            infos.map((g) => {
              const oldest = oldestUnsettled(g.lag);
              return [g.group, g.lag.lag, oldest ? formatAge(now - oldest.getTime()) : '-', g.inflight, g.deadLetters, g.maxAttempts];
            }),
          ),
        );
      }),
    );
}
