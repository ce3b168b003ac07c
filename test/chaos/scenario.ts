import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pg from 'pg';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { redisBackend } from '../../src/backends/redis/redis-backend.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import type { AppenderArgs } from './appender-child.js';
import type { ChaosBackendKind } from './chaos-backend.js';
import { check, type CheckResult, type StoredPartition } from './checker.js';
import type { ChildBundle } from './child-bundle.js';
import { ChaosChild } from './children.js';
import { injectFault, type Fault, type FaultTarget } from './faults.js';
import { readRecords } from './records.js';
import type { WorkerArgs } from './worker-child.js';

export interface ScenarioSpec {
  name: string;
  /** The backend the scenario runs on (the server it needs); default `postgres`. */
  backend?: ChaosBackendKind;
  fault: Fault;
  partitions: number;
  workers: number;
  concurrency: number;
  leaseMs: number;
  handlerMs: number;
  appenders: number;
  /** Distinct event ids in all. */
  events: number;
  /** Every appender appends all ids (concurrent idempotent appends) instead of its own share. */
  overlap: boolean;
  batch: number;
  /** Total append rate the appenders aim at, so the appends span the fault window. */
  perSecond: number;
  /**
   * How long the group's lag may stay without shrinking, after the last
   * append, before the scenario fails as not drained. A slow drain on a
   * loaded machine is not a failure; a stalled one is.
   */
  drainTimeoutMs: number;
}

/** What a scenario needs of the database server: which backend, where it is and how to restart it. */
export interface ChaosServer {
  /** Default `postgres`. */
  backend?: ChaosBackendKind;
  url: string;
  restart(mode: 'fast' | 'immediate'): void | Promise<void>;
}

/** Where a scenario keeps its records, and the compiled child scripts it starts. */
export interface ScenarioEnvironment {
  workDir: string;
  children: ChildBundle;
}

export interface ScenarioResult extends CheckResult {
  name: string;
  /** Children that exited other than with code 0 or a SIGKILL the scenario sent. */
  crashes: string[];
  drained: boolean;
  faults: number;
  /** Append calls the appenders sent again after `ambiguous` or `backend_unavailable`. */
  appendRetries: number;
  seconds: number;
  eventsPerSecond: number;
  /** Zero lost, zero accepted stale settles, zero gaps and log errors, zero crashes, drained. */
  passed: boolean;
}

const RUNNER = 'rheo-chaos-runner';

/** RHEO_CHAOS_VERBOSE=1 prints each phase of each scenario to stderr. */
function progress(text: string): void {
  if (process.env.RHEO_CHAOS_VERBOSE) process.stderr.write(`  [${new Date().toISOString().slice(11, 23)}] ${text}\n`);
}

/**
 * Runs one scenario in a fresh schema (a fresh key prefix on Redis): workers consume while appenders
 * append and the fault strikes again and again; once the appenders are done
 * and the group has drained (lag 0) the workers are stopped with SIGTERM,
 * and the records of every child are checked against each other and the log.
 */
