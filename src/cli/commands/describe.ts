import type { Command } from 'commander';
import { withRheo } from '../command-context.js';
import { formatAge, formatTable } from '../table.js';
import { partitionsOf } from '../lag-figures.js';
import { describeRetention } from './retention.js';

export function registerDescribe(program: Command): void {
  program
    .command('describe')
    .argument('<stream>')
    .argument('<group>')
    .description('per partition low watermark, frontier, high watermark, lag as count and age; leases held and dead letters (needs SELECT)')
    .addHelpText(
      'after',
      `
Columns: LOW is the partition's first retained sequence (events below it were
trimmed); FRONTIER is the highest sequence up to which every event is settled;
HIGH is the partition's last sequence; LAG = HIGH - FRONTIER; OLDEST is how long
the event after the frontier has waited; LEASES are deliveries leased now (live
or expired but not yet claimed again); DEAD are dead letters; OWNER is the
member that owns the partition when the group is consumed by partition
ownership, listed with its partitions below the table. The group's totals and
the stream's retention are above the table.`,
    )
    .action(async (stream: string, group: string, _options: unknown, command: Command) =>
      withRheo(command, async (ctx) => {
        const info = await ctx.rheo.groupInfo(stream, group);
        const retention = (await ctx.rheo.listStreams()).find((s) => s.name === stream)?.retention ?? null;
        if (ctx.json) return ctx.printJson({ ...info, retention });
        const now = Date.now();
        ctx.print(`stream ${stream}  group ${group}  max attempts ${info.maxAttempts}  retention: ${describeRetention(retention)}`);
        ctx.print(`lag ${info.lag.lag}  leases held ${info.inflight}  dead letters ${info.deadLetters}\n`);
        ctx.print(
          formatTable(
            ['PARTITION', 'LOW', 'FRONTIER', 'HIGH', 'LAG', 'OLDEST', 'LEASES', 'DEAD', ...(info.membership ? ['OWNER'] : [])],
            partitionsOf(info.lag).map(([p, lag]) => [
              p,
              lag.lowWatermark,
              lag.frontier,
              lag.highWatermark,
              lag.lag,
              lag.oldestUnsettledAt ? formatAge(now - lag.oldestUnsettledAt.getTime()) : '-',
              info.partitions[Number(p)]?.inflight ?? 0,
              info.partitions[Number(p)]?.deadLetters ?? 0,
              ...(info.membership ? [info.membership.owners[Number(p)] ?? '-'] : []),
            ]),
          ),
        );
        const membership = info.membership;
        if (membership) {
          ctx.print(`\nmembers (partition ownership, group generation ${membership.groupGeneration})`);
          ctx.print(
            formatTable(
              ['MEMBER', 'PARTITIONS', 'REVOKING', 'SESSION LEFT'],
              membership.members.map((m) => [
                m.memberId,
                m.partitions.join(',') || '-',
                m.revoking.join(',') || '-',
                formatAge(Math.max(0, m.expiresAt.getTime() - now)),
              ]),
            ),
          );
        }
      }),
    );
}
