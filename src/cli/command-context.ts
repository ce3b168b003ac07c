import type { Command } from 'commander';
import type { Rheo } from '../rheo.js';
import { connect, type Connection } from './connect.js';

export interface GlobalFlags {
  url?: string;
  schema?: string;
  json?: boolean;
}

export interface CommandContext {
  rheo: Rheo;
  backend: Connection['backend'];
  json: boolean;
  /** Writes one line (or block) to standard output. */
  print(text: string): void;
  /** Writes a value as one line of JSON to standard output. */
  printJson(value: unknown): void;
}

/** Connects with the global flags, runs `fn`, and always closes the pool so the process can exit. */
export async function withRheo(command: Command, fn: (ctx: CommandContext) => Promise<void>): Promise<void> {
  const flags = command.optsWithGlobals<GlobalFlags>();
  const { rheo, backend } = connect(flags);
  try {
    await fn({
      rheo,
      backend,
      json: flags.json === true,
      print: (text) => process.stdout.write(`${text}\n`),
      printJson: (value) => process.stdout.write(`${JSON.stringify(value)}\n`),
    });
  } finally {
    await rheo.close();
  }
}

/** commander's collector for a repeatable option. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}
