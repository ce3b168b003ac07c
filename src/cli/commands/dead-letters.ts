import type { Command } from 'commander';
import { withRheo } from '../command-context.js';
import { formatTable } from '../table.js';
import { parseCount } from '../parse.js';

interface DeadLetterFlags {
  limit: number;
  after?: string;
  payload?: boolean;
}

export function registerDeadLetters(program: Command): void {
  program
    .command('dead-letters')
    .argument('<stream>')
    .argument('<group>')
    .description("list a group's dead letters, oldest first, one page at a time (needs SELECT)")
    .option('--limit <n>', 'dead letters per page (1-1000)', parseCount, 50)
    .option('--after <id>', 'start after this dead-letter id (the "next page" hint of the previous page)')
    .option('--payload', "show each event's payload and metadata")
    .action(async (stream: string, group: string, options: DeadLetterFlags, command: Command) =>
      withRheo(command, async (ctx) => {
        const page = await ctx.rheo.deadLetters(stream, group, { limit: options.limit, after: options.after });
        const next = page.length === options.limit ? (page[page.length - 1]?.id ?? null) : null;
        if (ctx.json) {
          const deadLetters = page.map((d) => {
            if (options.payload) return d;
            const { payload: _payload, metadata: _metadata, ...event } = d.event;
            return { ...d, event };
          });
          return ctx.printJson({ stream, group, deadLetters, next });
        }
        if (page.length === 0) return ctx.print(`no dead letters in group "${group}" of stream "${stream}"`);
        ctx.print(
          formatTable(
            ['ID', 'PARTITION', 'SEQUENCE', 'EVENT ID', 'TYPE', 'ATTEMPT', 'DEAD SINCE', 'REASON'],
            page.map((d) => [
              d.id,
              d.event.partition,
              d.event.sequence,
              d.event.id,
              d.event.type,
              d.attempt,
              d.deadLetteredAt.toISOString(),
              oneLine(d.reason ?? ''),
            ]),
          ),
        );
        if (options.payload) {
          for (const d of page) {
            ctx.print(`\n${d.id} ${d.event.id}\n  payload  ${JSON.stringify(d.event.payload)}\n  metadata ${JSON.stringify(d.event.metadata)}`);
          }
        }
        if (next) ctx.print(`\nnext page: rheo dead-letters ${stream} ${group} --after ${next}`);
      }),
    );
}

/** A reason may hold newlines (a stack trace); a table row must not. */
function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, ' ');
  return flat.length > 80 ? `${flat.slice(0, 79)}…` : flat;
}
