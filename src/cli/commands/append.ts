import { createInterface } from 'node:readline';
import type { Command } from 'commander';
import { withRheo, type CommandContext } from '../command-context.js';
import { parseCount, parseJson } from '../parse.js';
import { ProgressBar } from '../progress-bar.js';
import { prepareAppend } from '../../core/arguments.js';
import { systemClock } from '../../core/clock.js';
import { RheoError, invalidArgument, invalidPartition, streamNotFound } from '../../core/errors.js';
import type { AppendInput, JsonObject, JsonValue, StreamInfo } from '../../core/types.js';

interface AppendFlags {
  payload?: unknown;
  type?: string;
  key?: string;
  id?: string;
  partition?: number;
  metadata?: unknown;
  batchSize: number;
  progress: boolean;
}

/** appendBatch call size: large enough to amortise round trips, small enough to keep each transaction short. */
const DEFAULT_BATCH = 500;

export function registerAppend(program: Command): void {
  program
    .command('append')
    .argument('<stream>')
    .description('append one event from flags, or NDJSON events from standard input (needs the runtime role)')
    .option('--payload <json>', 'the event payload as JSON; without it, events are read from standard input', parseJson)
    .option('--type <type>', 'event type (default "event")')
    .option('--key <key>', 'partition key')
    .option('--id <id>', 'event id (idempotency key: an existing id appends nothing)')
    .option('--partition <p>', 'explicit partition', parseCount)
    .option('--metadata <json>', 'metadata as a JSON object', parseJson)
    .option('--batch-size <n>', 'events per append transaction when reading standard input', parseCount, DEFAULT_BATCH)
    .option('--no-progress', 'no progress bar on a terminal')
    .addHelpText(
      'after',
      `
Standard input: one JSON object per line, shaped like rheo.append's input:
  {"payload": {...}, "type": "order.paid", "key": "o-1", "id": "evt-1", "metadata": {...},
   "partition": 0, "timestamp": "2026-11-30T12:00:00Z"}
Every line is checked before anything is appended, so a bad line writes nothing.
Events are appended in transactions of --batch-size; if the database fails midway,
appending again is safe for lines that carry an "id".`,
    )
    .action(async (stream: string, options: AppendFlags, command: Command) =>
      withRheo(command, async (ctx) => {
        const info = (await ctx.rheo.listStreams()).find((s) => s.name === stream);
        if (!info) throw streamNotFound(stream);
        if (options.payload !== undefined) return appendOne(ctx, info, options);
        if ([options.type, options.key, options.id, options.partition, options.metadata].some((v) => v !== undefined)) {
          throw invalidArgument(`append to stream "${stream}": --type, --key, --id, --partition and --metadata need --payload`, { stream });
        }
        if (process.stdin.isTTY) {
          throw invalidArgument(`append to stream "${stream}": give --payload, or pipe NDJSON events to standard input`, { stream });
        }
        await appendStdin(ctx, info, options);
      }),
    );
}

async function appendOne(ctx: CommandContext, info: StreamInfo, options: AppendFlags): Promise<void> {
  const input: AppendInput = { payload: options.payload as JsonValue };
  if (options.type !== undefined) input.type = options.type;
  if (options.key !== undefined) input.key = options.key;
  if (options.id !== undefined) input.id = options.id;
  if (options.partition !== undefined) input.partition = checkPartition(info, options.partition, 'the event');
  if (options.metadata !== undefined) input.metadata = options.metadata as JsonObject;
  const event = await ctx.rheo.append(info.name, input);
  if (ctx.json) return ctx.printJson(event);
  ctx.print(`appended ${event.id} to stream "${info.name}" at ${event.partition}/${event.sequence}`);
}

async function appendStdin(ctx: CommandContext, info: StreamInfo, options: AppendFlags): Promise<void> {
  if (options.batchSize < 1 || options.batchSize > 100_000) {
    throw invalidArgument(`append to stream "${info.name}": --batch-size must be 1-100000`, { stream: info.name });
  }
  const inputs: AppendInput[] = [];
  let lineNumber = 0;
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    lineNumber++;
    if (line.trim() === '') continue;
    inputs.push(parseLine(info, line, lineNumber, ctx.rheo.limits.maxEventBytes));
  }
  const bar = new ProgressBar(process.stderr, inputs.length, `appending to ${info.name}`, options.progress && inputs.length >= 1000);
  let appended = 0;
  for (let i = 0; i < inputs.length; i += options.batchSize) {
    let events;
    try {
      events = await ctx.rheo.appendBatch(info.name, inputs.slice(i, i + options.batchSize));
    } catch (error) {
      bar.finish();
      if (error instanceof RheoError && appended > 0) {
        error.message = `${error.message} (the first ${appended} events were appended)`;
      }
      throw error;
    }
    appended += events.length;
    if (ctx.json) for (const e of events) ctx.printJson({ id: e.id, partition: e.partition, sequence: e.sequence });
    bar.update(appended);
  }
  bar.finish();
  if (!ctx.json) ctx.print(`appended ${appended} event(s) to stream "${info.name}"`);
}

function parseLine(info: StreamInfo, line: string, lineNumber: number, maxEventBytes: number): AppendInput {
  const what = `standard input line ${lineNumber}`;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw invalidArgument(`append to stream "${info.name}": ${what} is not JSON`, { stream: info.name });
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const record = value as Record<string, unknown>;
    if (typeof record.timestamp === 'string') {
      const timestamp = new Date(record.timestamp);
      if (Number.isNaN(timestamp.getTime())) {
        throw invalidArgument(`append to stream "${info.name}": ${what} has an invalid timestamp`, { stream: info.name });
      }
      value = { ...record, timestamp };
    }
  }
  // The facade's own validation, run on every line before the first append.
  const input = value as AppendInput;
  prepareAppend(systemClock, input, `${what} of stream "${info.name}"`, { stream: info.name, maxEventBytes });
  if (input.partition !== undefined) checkPartition(info, input.partition, what);
  return input;
}

function checkPartition(info: StreamInfo, partition: number, what: string): number {
  if (partition >= info.partitions) {
    const error = invalidPartition(info.name, partition, info.partitions);
    error.message = `${what}: ${error.message}`;
    throw error;
  }
  return partition;
}