export async function runScenario(server: ChaosServer, spec: ScenarioSpec, env: ScenarioEnvironment): Promise<ScenarioResult> {
  const schema = `chaos_${spec.name.replace(/[^a-z0-9]/g, '_')}_${randomBytes(4).toString('hex')}`;
  const dir = join(env.workDir, schema);
  mkdirSync(dir, { recursive: true });
  const runner = await openRunner(server, schema);
  const rheo = runner.rheo;
  const stream = 'chaos';
  const group = 'workers';
  const children: ChaosChild[] = [];
  try {
    await rheo.migrate();
    await rheo.createStream(stream, { partitions: spec.partitions });
    await rheo.createGroup(stream, group, { maxAttempts: 100 });

    let workerCount = 0;
    const workers: ChaosChild[] = [];
    const startWorker = (): ChaosChild => {
      const consumerId = `worker-${++workerCount}`;
      const args: WorkerArgs = {
        backend: server.backend,
        url: server.url,
        schema,
        stream,
        group,
        records: join(dir, `${consumerId}.jsonl`),
        consumerId,
        concurrency: spec.concurrency,
        leaseMs: spec.leaseMs,
        handlerMs: spec.handlerMs,
      };
      const child = new ChaosChild(consumerId, env.children.worker, args);
      children.push(child);
      workers.push(child);
      return child;
    };
    for (let i = 0; i < spec.workers; i++) startWorker();
    const appenders = Array.from({ length: spec.appenders }, (_, i) => {
      const share = spec.overlap ? spec.events : Math.ceil(spec.events / spec.appenders);
      const from = spec.overlap ? 0 : i * share;
      const args: AppenderArgs = {
        backend: server.backend,
        url: server.url,
        schema,
        stream,
        records: join(dir, `appender-${i + 1}.jsonl`),
        name: `appender-${i + 1}`,
        prefix: 'e',
        from,
        count: Math.max(0, Math.min(share, spec.events - from)),
        batch: spec.batch,
        perSecond: spec.overlap ? spec.perSecond : spec.perSecond / spec.appenders,
      };
      const child = new ChaosChild(args.name, env.children.appender, args);
      children.push(child);
      return child;
    });
    await Promise.all(children.map((c) => c.ready));
    const started = Date.now();
    progress('children ready');
    for (const appender of appenders) appender.go();
    const appending = Promise.all(appenders.map((a) => a.exited));

    const target: FaultTarget = {
      server,
      dropConnections: runner.dropConnections,
      liveWorkers: () => workers.filter((w) => w.consuming),
      startWorker,
    };
    let faults = 0;
    let appendersDone = false;
    void appending.then(() => (appendersDone = true));
    if (spec.fault.kind !== 'none') {
      // At least one fault, then one per period while appends are still coming in.
      do {
        await Promise.race([delay(spec.fault.everyMs), appending]);
        if (faults > 0 && appendersDone) break;
        if (appendersDone && Date.now() - started > spec.drainTimeoutMs) break;
        if (await injectFault(spec.fault, target)) faults++;
      } while (!appendersDone || faults === 0);
    }
    await appending;

    progress(`appended after ${Date.now() - started} ms, ${faults} faults`);
    const drained = await waitForDrain(rheo, stream, group, spec.drainTimeoutMs, () => workers.some((w) => w.running));
    const seconds = (Date.now() - started) / 1000;
    progress(`drained=${drained} after ${Date.now() - started} ms`);
    await stopWorkers(workers);
    progress(`workers stopped after ${Date.now() - started} ms`);

    const result = check({
      appended: appenders.flatMap((_, i) => readRecords(join(dir, `appender-${i + 1}.jsonl`))),
      workers: workers.flatMap((w) => readRecords(join(dir, `${w.name}.jsonl`))),
      log: await readLog(rheo, stream, spec.partitions),
      deadLetterIds: (await rheo.deadLetters(stream, group, { limit: 10_000 })).map((d) => d.event.id),
    });
    const crashes = children.map((c) => c.crash()).filter((c): c is string => c !== null);
    const passed =
      drained && result.lost === 0 && result.staleAccepted === 0 && result.gaps === 0 && result.logErrors === 0 && crashes.length === 0;
    return {
      ...result,
      name: spec.name,
      crashes,
      drained,
      faults,
      appendRetries: appenders.reduce((n, a) => n + retriesOf(a.stdout), 0),
      seconds,
      eventsPerSecond: result.handled / seconds,
      passed,
    };
  } finally {
    for (const child of children) {
      child.signal('SIGCONT');
      child.signal('SIGKILL');
    }
    await Promise.all(children.map((c) => c.exited));
    await runner.close();
  }
}

/** The runner's own view of the scenario's backend: its rheo, the connection fault, and clean-up. */
interface Runner {
  rheo: Rheo;
  dropConnections(): Promise<boolean>;
  close(): Promise<void>;
}

