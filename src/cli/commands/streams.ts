import type { Command } from 'commander';
import { withRheo } from '../command-context.js';
import type { StreamInfo } from '../../core/types.js';
import { formatTable } from '../table.js';
import { describeRetention } from './retention.js';

/** Events retained across partitions (high - low + 1 each). */
function retained(s: StreamInfo): number {
  return Object.values(s.watermarks).reduce((n, w) => n + w.highWatermark - w.lowWatermark + 1, 0);
}

export function registerStreams(program: Command): void {
  program
    .command('streams')
    .description('list streams with their partitions and groups (needs SELECT)')
    .action(async (_options: unknown, command: Command) =>
      withRheo(command, async (ctx) => {
        const streams = await ctx.rheo.listStreams();
        const rows = await Promise.all(
          streams.map(async (s) => ({ ...s, groups: await ctx.rheo.listGroups(s.name) })),
        );
        if (ctx.json) return ctx.printJson(rows);
        if (rows.length === 0) return ctx.print('no streams');
        ctx.print(
          formatTable(
            ['STREAM', 'PARTITIONS', 'GROUPS', 'EVENTS', 'RETENTION', 'CREATED'],
            rows.map((s) => [s.name, s.partitions, s.groups.length, retained(s), describeRetention(s.retention), s.createdAt.toISOString()]),
          ),
        );
      }),
    );
}
