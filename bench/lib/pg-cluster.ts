import { spawn, spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A throwaway PostgreSQL cluster for one bench run. Unlike a test cluster it
 * keeps PostgreSQL's default durability (fsync, synchronous_commit and
 * full_page_writes stay on): the point is to measure what users get. It
 * listens on 127.0.0.1 only, on a free port, with trust auth limited to
 * loopback, and is removed (stop + data directory) by `stop()`.
 */
export interface PgCluster {
  /** Superuser connection string to the `postgres` maintenance database. */
  readonly connectionString: string;
  readonly version: string;
  /** Connection string for another database on the same cluster. */
  urlFor(database: string): string;
  stop(): Promise<void>;
}

const DEFAULT_BIN_DIR = '/usr/lib/postgresql/15/bin';

export async function startPgCluster(options: { binDir?: string } = {}): Promise<PgCluster> {
  const binDir = options.binDir ?? process.env.RHEO_BENCH_PG_BIN ?? DEFAULT_BIN_DIR;
  const asRoot = process.getuid?.() === 0;
  const root = mkdtempSync(join(tmpdir(), 'rheo-bench-pg-'));
  const dataDir = join(root, 'data');
  const socketDir = root;
  if (asRoot) {
    const uid = Number(runChecked('id', ['-u', 'postgres']).trim());
    const gid = Number(runChecked('id', ['-g', 'postgres']).trim());
    chownSync(root, uid, gid);
  }
  // Run a PostgreSQL binary as the postgres OS user when we are root (initdb
  // and postgres refuse to run as root).
  const cmd = (bin: string, args: string[]): [string, string[]] =>
    asRoot ? ['runuser', ['-u', 'postgres', '--', join(binDir, bin), ...args]] : [join(binDir, bin), args];

  const [initCmd, initArgs] = cmd('initdb', [
    '-D',
    dataDir,
    '-U',
    'postgres',
    '--auth=trust',
    '--encoding=UTF8',
    '--locale=C',
    '--no-instructions',
  ]);
  runChecked(initCmd, initArgs);
  const version = runChecked(...cmd('postgres', ['--version'])).trim();

  // Loopback only; trust is acceptable because nothing but 127.0.0.1 can reach it.
  writeFileSync(
    join(dataDir, 'pg_hba.conf'),
    'local all all trust\nhost all all 127.0.0.1/32 trust\n',
  );
  if (asRoot) {
    const uid = Number(runChecked('id', ['-u', 'postgres']).trim());
    const gid = Number(runChecked('id', ['-g', 'postgres']).trim());
    chownSync(join(dataDir, 'pg_hba.conf'), uid, gid);
  }

  const port = await freePort();
  const logFile = join(root, 'postgres.log');
  const [ctlCmd, ctlArgs] = cmd('pg_ctl', [
    '-D',
    dataDir,
    '-l',
    logFile,
    '-w',
    '-t',
    '60',
    '-o',
    [
      `-p ${port}`,
      `-c listen_addresses=127.0.0.1`,
      `-c unix_socket_directories=${socketDir}`,
      // Room for three peers' pools plus rheo's in one scenario.
      `-c max_connections=200`,
      // The bench loads a million-row log; bigger WAL segments between
      // checkpoints keep the load from measuring checkpoint storms. Durability
      // settings are untouched.
      `-c max_wal_size=4GB`,
    ].join(' '),
    'start',
  ]);
  runChecked(ctlCmd, ctlArgs);

  const connectionString = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let stopped = false;
  return {
    connectionString,
    version,
    urlFor: (database: string) => `postgres://postgres@127.0.0.1:${port}/${encodeURIComponent(database)}`,
    async stop() {
      if (stopped) return;
      stopped = true;
      const [stopCmd, stopArgs] = cmd('pg_ctl', ['-D', dataDir, '-m', 'fast', '-w', 'stop']);
      await new Promise<void>((resolve) => {
        const child = spawn(stopCmd, stopArgs, { stdio: 'ignore' });
        child.on('exit', () => resolve());
        child.on('error', () => resolve());
      });
      rmSync(root, { recursive: true, force: true });
    },
  };
}

function runChecked(command: string, args: string[], options: SpawnSyncOptions = {}): string {
  const result = spawnSync(command, args, { encoding: 'utf8', ...options });
  if (result.error) throw result.error;
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited with ${result.status}: ${String(result.stderr)}`);
  }
  return String(result.stdout);
}

function freePort(): Promise<number> {
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
