/**
 * One measured drain for `npm run bench:compare`, run in a child process
 * against the rheo source tree given as `<root>` (this build's, or the scratch
 * worktree of the ref compared against), so both builds run the same case code.
 * The stream is drained twice (a warm-up, then the measured drain); an
 * `append` case instead appends twice as many events as `fill` does, in two
 * timed runs, into streams of its own.
 * Prints one JSON line: `{ "rate": events/s, "cpuUs": client CPU µs per event,
 * "serverUs": the store's CPU µs per event (PostgreSQL: every postgres process
 * on this machine, from /proc, null where none is visible; Redis: INFO cpu) }`.
 *
 *     node --import tsx bench/compare/case.ts <root> <case> <url> <stream> <events>
 *     node --import tsx bench/compare/case.ts <root> fill <url> <stream> <events> <partitions>
 *
 * `<url>` is a PostgreSQL connection string, or `redis://host:port/?prefix=P`
 * for the Redis backend under key prefix P (each build has its own).
 *
 * `fill` migrates the build's own database and appends the events (outside
 * any clock); each run then drains that stream with a fresh group. Client CPU is `process.cpuUsage()` of this process over
 * the drain: robust on a shared machine, unlike wall-clock rates.
 */
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { postgresCpuMs } from '../lib/cpu.js';
import { COMPARE_CASES, type CompareCaseId } from './cases.js';

interface RheoLike {
  migrate(): Promise<void>;
  createStream(stream: string, options: { partitions: number }): Promise<unknown>;
  appendBatch(stream: string, inputs: Array<{ type: string; partition: number; payload: unknown }>): Promise<unknown>;
  createGroup(stream: string, group: string): Promise<unknown>;
  lag(stream: string, group: string): Promise<{ lag: number }>;
  consume(options: Record<string, unknown>): { stop(options?: { timeoutMs?: number }): Promise<void> };
  producer(options: Record<string, unknown>): NodeJS.ReadableStream & { drain(timeoutMs?: number): Promise<boolean> };
  close(): Promise<void>;
}

const [root, caseId, url, stream, eventsArg, partitionsArg] = process.argv.slice(2);
if (!root || !caseId || !url || !stream || !eventsArg || !(caseId in COMPARE_CASES || caseId === 'fill')) {
  process.stderr.write(`usage: case.ts <root> <${Object.keys(COMPARE_CASES).join('|')}> <url> <stream> <events>\n`);
  process.exit(2);
}
const events = Number(eventsArg);
// Each build's bundle (\`npm run build\`, as users run it), or with
// RHEO_COMPARE_SOURCE=1 its TypeScript through tsx. From source, esbuild's
// keepNames wraps every closure a call creates in a __name() call that the
// bundle does not have, which charges closure-heavy code for work users never pay.
const fromSource = process.env.RHEO_COMPARE_SOURCE === '1';
const entry = (name: string): string => pathToFileURL(join(root, fromSource ? `src/${name}.ts` : `dist/${name}.js`)).href;
const { createRheo, createLeaseSink } = (await import(entry('index'))) as {
  createRheo(o: unknown): RheoLike;
  createLeaseSink(options: Record<string, unknown>): NodeJS.WritableStream;
};
const { pipeline } = await import('node:stream/promises');

const redis = url.startsWith('redis://') ? new URL(url) : null;
let backend: unknown;
/** The store's CPU in ms so far (null where it cannot be read). */
let serverCpuMs: () => Promise<number | null>;
if (redis) {
  const prefix = redis.searchParams.get('prefix') ?? 'rheo';
  redis.search = '';
  const { redisBackend } = (await import(entry('redis'))) as { redisBackend(config: unknown, options?: unknown): unknown };
  backend = redisBackend({ url: redis.href }, { prefix });
  const admin = new Redis(redis.href);
  serverCpuMs = async () => {
    const info = await admin.info('cpu');
    const field = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
    return (field('used_cpu_user') + field('used_cpu_sys')) * 1000;
  };
  process.once('beforeExit', () => admin.disconnect());
} else {
  const { postgresBackend } = (await import(entry('postgres'))) as { postgresBackend(config: unknown, options?: unknown): unknown };
  backend = postgresBackend({ connectionString: url });
  serverCpuMs = () => Promise.resolve(postgresCpuMs());
}

