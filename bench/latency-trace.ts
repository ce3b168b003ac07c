/**
 * `npm run bench:trace`: where the idle latency goes, step by step, from an
 * append call to its handler's start, on PostgreSQL and Redis, in both
 * consumption modes (competing `rheo.consume` and `assignment: 'partitions'`).
 *
 *   npm run bench:trace                 # 100 appends per case
 *   npm run bench:trace -- --count=300 --only=postgres
 *
 * The appender and the consumer are separate rheo instances (separate pools
 * and connections, as two processes would be), so the consumer learns of an
 * append only through the store: PostgreSQL's NOTIFY on its LISTEN
 * connection, Redis pub/sub on its subscriber connection, or (an idle
 * consumer on one Redis server) the claim or read it sent before the
 * append, waiting in Redis (a blocking fetch: those cases have no wake-up
 * and no claim-sent step). Nothing in the library is changed: the backends'
 * own methods are wrapped on the instance (append, fetch, fetchAfterAppend,
 * readOwned, readOwnedAfterAppend, waitForAppend), and the notification is seen by
 * a listener added first on the backend's own LISTEN / subscriber connection
 * (given through `listenClient` and the borrowed ioredis client's
 * `duplicate`). Each step is timed with process.hrtime from the append call,
 * and the table shows the median over the appends of each case.
 *
 * It starts a throwaway PostgreSQL 15 (default durability, as the bench) and
 * a throwaway redis-server (appendonly yes, appendfsync everysec), and
 * removes both at the end.
 */
import { Redis } from 'ioredis';
import pg from 'pg';

import type { Backend } from '../src/core/backend.js';
import type { Lease, RheoEvent } from '../src/core/types.js';
import { createRheo, type Rheo } from '../src/index.js';
import { postgresBackend } from '../src/postgres.js';
import { redisBackend } from '../src/redis.js';
import { startThrowawayPostgres } from '../scripts/throwaway-postgres.js';
import { startThrowawayRedis } from '../scripts/throwaway-redis.js';
import { idleConsumer, type ConsumeMode } from './lib/rheo-setup.js';
import { median, sleep, waitUntil } from './lib/stats.js';
import { latencyGapMs } from './lib/workload.js';

type Mode = ConsumeMode;
type Kind = 'postgres' | 'redis';

/** The steps, in the order they happen for one append. */
const STEPS = [
  'append returned',
  'notification received',
  'consumer woken (waitForAppend resolved)',
  'claim / read sent',
  'claim / read answered',
  'handler start',
] as const;
type Step = (typeof STEPS)[number];

