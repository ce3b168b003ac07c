import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort, postgresUser } from './throwaway-postgres.js';

/**
 * A throwaway PgBouncer in transaction pooling mode in front of a PostgreSQL
 * on loopback, for the test suite: config, auth file and log in a temp dir,
 * a free port on 127.0.0.1, run as the `postgres` OS user when running as
 * root (PgBouncer refuses root), stopped by its PID and deleted on `stop()`.
 */
export interface ThrowawayPgbouncer {
  readonly port: number;
  /** `pgbouncer --version`, first line. */
  readonly version: string;
  /** Connection string through the pooler to `database`, as `user`. */
  url(database: string, user?: string): string;
  /** Stops PgBouncer (SIGTERM to its PID) and deletes its directory. Idempotent and synchronous. */
  stop(): void;
}

export interface ThrowawayPgbouncerOptions {
  /** The PostgreSQL it forwards to. */
  target: { host: string; port: number };
  /** Roles that may log in (trust, loopback only). Default `['postgres']`. */
  users?: string[];
  /** Server connections per (database, user). Default 40. */
  poolSize?: number;
}

const CANDIDATES = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer', '/usr/local/bin/pgbouncer'];

/** The pgbouncer binary, or `null` when none is installed (Debian/Ubuntu: `apt-get install -y pgbouncer`). */
export function findPgbouncer(): string | null {
  if (process.env.RHEO_PGBOUNCER_BIN) return process.env.RHEO_PGBOUNCER_BIN;
  return CANDIDATES.find((path) => existsSync(path)) ?? null;
}

export async function startThrowawayPgbouncer(options: ThrowawayPgbouncerOptions): Promise<ThrowawayPgbouncer> {
  const bin = findPgbouncer();
  if (!bin) throw new Error('rheo needs pgbouncer for its pooler tests and none was found; install it (Debian/Ubuntu: `apt-get install -y pgbouncer`)');
  const asRoot = userInfo().uid === 0;
  const dir = mkdtempSync(join(tmpdir(), 'rheo-pgbouncer-'));
  const owner = asRoot ? postgresUser() : null;
  const own = (path: string): void => {
    if (owner) chownSync(path, owner.uid, owner.gid);
  };
  const run = (args: string[]): string => {
    const command = asRoot ? 'runuser' : bin;
    const argv = asRoot ? ['-u', 'postgres', '--', bin, ...args] : args;
    return execFileSync(command, argv, { stdio: 'pipe', cwd: dir, encoding: 'utf8' });
  };
  own(dir);
  const pidFile = join(dir, 'pgbouncer.pid');
  let pid: number | null = null;
  const stop = (): void => {
    if (pid !== null) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // Already gone.
      }
      pid = null;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const users = options.users ?? ['postgres'];
    const port = await freePort();
    const authFile = join(dir, 'users.txt');
    // auth_type trust: loopback only, and PgBouncer still admits only the users listed here.
    writeFileSync(authFile, users.map((u) => `"${u}" ""\n`).join(''));
    const config = join(dir, 'pgbouncer.ini');
    writeFileSync(
      config,
      [
        '[databases]',
        `* = host=${options.target.host} port=${options.target.port}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'auth_type = trust',
        `auth_file = ${authFile}`,
        'pool_mode = transaction',
        `default_pool_size = ${options.poolSize ?? 40}`,
        'max_client_conn = 1000',
        // pg sends this one on every connection; PgBouncer refuses unknown startup parameters.
        'ignore_startup_parameters = extra_float_digits',
        `logfile = ${join(dir, 'pgbouncer.log')}`,
        `pidfile = ${pidFile}`,
        'log_connections = 0',
        'log_disconnections = 0',
        '',
      ].join('\n'),
    );
    for (const file of [authFile, config]) own(file);
    const version = run(['--version']).split('\n')[0]!.trim();
    run(['-d', '-q', config]);
    pid = await waitForPid(pidFile);
    await waitForPort(port);
    return {
      port,
      version,
      url: (database, user = 'postgres') => `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${encodeURIComponent(database)}`,
      stop,
    };
  } catch (error) {
    const log = existsSync(join(dir, 'pgbouncer.log')) ? readFileSync(join(dir, 'pgbouncer.log'), 'utf8').slice(-2000) : '';
    stop();
    const detail = error instanceof Error ? error.message : String(error);
    throw new Error(`could not start a throwaway PgBouncer from ${bin}: ${detail}${log ? `\n${log}` : ''}`, { cause: error });
  }
}

async function waitForPid(pidFile: string): Promise<number> {
  for (let i = 0; i < 200; i++) {
    if (existsSync(pidFile)) {
      const pid = Number(readFileSync(pidFile, 'utf8').trim());
      if (Number.isSafeInteger(pid) && pid > 0) return pid;
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`no pid file ${pidFile} after 5 s`);
}

async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`PgBouncer did not listen on port ${port} after 5 s`);
}
