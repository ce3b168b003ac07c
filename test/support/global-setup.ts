import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Connection string of the test database (throwaway cluster or RHEO_TEST_DATABASE_URL). */
    rheoDatabaseUrl: string;
  }
}

const DATABASE = 'rheo_test';

/**
 * vitest globalSetup: provides a PostgreSQL database to every test worker.
 * With RHEO_TEST_DATABASE_URL set, that database is used as is. Otherwise a
 * throwaway cluster is initialised in a temp dir (as the `postgres` OS user
 * when running as root), started on a free loopback port with fsync off, and
 * stopped and deleted at teardown.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const external = process.env.RHEO_TEST_DATABASE_URL;
  if (external) {
    project.provide('rheoDatabaseUrl', external);
    return async () => {};
  }
  const cluster = await startCluster();
  try {
    await createDatabase(cluster.port);
  } catch (error) {
    cluster.stop();
    throw error;
  }
  const url = `postgres://postgres@127.0.0.1:${cluster.port}/${DATABASE}`;
  project.provide('rheoDatabaseUrl', url);
  process.env.RHEO_TEST_DATABASE_URL = url;
  return async () => {
    cluster.stop();
  };
}

function findBinDir(): string {
  const candidates: string[] = [];
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
  const found = candidates.find((dir) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl')) && existsSync(join(dir, 'postgres')));
  if (!found) {
    throw new Error(
      'rheo tests need PostgreSQL server binaries (initdb, pg_ctl, postgres) and none were found in ' +
        '/usr/lib/postgresql/*/bin, `pg_config --bindir` or PATH. Install them (Debian/Ubuntu: ' +
        '`apt-get install -y postgresql`) or set RHEO_TEST_DATABASE_URL to an existing database.',
    );
  }
  return found;
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

interface Cluster {
  port: number;
  stop(): void;
}

async function startCluster(): Promise<Cluster> {
  const bin = findBinDir();
  const asRoot = userInfo().uid === 0;
  const dir = mkdtempSync(join(tmpdir(), 'rheo-pg-'));
  const dataDir = join(dir, 'data');
  const logFile = join(dir, 'postgres.log');
  const run = (tool: string, args: string[]) => {
    const command = asRoot ? 'runuser' : join(bin, tool);
    const argv = asRoot ? ['-u', 'postgres', '--', join(bin, tool), ...args] : args;
    execFileSync(command, argv, { stdio: 'pipe', cwd: dir });
  };
  if (asRoot) {
    const { uid, gid } = postgresUser();
    chownSync(dir, uid, gid);
    writeFileSync(logFile, '');
    chownSync(logFile, uid, gid);
  }
  let started = false;
  const stop = () => {
    if (started) {
      try {
        run('pg_ctl', ['stop', '-D', dataDir, '-m', 'fast', '-w']);
      } catch {
        // Already stopped; the directory goes anyway.
      }
      started = false;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    run('initdb', ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-instructions']);
    const port = await freePort();
    // fsync off: this cluster is thrown away; benchmarks use default durability elsewhere.
    const serverOptions = `-F -k ${dir} -h 127.0.0.1 -p ${port} -c max_connections=300 -c shared_buffers=64MB`;
    run('pg_ctl', ['start', '-w', '-t', '60', '-D', dataDir, '-l', logFile, '-o', serverOptions]);
    started = true;
    return { port, stop };
  } catch (error) {
    stop();
    const detail = error instanceof Error ? error.message : String(error);
    throw new Error(`could not start a throwaway PostgreSQL cluster from ${bin}: ${detail}`, { cause: error });
  }
}

function postgresUser(): { uid: number; gid: number } {
  const out = execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim();
  const gid = execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim();
  return { uid: Number(out), gid: Number(gid) };
}

async function createDatabase(port: number): Promise<void> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${DATABASE}`);
  } finally {
    await client.end();
  }
}
