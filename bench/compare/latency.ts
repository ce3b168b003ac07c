/**
 * One round of a latency case of `npm run bench:compare`: both builds in one
 * process, each with an idle consumer (and an appender on a rheo instance of
 * its own, so the consumer hears of an append only through the store), and
 * single appends that alternate between the builds one by one, 5–15 ms
 * apart. A round of each build in turn measured mostly the machine's drift
 * between rounds (±0.3 ms at the median on a 2-vCPU machine); appends that
 * alternate one by one see the same moments, and a difference of 0.1 ms
 * shows run after run.
 * Prints one JSON line: `{ "base": p50 ms, "head": p50 ms }`, append call →
 * handler start, the first 20 appends of each build left out.
 *
 *     node --import tsx bench/compare/latency.ts <base root> <head root> <case> <base url> <head url> <appends per build>
 *
 * A `<url>` is a PostgreSQL connection string (each build its own database),
 * or `redis://host:port/?prefix=P` (each build its own prefix).
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { COMPARE_CASES, type CompareCaseId } from './cases.js';

interface RheoLike {
  migrate(): Promise<void>;
  createStream(stream: string, options: { partitions: number }): Promise<unknown>;
  createGroup(stream: string, group: string): Promise<unknown>;
  append(stream: string, input: { payload: unknown }): Promise<unknown>;
  consume(options: Record<string, unknown>): { stop(): Promise<void>; stats(): { owned: unknown[] } };
  close(): Promise<void>;
}

const [baseRoot, headRoot, caseId, baseUrl, headUrl, appendsArg] = process.argv.slice(2);
const spec = caseId !== undefined && caseId in COMPARE_CASES ? COMPARE_CASES[caseId as CompareCaseId] : null;
if (!baseRoot || !headRoot || !spec || (spec.mode !== 'latency' && spec.mode !== 'latency-partitions') || !baseUrl || !headUrl || !appendsArg) {
  process.stderr.write('usage: latency.ts <base root> <head root> <latency case> <base url> <head url> <appends per build>\n');
  process.exit(2);
}
const appends = Number(appendsArg);
const WARM_UP = 20;
const fromSource = process.env.RHEO_COMPARE_SOURCE === '1';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
/** The bench's latency gap: 5–15 ms, varied so appends do not phase-lock with any poll. */
const gapMs = (i: number): number => 5 + ((i * 7919) % 11);

/** A rheo instance of the build at `root` on `url`, telemetry off as in every other compare case. */
async function open(root: string, url: string): Promise<RheoLike> {
  const entry = (name: string): string => pathToFileURL(join(root, fromSource ? `src/${name}.ts` : `dist/${name}.js`)).href;
  const { createRheo } = (await import(entry('index'))) as { createRheo(options: unknown): RheoLike };
  let backend: unknown;
  if (url.startsWith('redis://')) {
    const parsed = new URL(url);
    const prefix = parsed.searchParams.get('prefix') ?? 'rheo';
    parsed.search = '';
    const { redisBackend } = (await import(entry('redis'))) as { redisBackend(config: unknown, options: unknown): unknown };
    backend = redisBackend({ url: parsed.href }, { prefix });
  } else {
    const { postgresBackend } = (await import(entry('postgres'))) as { postgresBackend(config: unknown): unknown };
    backend = postgresBackend({ connectionString: url });
  }
  return createRheo({ backend, telemetry: false });
}

interface Side {
  consumerRheo: RheoLike;
  appender: RheoLike;
  stream: string;
  consumer: { stop(): Promise<void> };
  latencies: number[];
}

async function side(root: string, url: string): Promise<Side> {
  const consumerRheo = await open(root, url);
  const appender = await open(root, url);
  await consumerRheo.migrate();
  const stream = `latency-${process.pid}-${Date.now()}`;
  await consumerRheo.createStream(stream, { partitions: spec!.partitions });
  await consumerRheo.createGroup(stream, 'g');
  const latencies: number[] = [];
  const handler = (event: { payload: { at: number } }): void => void latencies.push(performance.now() - event.payload.at);
  const consumer =
    spec!.mode === 'latency'
      ? consumerRheo.consume({ stream, group: 'g', concurrency: 1, maxDemand: 10, handler })
      : consumerRheo.consume({ stream, group: 'g', assignment: 'partitions', concurrency: 1, heartbeatMs: 1_000, handler });
  const deadline = Date.now() + 30_000;
  while (spec!.mode === 'latency-partitions' && consumer.stats().owned.length === 0) {
    if (Date.now() > deadline) throw new Error(`${caseId}: the partition was not owned within 30 s`);
    await sleep(5);
  }
  return { consumerRheo, appender, stream, consumer, latencies };
}

const sides = [await side(baseRoot, baseUrl), await side(headRoot, headUrl)];
// Both consumers reach their idle wait and open their LISTEN or subscriber connection.
await sleep(500);
for (let i = 0; i < 2 * appends; i++) {
  const s = sides[i % 2]!;
  const before = s.latencies.length;
  await s.appender.append(s.stream, { payload: { at: performance.now() } });
  const deadline = Date.now() + 10_000;
  while (s.latencies.length === before) {
    if (Date.now() > deadline) throw new Error(`${caseId}: no handler ran within 10 s of an append`);
    await sleep(1);
  }
  await sleep(gapMs(i));
}
for (const s of sides) {
  await s.consumer.stop();
  await s.appender.close();
  await s.consumerRheo.close();
}
const [base, head] = sides.map((s) => median(s.latencies.slice(WARM_UP)));
process.stdout.write(`${JSON.stringify({ base, head })}\n`);
process.exit(0);
