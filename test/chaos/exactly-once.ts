import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { createRheo } from '../../src/rheo.js';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.js';

const CHILD = fileURLToPath(new URL('../support/exactly-once-child.ts', import.meta.url));

export interface ExactlyOnceOptions {
  url: string;
  schema: string;
  events: number;
  workers: number;
  /**
   * How the workers share the group: competing consumers (`leases`, the
   * default) or partition ownership (`partitions`), where the offset commit
   * joins the handler's transaction.
   */
  assignment?: 'leases' | 'partitions';
  /** Partitions of the stream. Default 4. */
  partitions?: number;
  /** Lease length (or, with partitions, session length) of the workers: a killed worker's work comes back after this. */
  leaseMs: number;
  /** Seeded choice of faults, so a run can be repeated. */
  seed: number;
  /** Mean time between two faults (a SIGKILL or a connection termination). */
  faultEveryMs: number;
  /** Upper bound on the run, after which it reports what it has. */
  timeoutMs: number;
  /**
   * The workers connect through a fault proxy (test/support/fault-proxy.ts)
   * that, per request, loses its answer after the server ran it (COMMITs
   * at `commit`, others at `answer`) or resets the connection first
   * (`reset`), at random from the seed.
   */
  proxy?: { answer: number; commit: number; reset: number };
  /**
   * The workers reach `url` through this PgBouncer (transaction pooling)
   * with `pooler: 'transaction'`, LISTEN going straight to `url`.
   */
  pgbouncerUrl?: string;
}

export interface ExactlyOnceResult {
  events: number;
  /** Answers the fault proxy lost (COMMITs among them) and connections it reset; 0 without it. */
  droppedAnswers: number;
  droppedCommits: number;
  proxyResets: number;
  /** Rows in the user table, distinct event ids among them, ids with more than one row, appended ids with none. */
  rows: number;
  distinct: number;
  duplicated: number;
  missing: number;
  lag: number;
  kills: number;
  terminations: number;
  seconds: number;
}

/**
 * Exactly-once effects under faults: `events` events consumed with
 * `consume({ transaction: true })` (competing consumers or, with
 * `assignment: 'partitions'`, members of partition ownership whose
 * partitions move on every kill) by `workers` child processes, each
 * handler inserting one row per event id into a table without a unique
 * constraint. Meanwhile workers are SIGKILLed (and replaced) and their
 * connections terminated with pg_terminate_backend, at random. At the end
 * every event id must appear exactly once and the group's lag be 0. With
 * `proxy`, the workers' answers (COMMITs above all) are also lost after the
 * server ran the statement, and connections reset; with `pgbouncerUrl`, the
 * workers go through PgBouncer in transaction pooling mode.
 */
export async function runExactlyOnce(options: ExactlyOnceOptions): Promise<ExactlyOnceResult> {
  const started = Date.now();
  let random = options.seed >>> 0;
  const next = (): number => {
    random = (Math.imul(random, 1664525) + 1013904223) >>> 0;
    return random / 2 ** 32;
  };
  const admin = new pg.Pool({ connectionString: options.url, max: 3 });
  admin.on('error', () => {});
  const rheo = createRheo({ backend: postgresBackend({ pool: admin }, { schema: options.schema }) });
  const children = new Set<ChildProcess>();
  let kills = 0;
  let terminations = 0;
  let proxy: FaultProxy | null = null;
  try {
    let workerUrl = options.pgbouncerUrl ?? options.url;
    if (options.proxy) {
      const target = new URL(workerUrl);
      proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
      proxy.chaos({ ...options.proxy, random: next });
      workerUrl = proxy.url(workerUrl);
    }
    const pooler = options.pgbouncerUrl ? ['transaction', options.url] : ['none'];
    await rheo.migrate();
    await admin.query(`CREATE TABLE "${options.schema}".effects (event_id text NOT NULL, attempt int NOT NULL, pid int NOT NULL)`);
    await rheo.createStream('work', { partitions: options.partitions ?? 4 });
    await rheo.createGroup('work', 'effects');
    const ids: string[] = [];
    for (let i = 0; i < options.events; i += 1000) {
      const batch = await rheo.appendBatch(
        'work',
        Array.from({ length: Math.min(1000, options.events - i) }, (_, j) => ({ key: `k-${(i + j) % 97}`, payload: { n: i + j } })),
      );
      ids.push(...batch.map((e) => e.id));
    }
    const spawnWorker = (): void => {
      const args = [workerUrl, options.schema, 'work', 'effects', String(options.leaseMs), options.assignment ?? 'leases', ...pooler];
      const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], {
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      children.add(child);
      child.once('exit', () => children.delete(child));
    };
    for (let i = 0; i < options.workers; i++) spawnWorker();
    let lag = options.events;
    let nextFault = Date.now() + options.faultEveryMs * (0.5 + next());
    // Faults while there is work left; then let the survivors (and expiring leases) finish.
    // The first fault is a SIGKILL as soon as the workers have made progress,
    // polled closely: a fast drain can otherwise finish before the first timed
    // fault, and a run without faults proves nothing.
    while (Date.now() - started < options.timeoutMs) {
      const first = kills + terminations === 0;
      await new Promise((resolve) => setTimeout(resolve, first ? 10 : 200));
      lag = (await rheo.lag('work', 'effects')).lag;
      if (lag === 0) break;
      if (first ? lag === options.events : lag < options.events * 0.1 || Date.now() < nextFault) continue;
      nextFault = Date.now() + options.faultEveryMs * (0.5 + next());
      if (first || next() < 0.5) {
        const victims = [...children];
        const victim = victims[Math.floor(next() * victims.length)];
        if (victim) {
          victim.kill('SIGKILL');
          kills++;
          spawnWorker();
        }
      } else {
        const { rows } = await admin.query<{ n: number }>(
          `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
           WHERE application_name = 'rheo-exactly-once' AND pid IN (
             SELECT pid FROM pg_stat_activity WHERE application_name = 'rheo-exactly-once' ORDER BY random() LIMIT 2)`,
        );
        terminations += rows[0]?.n ?? 0;
      }
    }
    const [counts] = (
      await admin.query<{ rows: number; distinct: number; duplicated: number; missing: number }>(
        `SELECT (SELECT count(*)::int FROM "${options.schema}".effects) AS rows,
                (SELECT count(DISTINCT event_id)::int FROM "${options.schema}".effects) AS distinct,
                (SELECT count(*)::int FROM (SELECT event_id FROM "${options.schema}".effects GROUP BY event_id HAVING count(*) > 1) d) AS duplicated,
                (SELECT count(*)::int FROM unnest($1::text[]) AS a(id) WHERE NOT EXISTS (SELECT 1 FROM "${options.schema}".effects x WHERE x.event_id = a.id)) AS missing`,
        [ids],
      )
    ).rows;
    return {
      events: options.events,
      rows: counts!.rows,
      distinct: counts!.distinct,
      duplicated: counts!.duplicated,
      missing: counts!.missing,
      lag,
      kills,
      terminations,
      droppedAnswers: proxy?.stats.droppedAnswers ?? 0,
      droppedCommits: proxy?.stats.droppedCommits ?? 0,
      proxyResets: proxy?.stats.resets ?? 0,
      seconds: (Date.now() - started) / 1000,
    };
  } finally {
    for (const child of children) child.kill('SIGKILL');
    await proxy?.close();
    await rheo.close();
    await admin.end();
  }
}