/** µs since the process started: process.hrtime, the clock every step is read on. */
function micros(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** Per append (by its number n): when each step happened, in µs. */
class Trace {
  readonly sentAt = new Map<number, number>();
  readonly steps = new Map<number, Partial<Record<Step, number>>>();
  /** Times the consumer's connection received a notification, in order. */
  readonly notifications: number[] = [];
  /** The last time the consumer's wait for an append resolved woken. */
  lastWake = 0;

  mark(n: number, step: Step, at: number): void {
    let s = this.steps.get(n);
    if (!s) this.steps.set(n, (s = {}));
    s[step] ??= at;
  }

  /** Median µs from the append call to each step, over the appends that reached the handler. */
  table(): Array<{ step: Step; us: number; samples: number }> {
    return STEPS.map((step) => {
      const values: number[] = [];
      for (const [n, sent] of this.sentAt) {
        const s = this.steps.get(n);
        if (!s?.['handler start']) continue;
        let at = s[step];
        if (step === 'notification received') at = this.notifications.find((t) => t >= sent);
        if (at !== undefined && at >= sent) values.push(at - sent);
      }
      return { step, us: values.length > 0 ? median(values) : Number.NaN, samples: values.length };
    });
  }
}

/**
 * Wraps the consumer's backend: the claim (fetch) or the owned read, and the
 * append wait. `n` is read from each event's payload.
 */
function instrumentConsumer(backend: Backend, trace: Trace): void {
  const numberOf = (event: RheoEvent): number | null => {
    const n = (event.payload as { n?: unknown } | null)?.n;
    return typeof n === 'number' ? n : null;
  };
  /** Stamps the claim or read that brought these events, and the wake that preceded it. */
  const stamp = (events: RheoEvent[], sent: number, wake: number, answered: number): void => {
    for (const event of events) {
      const n = numberOf(event);
      if (n === null) continue;
      if (wake > 0) trace.mark(n, 'consumer woken (waitForAppend resolved)', wake);
      trace.mark(n, 'claim / read sent', sent);
      trace.mark(n, 'claim / read answered', answered);
    }
  };
  const fetch = backend.fetch.bind(backend);
  backend.fetch = async (stream, group, request) => {
    const sent = micros();
    const wake = trace.lastWake;
    const leases: Lease[] = await fetch(stream, group, request);
    stamp(leases.map((lease) => lease.event), sent, wake, micros());
    return leases;
  };
  // A blocking fetch (Redis, one server) sent its claim before the append: only its answer is a step after it.
  const fetchAfterAppend = backend.fetchAfterAppend?.bind(backend);
  if (fetchAfterAppend) {
    backend.fetchAfterAppend = async (stream, group, request, timeoutMs, signal) => {
      const got = await fetchAfterAppend(stream, group, request, timeoutMs, signal);
      const answered = micros();
      for (const lease of got?.leases ?? []) {
        const n = numberOf(lease.event);
        if (n !== null) trace.mark(n, 'claim / read answered', answered);
      }
      return got;
    };
  }
  const readOwnedAfterAppend = backend.readOwnedAfterAppend?.bind(backend);
  if (readOwnedAfterAppend) {
    backend.readOwnedAfterAppend = async (fence, after, limit, maxBytes, timeoutMs, signal) => {
      const got = await readOwnedAfterAppend(fence, after, limit, maxBytes, timeoutMs, signal);
      const answered = micros();
      for (const event of got?.events ?? []) {
        const n = numberOf(event);
        if (n !== null) trace.mark(n, 'claim / read answered', answered);
      }
      return got;
    };
  }
  const readOwned = backend.readOwned?.bind(backend);
  if (readOwned) {
    backend.readOwned = async (fence, after, limit, maxBytes) => {
      const sent = micros();
      const wake = trace.lastWake;
      const events = await readOwned(fence, after, limit, maxBytes);
      stamp(events, sent, wake, micros());
      return events;
    };
  }
  const wait = backend.waitForAppend?.bind(backend);
  if (wait) {
    backend.waitForAppend = async (stream, timeoutMs, signal) => {
      const woken = await wait(stream, timeoutMs, signal);
      if (woken) trace.lastWake = micros();
      return woken;
    };
  }
}

interface Pair {
  consumer: Rheo;
  appender: Rheo;
  close(): Promise<void>;
}

async function postgresPair(url: string, trace: Trace): Promise<Pair> {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  const backend = postgresBackend({
    pool,
    // The backend's own LISTEN connection, with a first listener that stamps each notification.
    listenClient: () => {
      const client = new pg.Client({ connectionString: url });
      client.on('notification', () => trace.notifications.push(micros()));
      return client;
    },
  });
  return pairOf(backend, postgresBackend({ connectionString: url }), trace, () => pool.end());
}

async function redisPair(url: string, prefix: string, trace: Trace): Promise<Pair> {
  const client = new Redis(url, { lazyConnect: false });
  const duplicate = client.duplicate.bind(client);
  // The backend's subscriber is a duplicate of its client: stamp each message on it first.
  client.duplicate = ((...args: Parameters<typeof duplicate>) => {
    const sub = duplicate(...args);
    sub.on('pmessage', () => trace.notifications.push(micros()));
    return sub;
  }) as typeof client.duplicate;
  const backend = redisBackend({ client }, { prefix });
  return pairOf(backend, redisBackend({ url }, { prefix }), trace, async () => client.disconnect());
}

/** The traced consumer instance on `backend` and the appender on `appending`; `release` ends what the caller lent the consumer. */
async function pairOf(backend: Backend, appending: Backend, trace: Trace, release: () => Promise<void>): Promise<Pair> {
  instrumentConsumer(backend, trace);
  const consumer = createRheo({ backend });
  const appender = createRheo({ backend: appending });
  await consumer.migrate();
  return {
    consumer,
    appender,
    close: async () => {
      await appender.close();
      await consumer.close();
      await release();
    },
  };
}

async function traceCase(pair: Pair, trace: Trace, mode: Mode, count: number): Promise<void> {
  const { consumer: rheo, appender } = pair;
  const stream = `trace-${mode}`;
  await rheo.createStream(stream);
  await rheo.createGroup(stream, 'g');
  const handled = new Set<number>();
  const consumer = await idleConsumer<{ n: number }>(rheo, stream, mode, (event) => {
    const at = micros();
    trace.mark(event.payload.n, 'handler start', at);
    handled.add(event.payload.n);
  });
  try {
    for (let n = 0; n < count; n++) {
      trace.sentAt.set(n, micros());
      await appender.append(stream, { type: 'trace', payload: { n } });
      trace.mark(n, 'append returned', micros());
      await waitUntil('traced handler', () => handled.has(n), 10_000, 1);
      await sleep(latencyGapMs(n));
    }
  } finally {
    await consumer.stop();
  }
}

function parseArgs(argv: string[]): { count: number; only: Set<Kind> | null } {
  let count = 100;
  let only: Set<Kind> | null = null;
  for (const arg of argv) {
    if (arg.startsWith('--count=')) count = Number(arg.slice('--count='.length));
    else if (arg.startsWith('--only=')) only = new Set(arg.slice('--only='.length).split(',') as Kind[]);
    else throw new Error(`unknown argument ${arg} (usage: latency-trace [--count=N] [--only=postgres,redis])`);
  }
  if (!Number.isInteger(count) || count < 1) throw new Error('--count must be a positive integer');
  return { count, only };
}

function print(title: string, trace: Trace): void {
  const rows = trace.table();
  process.stdout.write(`\n${title}\n`);
  process.stdout.write(`  ${'step'.padEnd(44)} ${'µs'.padStart(8)} ${'Δ µs'.padStart(8)}\n`);
  let previous = 0;
  for (const row of rows) {
    const us = Number.isNaN(row.us) ? '—' : String(Math.round(row.us));
    const delta = Number.isNaN(row.us) ? '' : String(Math.round(row.us - previous));
    if (!Number.isNaN(row.us)) previous = row.us;
    process.stdout.write(`  ${row.step.padEnd(44)} ${us.padStart(8)} ${delta.padStart(8)}   (n=${row.samples})\n`);
  }
}

/** Traces both modes on one store: `pair` opens the consumer and appender instances for a trace. */
async function traceBoth(store: string, count: number, pair: (trace: Trace, mode: Mode) => Promise<Pair>): Promise<void> {
  for (const mode of ['competing', 'partitions'] as const) {
    const trace = new Trace();
    const opened = await pair(trace, mode);
    try {
      await traceCase(opened, trace, mode, count);
    } finally {
      await opened.close();
    }
    print(`${store}, ${mode} (median over ${count} appends, µs from the append call)`, trace);
  }
}

async function main(): Promise<void> {
  const { count, only } = parseArgs(process.argv.slice(2));
  if (!only || only.has('postgres')) {
    const cluster = await startThrowawayPostgres({ durable: true, label: 'rheo-trace-pg' });
    try {
      await traceBoth('PostgreSQL', count, (trace) => postgresPair(cluster.url(), trace));
    } finally {
      cluster.stop();
    }
  }
  if (!only || only.has('redis')) {
    const server = await startThrowawayRedis({ settings: ['--appendonly', 'yes', '--appendfsync', 'everysec'], label: 'rheo-trace-redis' });
    try {
      await traceBoth('Redis', count, (trace, mode) => redisPair(server.urls[0]!, `trace-${mode}`, trace));
    } finally {
      server.stop();
    }
  }
}

main().then(
  () => process.exit(),
  (error: unknown) => {
    process.stderr.write(`latency trace failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