// Telemetry off unless the case says otherwise: a build from before
// OpenTelemetry support has none, so the head runs as an application without
// \`@opentelemetry/api\` would (an older build ignores the unknown key).
const caseSpec = caseId === 'fill' ? null : COMPARE_CASES[caseId as CompareCaseId];
const rheo = createRheo({ backend, telemetry: caseSpec !== null && 'telemetry' in caseSpec ? caseSpec.telemetry : false });
/** The `events` events in chunks of 1,000, one after another, spread over the partitions (an event without a key or partition goes to partition 0). */
async function appendAll(target: string, partitions: number): Promise<void> {
  for (let i = 0; i < events; i += 1000) {
    const inputs = [];
    for (let j = i; j < Math.min(events, i + 1000); j++) inputs.push({ type: 'bench.compare', partition: j % partitions, payload: { n: j, note: 'a small event' } });
    await rheo.appendBatch(target, inputs);
  }
}

interface Measured {
  elapsedMs: number;
  cpuUs: number;
  serverUs: number | null;
}

/** Starts the clocks (wall, this process's CPU, the store's CPU); `read()` gives the figures per event since. */
async function startClocks(): Promise<{ read(): Promise<Measured> }> {
  const cpu0 = process.cpuUsage();
  const server0 = await serverCpuMs();
  const t0 = performance.now();
  return {
    read: async () => {
      const elapsedMs = performance.now() - t0;
      const used = process.cpuUsage(cpu0);
      const server1 = await serverCpuMs();
      const serverUs = server0 === null || server1 === null ? null : ((server1 - server0) * 1000) / events;
      return { elapsedMs, cpuUs: (used.user + used.system) / events, serverUs };
    },
  };
}

if (caseId === 'fill') {
  await rheo.migrate();
  const partitions = Number(partitionsArg ?? 1);
  await rheo.createStream(stream, { partitions });
  await appendAll(stream, partitions);
  await rheo.close();
  process.exit(0);
}
const spec = caseSpec!;
if (spec.mode === 'latency' || spec.mode === 'latency-partitions') {
  process.stderr.write(`${caseId} is a latency case: compare.ts runs it through latency.ts, both builds at once\n`);
  process.exit(2);
}

/** Appends as `fill` does, timed, into a new stream of the case's partitions (no group, nothing drained). */
async function appendRun(label: string): Promise<Measured> {
  const target = `${stream}-append-${label}-${process.pid}`;
  await rheo.createStream(target, { partitions: spec.partitions });
  const clocks = await startClocks();
  await appendAll(target, spec.partitions);
  return clocks.read();
}

/** One drain of the whole stream by a fresh group: `{ elapsedMs, cpuUs }` up to lag 0. */
async function drain(label: string): Promise<Measured> {
  const group = `g-${label}-${process.pid}-${Date.now()}`;
  await rheo.createGroup(stream!, group);
  let handled = 0;
  const handler = (): void => void handled++;
  const clocks = await startClocks();
  let stop: () => Promise<unknown>;
  if (spec.mode === 'producer') {
    const producer = rheo.producer({ stream, group, maxDemand: spec.maxDemand });
    // The lease sink's handler option was called \`handle\` before the seed-completeness work.
    let sink: NodeJS.WritableStream;
    try {
      sink = createLeaseSink({ producer, concurrency: spec.concurrency, handler });
    } catch {
      sink = createLeaseSink({ producer, concurrency: spec.concurrency, handle: handler });
    }
    const done = pipeline(producer, sink);
    stop = () => producer.drain(10_000).then(() => done.catch(() => undefined));
  } else {
    const consumer = rheo.consume(
      spec.mode === 'partitions'
        ? { stream, group, assignment: 'partitions', batchSize: spec.maxDemand, concurrency: spec.concurrency, handler }
        : { stream, group, maxDemand: spec.maxDemand, concurrency: spec.concurrency, handler },
    );
    stop = () => consumer.stop({ timeoutMs: 10_000 });
  }
  const deadline = Date.now() + 180_000;
  while (handled < events || (await rheo.lag(stream!, group)).lag > 0) {
    if (Date.now() > deadline) throw new Error(`${caseId}: drained ${handled} of ${events} in 180 s`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  const measured = await clocks.read();
  await stop();
  return measured;
}

// A first drain (or append run) warms the JIT and the pool up; only the second is measured.
const measure = spec.mode === 'append' ? appendRun : drain;
await measure('warm');
// Both builds start the measured run from a collected heap. Otherwise the
// warm-up's garbage is collected during the run or not, depending on where
// the heap's limits happen to fall. Measured on append-1, with two builds
// whose appends send the same statements: one build's window held a full
// collection run after run, and its client CPU per event came out 1.26x the
// other's over seven rounds; collected first, 0.95x.
(globalThis as { gc?: () => void }).gc?.();
const { elapsedMs, cpuUs, serverUs } = await measure('run');
await rheo.close();
process.stdout.write(`${JSON.stringify({ rate: (events * 1000) / elapsedMs, cpuUs, serverUs })}\n`);
process.exit(0);