async function openRunner(server: ChaosServer, namespace: string): Promise<Runner> {
  if (server.backend === 'redis') {
    // One connection, named so that CLIENT KILL spares it; the children's clients are all named `rheo`.
    const client = new Redis(server.url, { connectionName: RUNNER, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    // The runner's own connection dies in the restarts it causes, and reconnects.
    client.on('error', () => {});
    await client.connect();
    const rheo = createRheo({ backend: redisBackend({ client }, { prefix: namespace, notify: false }) });
    return {
      rheo,
      dropConnections: async () => {
        const list = (await client.call('client', 'list')) as string;
        const victims = list
          .split('\n')
          .map((line) => Object.fromEntries(line.trim().split(' ').map((f) => [f.slice(0, f.indexOf('=')), f.slice(f.indexOf('=') + 1)])))
          .filter((c) => c.name === 'rheo' && c.id !== undefined);
        let killed = 0;
        for (const c of victims) killed += Number(await client.call('client', 'kill', 'id', c.id!));
        return killed > 0;
      },
      // The server is the scenario's (npm run chaos) or the test file's; the keys go with it.
      close: async () => {
        await rheo.close();
        client.disconnect();
      },
    };
  }
  const pool = new pg.Pool({ connectionString: server.url, max: 3, application_name: RUNNER });
  // The runner's own connections die in the restarts and terminations it causes.
  pool.on('error', () => {});
  const rheo = createRheo({ backend: postgresBackend({ pool }, { schema: namespace, notify: false }) });
  return {
    rheo,
    dropConnections: () =>
      pool
        .query<{ n: number }>(
          `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
              AND backend_type = 'client backend' AND application_name <> $1`,
          [RUNNER],
        )
        .then((r) => (r.rows[0]?.n ?? 0) > 0),
    close: async () => {
      await pool.query(`DROP SCHEMA IF EXISTS "${namespace}" CASCADE`).catch(() => undefined);
      await rheo.close();
      await pool.end();
    },
  };
}

/**
 * Polls lag until it is 0; a failed call (the server may be restarting) is
 * retried. Gives up when the lag has not shrunk for `stallMs`, or at once
 * when no worker is left (they all crashed).
 */
async function waitForDrain(rheo: Rheo, stream: string, group: string, stallMs: number, anyWorker: () => boolean): Promise<boolean> {
  let lowest = Infinity;
  let deadline = Date.now() + stallMs;
  while (Date.now() < deadline && anyWorker()) {
    const lag = await rheo.lag(stream, group).catch(() => null);
    if (lag && lag.lag === 0) return true;
    if (lag && lag.lag < lowest) {
      lowest = lag.lag;
      deadline = Date.now() + stallMs;
    }
    await delay(100);
  }
  return false;
}

/** SIGTERM: each worker drains and exits 0. One that has not exited after 30 s is killed, and counts as a crash. */
async function stopWorkers(workers: ChaosChild[]): Promise<void> {
  const live = workers.filter((w) => w.running);
  await Promise.all(
    live.map(async (worker) => {
      await worker.ready;
      worker.signal('SIGTERM');
      const timeout = new AbortController();
      const exited = await Promise.race([
        worker.exited.then(() => true),
        delay(30_000, false, { signal: timeout.signal }).catch(() => true),
      ]);
      timeout.abort();
      if (!exited) worker.process.kill('SIGKILL');
    }),
  );
}

/** The appender's last stdout line is `{ "retries": n }`. */
function retriesOf(stdout: string): number {
  const last = stdout.trim().split('\n').pop() ?? '';
  try {
    return (JSON.parse(last) as { retries?: number }).retries ?? 0;
  } catch {
    return 0;
  }
}

async function readLog(rheo: Rheo, stream: string, partitions: number): Promise<StoredPartition[]> {
  const log: StoredPartition[] = [];
  for (let partition = 0; partition < partitions; partition++) {
    const events: StoredPartition['events'] = [];
    for (let after = 0; ; ) {
      const page = await rheo.read(stream, { partition, after, limit: 5000 });
      if (page.length === 0) break;
      for (const e of page) events.push({ id: e.id, sequence: e.sequence });
      after = page[page.length - 1]!.sequence;
    }
    log.push({ partition, events });
  }
  return log;
}
