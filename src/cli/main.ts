#!/usr/bin/env node
import { Command, CommanderError, Option } from 'commander';
import { isRheoError } from '../core/errors.js';
import { EXIT, EXIT_CODES_HELP, exitCodeFor } from './exit-codes.js';
import { registerAppend } from './commands/append.js';
import { registerDashboard } from './commands/dashboard.js';
import { registerDeadLetters } from './commands/dead-letters.js';
import { registerDeleteGroup, registerDeleteStream } from './commands/delete.js';
import { registerDescribe } from './commands/describe.js';
import { registerGroups } from './commands/groups.js';
import { registerLag } from './commands/lag.js';
import { registerMigrate } from './commands/migrate.js';
import { registerRedrive } from './commands/redrive.js';
import { registerReplay } from './commands/replay.js';
import { registerReset } from './commands/reset.js';
import { registerRetention } from './commands/retention.js';
import { registerStreams } from './commands/streams.js';
import { registerTail } from './commands/tail.js';
import { registerTrim } from './commands/trim.js';

function buildProgram(): Command {
  const program = new Command('rheo')
    .description('operate rheo streams and consumer groups in PostgreSQL or Redis')
    .addOption(new Option('--url <url>', 'database URL: postgres://..., pglite://<data directory> or redis://... (rediss:// for TLS)').env('RHEO_DATABASE_URL'))
    .addOption(new Option('--schema <name>', "rheo's PostgreSQL schema, or its Redis key prefix").env('RHEO_SCHEMA').default('rheo'))
    .option('--json', 'machine-readable output: one JSON document (or NDJSON for tail/append) on stdout')
    .showHelpAfterError()
    .exitOverride()
    .addHelpText('after', `\n${EXIT_CODES_HELP}`);
  for (const register of [
    registerMigrate,
    registerStreams,
    registerGroups,
    registerDescribe,
    registerLag,
    registerDeadLetters,
    registerRedrive,
    registerReplay,
    registerReset,
    registerRetention,
    registerTrim,
    registerDeleteGroup,
    registerDeleteStream,
    registerTail,
    registerAppend,
    registerDashboard,
  ]) {
    register(program);
  }
  for (const command of program.commands) {
    command.exitOverride().showHelpAfterError().addHelpText('after', `\n${EXIT_CODES_HELP}`);
  }
  return program;
}

/** Runs the CLI and resolves to its exit code; never throws. */
async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  const json = argv.includes('--json');
  try {
    await program.parseAsync(argv, { from: 'user' });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version end here too, with exit code 0; commander has printed them.
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    const code = exitCodeFor(error);
    if (json) {
      const e = isRheoError(error)
        ? { code: error.code, message: error.message, stream: error.stream, group: error.group }
        : { code: 'internal', message: (error as Error)?.message ?? String(error) };
      process.stderr.write(`${JSON.stringify({ error: e })}\n`);
    } else {
      const label = isRheoError(error) ? ` [${error.code}]` : '';
      process.stderr.write(`rheo: ${(error as Error)?.message ?? String(error)}${label}\n`);
    }
    return code;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  () => {
    process.exitCode = EXIT.failure;
  },
);
