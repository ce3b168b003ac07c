import type { Command } from 'commander';
import type { RetentionPolicy } from '../../core/backend.js';
import { invalidArgument, streamNotFound } from '../../core/errors.js';
import { withRheo } from '../command-context.js';
import { formatDuration, parseCount, parseDuration } from '../parse.js';

interface RetentionFlags {
  maxAge?: number;
  maxEvents?: number;
  clear?: boolean;
}

export function describeRetention(policy: RetentionPolicy | null): string {
  if (policy === null) return 'keep everything';
  const parts: string[] = [];
  if (policy.maxAgeMs !== null) parts.push(`max age ${formatDuration(policy.maxAgeMs)}`);
  if (policy.maxEvents !== null) parts.push(`max ${policy.maxEvents} events per partition`);
  return parts.join(', ');
}

export function registerRetention(program: Command): void {
  program
    .command('retention')
    .argument('<stream>')
    .description("show or set a stream's retention (setting needs UPDATE on rheo's tables)")
    .option('--max-age <duration>', 'trim events older than this (ms, or 30s, 15m, 12h, 7d, 2w)', parseDuration)
    .option('--max-events <n>', 'keep at most this many newest events per partition', parseCount)
    .option('--clear', 'remove the retention: keep every event')
    .addHelpText(
      'after',
      `
Without flags, prints the current policy. With --max-age and/or --max-events,
replaces it (a flag left out is unset). Either limit alone lets an event go,
and only once every group has settled it; the applications' background
trimmers apply it (see also \`rheo trim\`).`,
    )
    .action(async (stream: string, options: RetentionFlags, command: Command) =>
      withRheo(command, async (ctx) => {
        const setting = options.maxAge !== undefined || options.maxEvents !== undefined;
        if (setting && options.clear) throw invalidArgument('give --clear or --max-age/--max-events, not both');
        if (setting || options.clear) {
          await ctx.rheo.setRetention(
            stream,
            options.clear ? null : { maxAgeMs: options.maxAge ?? null, maxEvents: options.maxEvents ?? null },
          );
        }
        const info = (await ctx.rheo.listStreams()).find((s) => s.name === stream);
        if (!info) throw streamNotFound(stream);
        if (ctx.json) return ctx.printJson({ stream, retention: info.retention });
        ctx.print(`stream "${stream}": ${describeRetention(info.retention)}`);
      }),
    );
}
