import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/**
 * A throwaway PostgreSQL cluster for the test suite and the benchmarks: initdb
 * into a temp dir (as the `postgres` OS user when running as root, since
 * initdb and postgres refuse root), start on a free port on 127.0.0.1 only
 * with trust auth limited to loopback, and remove everything on `stop()`.
 */
export interface ThrowawayPostgres {
  readonly port: number;
  /** `postgres --version` of the binaries used. */
  readonly version: string;
  /** Superuser connection string to `database` (default `postgres`). */
  url(database?: string): string;
  /**
   * `pg_ctl restart` with the given shutdown mode, waiting until the server
   * accepts connections again on the same port. `immediate` ends every server
   * process without a checkpoint, so the restart runs crash recovery: the
   * chaos suite uses it to test what survives a database crash.
   */
  restart(mode: 'fast' | 'immediate'): void;
  /** Stops the server and deletes its directory. Idempotent. */
  stop(): void;
}

export interface ThrowawayPostgresOptions {
  /** `false` starts with fsync off (tests); benchmarks keep the default durability. */
  durable: boolean;
  /** Extra `-c name=value` server settings. */
  settings?: string[];
  /** Prefix of the temp directory. */
  label?: string;
}

export async function startThrowawayPostgres(options: ThrowawayPostgresOptions): Promise<ThrowawayPostgres> {
  const bin = findBinDir();
  const asRoot = userInfo().uid === 0;
  const dir = mkdtempSync(join(tmpdir(), `${options.label ?? 'rheo-pg'}-`));
  const dataDir = join(dir, 'data');
  const logFile = join(dir, 'postgres.log');
  const run = (tool: string, args: string[]): string => {
    const command = asRoot ? 'runuser' : join(bin, tool);
    const argv = asRoot ? ['-u', 'postgres', '--', join(bin, tool), ...args] : args;
    return execFileSync(command, argv, { stdio: 'pipe', cwd: dir, encoding: 'utf8' });
  };
  const owner = asRoot ? postgresUser() : null;
  const own = (path: string): void => {
    if (owner) chownSync(path, owner.uid, owner.gid);
  };
  own(dir);
  let started = false;
  const stop = (): void => {
    if (started) {
      started = false;
      try {
        run('pg_ctl', ['stop', '-D', dataDir, '-m', 'fast', '-w']);
      } catch {
        // Already stopped; the directory goes anyway.
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    run('initdb', ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-instructions']);
    // Loopback only: trust is acceptable because nothing but this machine can connect.
    writeFileSync(join(dataDir, 'pg_hba.conf'), 'local all all trust\nhost all all 127.0.0.1/32 trust\n');
    own(join(dataDir, 'pg_hba.conf'));
    writeFileSync(logFile, '');
    own(logFile);
    const version = run('postgres', ['--version']).trim();
    const port = await freePort();
    const serverOptions = [
      ...(options.durable ? [] : ['-F']),
      `-k ${dir}`,
      '-h 127.0.0.1',
      `-p ${port}`,
      ...(options.settings ?? []).map((s) => `-c ${s}`),
    ].join(' ');
    run('pg_ctl', ['start', '-w', '-t', '60', '-D', dataDir, '-l', logFile, '-o', serverOptions]);
    started = true;
    return {
      port,
      version,
      url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${encodeURIComponent(database)}`,
      restart: (mode) => {
        // The options are given again: `pg_ctl restart` would otherwise reuse postmaster.opts, which an immediate stop may leave stale.
        run('pg_ctl', ['restart', '-w', '-t', '60', '-D', dataDir, '-l', logFile, '-m', mode, '-o', serverOptions]);
      },
      stop,
    };
  } catch (error) {
    stop();
    const detail = error instanceof Error ? error.message : String(error);
    throw new Error(`could not start a throwaway PostgreSQL cluster from ${bin}: ${detail}`, { cause: error });
  }
}

function findBinDir(): string {
  const candidates: string[] = [];
  if (process.env.RHEO_PG_BIN) candidates.push(process.env.RHEO_PG_BIN);
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const v of versions) candidates.push(join(root, v, 'bin'));
  }
  const pgConfig = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  if (pgConfig.status === 0 && pgConfig.stdout.trim()) candidates.push(pgConfig.stdout.trim());
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir) candidates.push(dir);
  const found = candidates.find(
    (dir) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl')) && existsSync(join(dir, 'postgres')),
  );
  if (!found) {
    throw new Error(
      'rheo needs PostgreSQL server binaries (initdb, pg_ctl, postgres) and none were found in ' +
        'RHEO_PG_BIN, /usr/lib/postgresql/*/bin, `pg_config --bindir` or PATH. Install them (Debian/Ubuntu: ' +
        '`apt-get install -y postgresql`) or give a connection string (RHEO_TEST_DATABASE_URL / RHEO_BENCH_DATABASE_URL).',
    );
  }
  return found;
}

/** A port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** The `postgres` OS user, which runs the throwaway servers when this process is root. */
export function postgresUser(): { uid: number; gid: number } {
  const uid = execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim();
  const gid = execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim();
  return { uid: Number(uid), gid: Number(gid) };
}
