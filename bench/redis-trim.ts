/**
 * `npx tsx bench/redis-trim.ts [--events=N]`: what trimming costs on the Redis
 * backend, on a throwaway redis-server (or RHEO_BENCH_REDIS_URL). Appends N
 * events over 4 partitions, lets one group ack them all (dead-lettering 1 in
 * 1,000), then measures `trim(keep 0)` in the default batches of 10,000
 * events (events/s) and the server's memory before and after.
 */
import { Redis } from 'ioredis';
import { redisBackend } from '../src/backends/redis/redis-backend.js';
import { createRheo } from '../src/rheo.js';
import { startThrowawayRedis } from '../scripts/throwaway-redis.js';

const eventsArg = process.argv.find((a) => a.startsWith('--events='));
const total = eventsArg ? Number(eventsArg.slice('--events='.length)) : 200_000;
const given = process.env.RHEO_BENCH_REDIS_URL;
const server = given ? null : await startThrowawayRedis();
const url = given ?? server!.urls[0]!;
const probe = new Redis(url);
const memory = async () => Number(/used_memory:(\d+)/.exec(await probe.info('memory'))![1]);
try {
  const rheo = createRheo({ backend: redisBackend({ url }, { prefix: `bench-${process.pid}` }), retention: { enabled: false } });
  await rheo.migrate();
  await rheo.createStream('s', { partitions: 4 });
  await rheo.createGroup('s', 'g', { maxAttempts: 1 });
  const empty = await memory();
  for (let i = 0; i < total; i += 1_000) {
    await rheo.appendBatch('s', Array.from({ length: Math.min(1_000, total - i) }, (_, k) => ({ payload: { n: i + k, pad: 'x'.repeat(100) } })));
  }
  for (;;) {
    const leases = await rheo.fetch('s', 'g', { limit: 1_000 });
    if (leases.length === 0) break;
    const dead = leases.filter((l) => l.event.sequence % 1_000 === 0);
    for (const l of dead) await rheo.reject(l, 'bench');
    await rheo.ackMany(leases.filter((l) => l.event.sequence % 1_000 !== 0));
  }
  const full = await memory();
  const started = performance.now();
  const report = await rheo.trim('s', { keep: 0 });
  const ms = performance.now() - started;
  const after = await memory();
  process.stdout.write(
    `trimmed ${report.deleted} events in ${ms.toFixed(0)} ms: ${Math.round((report.deleted / ms) * 1000)} events/s\n` +
      `used_memory: empty ${(empty / 1e6).toFixed(1)} MB, full ${(full / 1e6).toFixed(1)} MB, after trim ${(after / 1e6).toFixed(1)} MB\n` +
      `dead letters left: ${(await rheo.groupInfo('s', 'g')).deadLetters}\n`,
  );
  await rheo.deleteStream('s', { confirm: true });
  process.stdout.write(`after deleteStream: ${(await probe.keys(`bench-${process.pid}:*`)).length} key(s) left (the schema key)\n`);
  await rheo.close();
} finally {
  probe.disconnect();
  server?.stop();
}
