import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RheoError, invalidArgument } from '../core/errors.js';
import type { Rheo } from '../rheo.js';
import { createDashboardHandler, type DashboardOptions } from './dashboard-handler.js';

export interface DashboardServerOptions extends Omit<DashboardOptions, 'basePath'> {
  /** Default 4400; 0 picks a free port. */
  port?: number;
  /**
   * Address to listen on. Default `127.0.0.1`: the dashboard is reachable
   * from this machine only unless another address is asked for explicitly.
   */
  host?: string;
}

export interface RunningDashboard {
  /** Where the page is, e.g. `http://127.0.0.1:4400/`. */
  readonly url: string;
  readonly server: Server;
  /** Stops listening and ends open connections. Idempotent. Does not close `rheo`. */
  close(): Promise<void>;
}

/** Serves the dashboard on its own `node:http` server (what `rheo dashboard` runs). */
export async function startDashboard(rheo: Rheo, options: DashboardServerOptions = {}): Promise<RunningDashboard> {
  const port = options.port ?? 4400;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw invalidArgument(`port must be an integer from 0 to 65535, got ${String(port)}`);
  const host = options.host ?? '127.0.0.1';
  if (typeof host !== 'string' || host === '') throw invalidArgument('host must be a non-empty string');
  const handler = createDashboardHandler(rheo, options);
  const server = createServer((request, response) => handler(request, response));
  // A client that resets its connection must not become an unhandled error.
  server.on('clientError', (_error, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException): void => {
      reject(new RheoError('invalid_argument', `the dashboard cannot listen on ${host}:${port}: ${error.code ?? error.message}`, { cause: error }));
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      server.on('error', () => undefined);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${shownHost}:${address.port}/`,
    server,
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
