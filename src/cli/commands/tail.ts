import type { Command } from 'commander';
import { withRheo, type CommandContext } from '../command-context.js';
import { collectPartition, parseCount } from '../parse.js';
import { streamNotFound } from '../../core/errors.js';
import type { QueryOptions, RheoEvent } from '../../core/types.js';

interface TailFlags {
  follow?: boolean;
  type?: string;
  key?: string;
  limit: number;
  partition?: number[];
  pollMs: number;
}

export function registerTail(program: Command): void {
  program
    .command('tail')
    .argument('<stream>')
    .description('print the newest events of a stream; --follow keeps printing new ones until interrupted (needs SELECT)')
    .option('-f, --follow', 'keep printing events as they are appended (Ctrl-C to stop)')
    .option('--type <type>', 'only events of this type')
    .option('--key <key>', 'only events with this key')
    .option('--partition <p>', 'only this partition (repeatable; default all)', collectPartition)
    .option('-n, --limit <n>', 'how many of the newest events to print first (0-1000)', parseCount, 10)
    .option('--poll-ms <ms>', 'how often --follow looks for new events', parseCount, 1000)
    .addHelpText('after', '\nHuman output is one line per event; --json prints one JSON event per line (NDJSON).')
    .action(async (stream: string, options: TailFlags, command: Command) =>
      withRheo(command, async (ctx) => {
        const info = (await ctx.rheo.listStreams()).find((s) => s.name === stream);
        if (!info) throw streamNotFound(stream);
        const filter: QueryOptions = {};
        if (options.type !== undefined) filter.type = options.type;
        if (options.key !== undefined) filter.key = options.key;
        const partitions = options.partition ?? Array.from({ length: info.partitions }, (_, p) => p);
        // Each partition's newest sequence is read before anything is printed:
        // the first page stops there and --follow starts there, so an event
        // appended in between is printed by --follow, never lost between the two.
        const last = new Map<number, number>();
        for (const partition of partitions) {
          const { events } = await ctx.rheo.query(stream, { partition, order: 'desc', limit: 1 });
          last.set(partition, events[0]?.sequence ?? 0);
        }
        const newest: RheoEvent[] = [];
        for (const partition of partitions) {
          const until = last.get(partition) ?? 0;
          if (options.limit === 0 || until === 0) continue;
          const { events } = await ctx.rheo.query(stream, { ...filter, partition, untilSequence: until, order: 'desc', limit: options.limit });
          newest.push(...events);
        }
        newest.sort((a, b) => a.timestamp.getTime() - b.timestamp.getTime() || a.partition - b.partition || a.sequence - b.sequence);
        for (const event of newest.slice(-options.limit)) printEvent(ctx, event);
        if (!options.follow) return;
        await follow(ctx, stream, filter, last, options.pollMs);
      }),
    );
}

async function follow(ctx: CommandContext, stream: string, filter: QueryOptions, last: Map<number, number>, pollMs: number): Promise<void> {
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    while (!stop.signal.aborted) {
      let found = 0;
      for (const [partition, after] of last) {
        const { events } = await ctx.rheo.query(stream, { ...filter, partition, afterSequence: after, order: 'asc', limit: 1000 });
        events.sort((a, b) => a.sequence - b.sequence);
        for (const event of events) printEvent(ctx, event);
        const top = events[events.length - 1];
        if (top) last.set(partition, top.sequence);
        found += events.length;
      }
      if (found === 0) await pause(pollMs, stop.signal);
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

function printEvent(ctx: CommandContext, event: RheoEvent): void {
  if (ctx.json) return ctx.printJson(event);
  ctx.print(
    `${event.timestamp.toISOString()}  ${event.partition}/${event.sequence}  ${event.type}  ${event.key ?? '-'}  ${event.id}  ${JSON.stringify(event.payload)}`,
  );
}
