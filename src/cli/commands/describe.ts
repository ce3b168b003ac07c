import type { Command } from 'commander';
import { withRheo } from '../command-context.js';
import { formatAge, formatTable } from '../table.js';
import { partitionsOf } from '../lag-figures.js';

export function registerDescribe(program: Command): void {
  program
    .command('describe')
    .argument('<stream>')
    .argument('<group>')
    .description('per partition frontier, high watermark, lag as count and age; leases held and dead letters (needs SELECT)')
    .addHelpText(
      'after',
      `
Columns: FRONTIER is the highest sequence up to which every event is settled;
HIGH is the partition's last sequence; LAG = HIGH - FRONTIER; OLDEST is how long
the event after the frontier has waited. There is no low-watermark column: no
event is ever deleted yet, so every partition's log starts at sequence 1.
Leases held and dead letters are counted for the whole group.`,
    )
    .action(async (stream: string, group: string, _options: unknown, command: Command) =>
      withRheo(command, async (ctx) => {
        const info = await ctx.rheo.groupInfo(stream, group);
        if (ctx.json) return ctx.printJson(info);
        const now = Date.now();
        ctx.print(`stream ${stream}  group ${group}  max attempts ${info.maxAttempts}`);
        ctx.print(`lag ${info.lag.lag}  leases held ${info.inflight}  dead letters ${info.deadLetters}\n`);
        ctx.print(
          formatTable(
            ['PARTITION', 'FRONTIER', 'HIGH', 'LAG', 'OLDEST'],
            partitionsOf(info.lag).map(([p, lag]) => [
              p,
              lag.frontier,
              lag.highWatermark,
              lag.lag,
              lag.oldestUnsettledAt ? formatAge(now - lag.oldestUnsettledAt.getTime()) : '-',
            ]),
          ),
        );
      }),
    );
}
