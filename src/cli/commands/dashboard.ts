import { startDashboard } from '../../dashboard/dashboard-server.js';
import { withRheo } from '../command-context.js';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { parseCount } from '../parse.js';

interface DashboardFlags {
  port: number;
  host: string;
  allowWrites?: boolean;
}

export function registerDashboard(program: Command): void {
  program
    .command('dashboard')
    .description('serve a web dashboard of streams, groups, lag, leases and dead letters (read-only unless --allow-writes); runs until interrupted')
    .addOption(new Option('--port <port>', 'port to listen on (0: any free port)').default(4400).argParser(parsePort))
    .addOption(new Option('--host <address>', 'address to listen on; anything but loopback exposes the dashboard to the network').default('127.0.0.1'))
    .option('--allow-writes', 'show redrive and replay buttons (each asks for confirmation)')
    .action(async (flags: DashboardFlags, command: Command) =>
      withRheo(command, async (ctx) => {
        const dashboard = await startDashboard(ctx.rheo, { port: flags.port, host: flags.host, allowWrites: flags.allowWrites === true });
        if (ctx.json) ctx.printJson({ url: dashboard.url, allowWrites: flags.allowWrites === true });
        else ctx.print(`rheo dashboard on ${dashboard.url} (${flags.allowWrites ? 'writes allowed' : 'read-only'}); Ctrl-C stops it`);
        await new Promise<void>((resolve) => {
          const stop = (): void => {
            process.off('SIGINT', stop);
            process.off('SIGTERM', stop);
            resolve();
          };
          process.on('SIGINT', stop);
          process.on('SIGTERM', stop);
        });
        await dashboard.close();
      }),
    );
}

function parsePort(value: string): number {
  const port = parseCount(value);
  if (port > 65_535) throw new InvalidArgumentError('expected a port from 0 to 65535');
  return port;
}
