import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Throwaway `redis-server` processes for the tests and the benchmarks: one
 * server, or a three-master Redis Cluster made with `redis-cli --cluster
 * create`, on free loopback ports, with their files in a temp dir removed on
 * `stop()`. Debian's `redis-server` package provides both binaries.
 */
export interface ThrowawayRedis {
  /** `redis://127.0.0.1:port` of each server (one, or the cluster's masters). */
  readonly urls: string[];
  readonly ports: number[];
  readonly version: string;
  /** SIGKILL one server (index into `ports`) and start it again on the same port and files; resolves once it answers PING. */
  restart(index?: number): Promise<void>;
  /** SIGKILL one server; `start` brings it back. */
  kill(index?: number): void;
  start(index?: number): Promise<void>;
  /** Stops every server and deletes the temp dir. Idempotent. */
  stop(): void;
}

export interface ThrowawayRedisOptions {
  /** Extra `--name value` settings, e.g. `['--appendonly', 'yes']`. Default: no persistence. */
  settings?: string[];
  label?: string;
}

export function redisServerAvailable(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    // A cluster node also listens on port + 10000 (the cluster bus).
    if (port < 55_000) return port;
  }
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let reply = '';
    socket.setTimeout(1000);
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) {
        socket.destroy();
        resolve(reply.startsWith('+PONG'));
      }
    });
    socket.on('error', () => resolve(false));
    socket.on('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

async function waitFor(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function startServers(count: number, cluster: boolean, options: ThrowawayRedisOptions): Promise<ThrowawayRedis> {
  const version = spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout.trim();
  if (!version) throw new Error('redis-server not found on PATH (Debian: apt-get install -y redis-server)');
  const dir = mkdtempSync(join(tmpdir(), `${options.label ?? 'rheo-redis'}-`));
  const ports: number[] = [];
  for (let i = 0; i < count; i++) {
    let port = await freePort();
    while (ports.includes(port)) port = await freePort();
    ports.push(port);
  }
  const children: (ChildProcess | null)[] = ports.map(() => null);
  const args = (i: number) => {
    const port = ports[i]!;
    const base = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'];
    const clusterArgs = cluster
      ? ['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '2000']
      : [];
    return [...base, '--dbfilename', `dump-${port}.rdb`, '--appendfilename', `aof-${port}.aof`, ...clusterArgs, ...(options.settings ?? [])];
  };
  const start = async (i: number) => {
    const child = spawn('redis-server', args(i), { stdio: 'ignore' });
    child.on('error', () => {});
    children[i] = child;
    await waitFor(() => answers(ports[i]!), `redis-server on port ${ports[i]}`);
  };
  const kill = (i: number) => {
    const child = children[i];
    children[i] = null;
    if (child && child.exitCode === null) child.kill('SIGKILL');
  };
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    for (let i = 0; i < count; i++) kill(i);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < count; i++) await start(i);
    if (cluster) {
      const made = spawnSync(
        'redis-cli',
        ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
        { encoding: 'utf8' },
      );
      if (made.status !== 0) throw new Error(`redis-cli --cluster create failed: ${made.stdout}${made.stderr}`);
      await waitFor(
        () =>
          ports.every((p) => {
            const info = spawnSync('redis-cli', ['-p', String(p), 'cluster', 'info'], { encoding: 'utf8' }).stdout;
            return info.includes('cluster_state:ok');
          }),
        'the cluster to agree on its slots',
      );
    }
  } catch (error) {
    stop();
    throw error;
  }
  const onExit = () => stop();
  process.once('exit', onExit);
  return {
    urls: ports.map((p) => `redis://127.0.0.1:${p}`),
    ports,
    version,
    kill: (i = 0) => kill(i),
    start: (i = 0) => start(i),
    restart: async (i = 0) => {
      kill(i);
      await start(i);
    },
    stop: () => {
      process.removeListener('exit', onExit);
      stop();
    },
  };
}

export function startThrowawayRedis(options: ThrowawayRedisOptions = {}): Promise<ThrowawayRedis> {
  return startServers(1, false, options);
}

export function startThrowawayRedisCluster(options: ThrowawayRedisOptions = {}): Promise<ThrowawayRedis> {
  return startServers(3, true, options);
}
