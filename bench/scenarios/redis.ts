import { Redis } from 'ioredis';

import { redisBackend } from '../../src/redis.js';
import { createRheo, type Rheo } from '../../src/index.js';
import { startThrowawayRedis, type ThrowawayRedis } from '../../scripts/throwaway-redis.js';
import { BULLMQ_CONCURRENCIES, bullmqDrain, bullmqLatency, bullmqLatencySubject } from '../lib/bullmq.js';
import { interleavedLatency } from '../lib/interleaved-latency.js';
import type { BenchContext } from '../lib/context.js';
import { idleCpuPercent } from '../lib/cpu.js';
import { fill, idleConsumerSubject, modesInTurnsWith, type ConsumeMode } from '../lib/rheo-setup.js';
import { median, now, rate, sleep, waitUntil } from '../lib/stats.js';
import { EVENT_TYPE, inChunks, latencyGapMs, payload } from '../lib/workload.js';
import { drainWithConsume } from './consume.js';

export const REDIS = '7 redis';

export const REDIS_SETTING = { maxDemand: 500, concurrency: 50 } as const;
const RAW_LOOPS = 4;
const RAW_COUNT = 200;

export const REDIS_CASES = {
  rawXadd: 'raw pipelined XADD (1000 per pipeline)',
  rawXaddCpu: 'raw pipelined XADD: Redis CPU per entry',
  append: 'rheo redis appendBatch × 1000',
  appendCpu: 'rheo redis appendBatch: Redis CPU per event',
  appendRatio: 'rheo redis appendBatch ÷ raw XADD',
  rawDrain: `raw Lua-fenced XREADGROUP + XACK drain (${RAW_LOOPS} loops × COUNT ${RAW_COUNT})`,
  rawDrainCpu: 'raw fenced drain: Redis CPU per entry',
  consume: `rheo redis rheo.consume (maxDemand ${REDIS_SETTING.maxDemand}, concurrency ${REDIS_SETTING.concurrency})`,
  consumeCpu: 'rheo redis rheo.consume: Redis CPU per event',
  consumeRatio: 'rheo redis consume ÷ raw fenced drain',
  rawLatency: 'raw XREADGROUP BLOCK wake p50',
  latency: 'rheo redis idle append → handler p50 (competing, pub/sub wakeup)',
  latencyPartitions: 'rheo redis idle append → handler p50 (partition mode, pub/sub wakeup)',
  bullmqEnqueue: 'BullMQ enqueue (addBulk × 1000)',
  bullmqDrain: (concurrency: number) => `BullMQ drain (1 Worker, concurrency ${concurrency}, removeOnComplete)`,
  bullmqBest: 'BullMQ drain, best concurrency',
  bullmqCpu: 'BullMQ drain at its best concurrency: Redis CPU per job',
  bullmqLatency: 'BullMQ idle add → processor p50 (Worker concurrency 1)',
  latencyTurns: 'rheo redis idle append → handler p50 (competing), in turns with partition mode and BullMQ',
  latencyPartitionsTurns: 'rheo redis idle append → handler p50 (partition mode), in turns with competing and BullMQ',
  bullmqLatencyTurns: 'BullMQ idle add → processor p50, in turns with both rheo modes',
  vsBullmq: 'rheo redis consume ÷ BullMQ best drain',
  consumeClientCpu: 'rheo redis rheo.consume: client CPU per event',
  consume8: `rheo redis rheo.consume, 8 partitions (maxDemand ${REDIS_SETTING.maxDemand}, concurrency ${REDIS_SETTING.concurrency})`,
  consume8ClientCpu: 'rheo redis rheo.consume, 8 partitions: client CPU per event',
  spread: 'rheo redis rheo.consume on 8 partitions ÷ on 1',
  consume8Ratio: 'rheo redis consume, 8 partitions ÷ raw fenced drain',
  vsBullmq8: 'rheo redis consume, 8 partitions ÷ BullMQ best drain',
  idleCpu: 'rheo redis idle consumer CPU (% of one core, 2 s)',
  idleCpuPartitions: 'rheo redis idle partition-mode consumer CPU (% of one core, 2 s)',
} as const;

/**
 * Scenario 7: rheo on Redis next to a hand-written Redis Streams ceiling, on
 * one throwaway redis-server configured as production would run it
 * (`appendonly yes`, `appendfsync everysec`). The ceiling drains with
 * XREADGROUP and XACK, each entry fenced by a token written and checked in
 * Lua, which is the least a fenced lease costs on Redis. Redis CPU per event
 * is `used_cpu_user + used_cpu_sys` from INFO over the case, divided by the
 * events it moved. BullMQ (bench/package.json) runs on the same server in
 * the same repetition: bulk enqueue, drain at several Worker concurrencies
 * (the best one is compared), Redis CPU per job of that drain, and idle
 * latency add → processor. Before the first repetition, one unmeasured drain
 * of a 1-partition and of an 8-partition stream warms the JIT up, as
 * `bench:compare` does: otherwise the first repetition's drains ran the
 * Redis backend's code cold (an 8-partition drain at 44k/s and 17 µs of
 * client CPU per event cold, 59k/s and 9 µs warm, in one process).
 */
/** One drain of a 1-partition and of an 8-partition backlog of `events` each, under a prefix of its own, unmeasured. */
async function warmUp(url: string, events: number): Promise<void> {
  const rheo = createRheo({ backend: redisBackend({ url }, { prefix: 'bench-warm-up' }) });
  try {
    await rheo.migrate();
    for (const partitions of [1, 8]) {
      const stream = `warm-${partitions}`;
      await rheo.createStream(stream, { partitions });
      await rheo.createGroup(stream, 'g');
      await fill(rheo, stream, events, 1000, 0, partitions);
      await drainWithConsume(rheo, { stream, group: 'g' }, events, REDIS_SETTING);
    }
  } finally {
    await rheo.close();
  }
}

export async function redisScenario(ctx: BenchContext): Promise<void> {
  let server: ThrowawayRedis;
  try {
    server = await startThrowawayRedis({ settings: ['--appendonly', 'yes', '--appendfsync', 'everysec'], label: 'rheo-bench-redis' });
  } catch (error) {
    return ctx.skip(REDIS, `no redis-server: ${(error as Error).message}`);
  }
  const url = server.urls[0]!;
  const admin = new Redis(url);
  ctx.notes.push(`Redis: ${server.version}, appendonly yes, appendfsync everysec, one server on 127.0.0.1.`);
  const events = ctx.size(50_000, 5_000);
  try {
    await warmUp(url, ctx.size(10_000, 1_000));
    for (let run = 0; run < ctx.runs; run++) {
      // Writes.
      let cpu = await redisCpu(admin);
      let t0 = now();
      await rawXadd(admin, `raw-${run}`, events);
      let elapsed = now() - t0;
      ctx.record(REDIS, REDIS_CASES.rawXadd, 'events/s', rate(events, elapsed));
      ctx.record(REDIS, REDIS_CASES.rawXaddCpu, 'µs', ((await redisCpu(admin)) - cpu) * 1e6 / events);
      const rawXaddRate = rate(events, elapsed);

      const rheo = createRheo({ backend: redisBackend({ url }, { prefix: `bench${run}` }) });
      try {
        await rheo.migrate();
        const stream = `s${run}`;
        await rheo.createStream(stream);
        await rheo.createGroup(stream, 'g');
        cpu = await redisCpu(admin);
        t0 = now();
        await fill(rheo, stream, events, 1000);
        elapsed = now() - t0;
        ctx.record(REDIS, REDIS_CASES.append, 'events/s', rate(events, elapsed));
        ctx.record(REDIS, REDIS_CASES.appendCpu, 'µs', ((await redisCpu(admin)) - cpu) * 1e6 / events);
        ctx.record(REDIS, REDIS_CASES.appendRatio, 'x', rate(events, elapsed) / rawXaddRate);

        // Drains, interleaved.
        cpu = await redisCpu(admin);
        const rawDrainRate = await rawFencedDrain(url, `raw-${run}`, events);
        ctx.record(REDIS, REDIS_CASES.rawDrain, 'events/s', rawDrainRate);
        ctx.record(REDIS, REDIS_CASES.rawDrainCpu, 'µs', ((await redisCpu(admin)) - cpu) * 1e6 / events);

        // The same drain spread over 8 partitions: competing consumers must not lose rate there.
        // Both backlogs are written first, the two drains alternate which goes first from run
        // to run, and each starts once Redis has no AOF rewrite or fsync in flight: a drain
        // right after a 50,000-event fill measured the fill's persistence, not itself.
        const spread = `s8-${run}`;
        await rheo.createStream(spread, { partitions: 8 });
        await rheo.createGroup(spread, 'g');
        await fill(rheo, spread, events, 1000, 0, 8);
        let consumeRate = 0;
        let consume8Rate = 0;
        const drainOne = async (): Promise<void> => {
          await quietRedis(admin);
          const cpuBefore = await redisCpu(admin);
          const client = process.cpuUsage();
          consumeRate = await drainWithConsume(rheo, { stream, group: 'g' }, events, REDIS_SETTING);
          ctx.record(REDIS, REDIS_CASES.consumeClientCpu, 'µs', cpuMicros(process.cpuUsage(client)) / events);
          ctx.record(REDIS, REDIS_CASES.consume, 'events/s', consumeRate);
          ctx.record(REDIS, REDIS_CASES.consumeCpu, 'µs', ((await redisCpu(admin)) - cpuBefore) * 1e6 / events);
          ctx.record(REDIS, REDIS_CASES.consumeRatio, 'x', consumeRate / rawDrainRate);
        };
        const drainEight = async (): Promise<void> => {
          await quietRedis(admin);
          const client = process.cpuUsage();
          consume8Rate = await drainWithConsume(rheo, { stream: spread, group: 'g' }, events, REDIS_SETTING);
          ctx.record(REDIS, REDIS_CASES.consume8ClientCpu, 'µs', cpuMicros(process.cpuUsage(client)) / events);
          ctx.record(REDIS, REDIS_CASES.consume8, 'events/s', consume8Rate);
        };
        for (const drain of run % 2 === 0 ? [drainOne, drainEight] : [drainEight, drainOne]) await drain();
        ctx.record(REDIS, REDIS_CASES.spread, 'x', consume8Rate / consumeRate);
        ctx.record(REDIS, REDIS_CASES.consume8Ratio, 'x', consume8Rate / rawDrainRate);

        // Idle latency.
        const samples = ctx.size(200, 40);
        ctx.record(REDIS, REDIS_CASES.rawLatency, 'ms', await rawBlockLatency(url, `lat-${run}`, samples));
        const latency = await separateLatency(url, `bench${run}`, `lat-${run}`, 'competing', samples);
        ctx.record(REDIS, REDIS_CASES.latency, 'ms', latency.p50);
        ctx.record(REDIS, REDIS_CASES.idleCpu, '%', latency.idleCpu);
        const owned = await separateLatency(url, `bench${run}`, `lat-owned-${run}`, 'partitions', samples);
        ctx.record(REDIS, REDIS_CASES.latencyPartitions, 'ms', owned.p50);
        ctx.record(REDIS, REDIS_CASES.idleCpuPartitions, '%', owned.idleCpu);

        // BullMQ: the same number of jobs, the same payload, the same server.
        let best = { rate: 0, cpu: 0 };
        for (const concurrency of BULLMQ_CONCURRENCIES) {
          let before = 0;
          let used = 0;
          const b = await bullmqDrain(url, `bench-${run}-${concurrency}`, events, concurrency, {
            before: async () => {
              before = await redisCpu(admin);
            },
            after: async () => {
              used = (await redisCpu(admin)) - before;
            },
          });
          if (concurrency === BULLMQ_CONCURRENCIES[0]) ctx.record(REDIS, REDIS_CASES.bullmqEnqueue, 'jobs/s', b.enqueuePerSec);
          ctx.record(REDIS, REDIS_CASES.bullmqDrain(concurrency), 'jobs/s', b.drainPerSec);
          if (b.drainPerSec > best.rate) best = { rate: b.drainPerSec, cpu: (used * 1e6) / events };
        }
        ctx.record(REDIS, REDIS_CASES.bullmqBest, 'jobs/s', best.rate);
        ctx.record(REDIS, REDIS_CASES.bullmqCpu, 'µs', best.cpu);
        ctx.record(REDIS, REDIS_CASES.vsBullmq, 'x', consumeRate / best.rate);
        ctx.record(REDIS, REDIS_CASES.vsBullmq8, 'x', consume8Rate / best.rate);
        ctx.record(REDIS, REDIS_CASES.bullmqLatency, 'ms', await bullmqLatency(url, `bench-lat-${run}`, samples));
        // The targets compare these: one system after the other, the machine drifted between cases by more than the difference.
        const turns = await modesInTurnsWith(
          async () => createRheo({ backend: redisBackend({ url }, { prefix: `bench-turns${run}` }) }),
          `turns-${run}`,
          () => bullmqLatencySubject(url, `bench-turns-${run}`),
          samples,
        );
        ctx.record(REDIS, REDIS_CASES.latencyTurns, 'ms', turns.competing);
        ctx.record(REDIS, REDIS_CASES.latencyPartitionsTurns, 'ms', turns.partitions);
        ctx.record(REDIS, REDIS_CASES.bullmqLatencyTurns, 'ms', turns.peer);
      } finally {
        await rheo.close();
      }
      await admin.flushall();
    }
  } finally {
    admin.disconnect();
    server.stop();
  }
}

/** Waits (up to 30 s) until Redis has no AOF rewrite in progress or scheduled and no AOF fsync pending. */
async function quietRedis(admin: Redis): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const info = await admin.info('persistence');
    const field = (name: string) => Number(new RegExp(`${name}:(\\d+)`).exec(info)?.[1] ?? 0);
    if (field('aof_rewrite_in_progress') + field('aof_rewrite_scheduled') + field('aof_pending_bio_fsync') === 0 || Date.now() > deadline) return;
    await sleep(50);
  }
}

async function redisCpu(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return field('used_cpu_user') + field('used_cpu_sys');
}

async function rawXadd(client: Redis, key: string, events: number): Promise<void> {
  await inChunks(events, 1000, async (start, end) => {
    const pipe = client.pipeline();
    for (let i = start; i < end; i++) pipe.xadd(key, '*', 't', EVENT_TYPE, 'd', JSON.stringify(payload(i)));
    await pipe.exec();
  });
}

/** Reads a batch and fences every entry with a fresh token, in one step. */
const RAW_CLAIM = `
local read = redis.call('XREADGROUP', 'GROUP', 'g', ARGV[1], 'COUNT', ARGV[2], 'STREAMS', KEYS[1], '>')
if not read then return {} end
local out = {}
for i, entry in ipairs(read[1][2]) do
  local token = ARGV[3] .. ':' .. i
  redis.call('HSET', KEYS[2], entry[1], token)
  out[#out + 1] = { entry[1], token }
end
return out
`;

/** Acks each entry whose fence still holds the caller's token. */
const RAW_ACK = `
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[i + 1] then
    redis.call('XACK', KEYS[1], 'g', ARGV[i])
    redis.call('HDEL', KEYS[2], ARGV[i])
    n = n + 1
  end
end
return n
`;

async function rawFencedDrain(url: string, key: string, events: number): Promise<number> {
  const setup = new Redis(url);
  await setup.xgroup('CREATE', key, 'g', '0');
  setup.disconnect();
  const fence = `${key}:fence`;
  let acked = 0;
  let token = 0;
  const t0 = now();
  await Promise.all(
    Array.from({ length: RAW_LOOPS }, async (_, loop) => {
      const client = new Redis(url);
      try {
        while (acked < events) {
          const claimed = (await client.eval(RAW_CLAIM, 2, key, fence, `c${loop}`, RAW_COUNT, `t${token++}`)) as Array<[string, string]>;
          if (claimed.length === 0) continue;
          const n = (await client.eval(RAW_ACK, 2, key, fence, ...claimed.flat())) as number;
          acked += n;
        }
      } finally {
        client.disconnect();
      }
    }),
  );
  return rate(events, now() - t0);
}

async function rawBlockLatency(url: string, key: string, samples: number): Promise<number> {
  const writer = new Redis(url);
  const reader = new Redis(url);
  await writer.xgroup('CREATE', key, 'g', '$', 'MKSTREAM');
  const latencies: number[] = [];
  let stop = false;
  const reading = (async () => {
    while (!stop) {
      const got = (await reader.xreadgroup('GROUP', 'g', 'r', 'COUNT', 10, 'BLOCK', 200, 'STREAMS', key, '>')) as Array<[string, Array<[string, string[]]>]> | null;
      if (!got) continue;
      for (const [, entries] of got) {
        for (const [id, fields] of entries) {
          latencies.push(now() - Number(fields[1]));
          await reader.xack(key, 'g', id);
        }
      }
    }
  })();
  for (let i = 0; i < samples; i++) {
    await writer.xadd(key, '*', 'at', String(now()));
    await waitUntil('raw wake', () => latencies.length > i, 10_000, 1);
    await sleep(latencyGapMs(i));
  }
  stop = true;
  await reading;
  writer.disconnect();
  reader.disconnect();
  return median(latencies);
}

/**
 * Idle append → handler p50 (ms) with one rheo instance appending and
 * consuming (its appends wake its consumer in process), and the CPU the
 * process spent while its consumer waited idle (% of one core over 2 s); the
 * embedded scenario uses it on every backend.
 */
export async function rheoLatency(rheo: Rheo, stream: string, samples: number): Promise<{ p50: number; idleCpu: number }> {
  return idleLatency(rheo, rheo, stream, 'competing', samples);
}

/**
 * Idle append → handler p50 with the appender on a rheo instance (and
 * connections) of its own, as BullMQ's Queue and Worker are: the consumer
 * learns of an append only through Redis pub/sub, never through the
 * backend's in-process wake-up of its own appends. Also the CPU this process
 * used while the consumer waited idle (% of one core over 2 s).
 */
async function separateLatency(url: string, prefix: string, stream: string, mode: ConsumeMode, samples: number): Promise<{ p50: number; idleCpu: number }> {
  const rheo = createRheo({ backend: redisBackend({ url }, { prefix }) });
  const appender = createRheo({ backend: redisBackend({ url }, { prefix }) });
  try {
    return await idleLatency(rheo, appender, stream, mode, samples);
  } finally {
    await appender.close();
    await rheo.close();
  }
}

/** `samples` single appends through `appender`, each to an idle consumer on `rheo`; p50 of append call → handler start. */
async function idleLatency(rheo: Rheo, appender: Rheo, stream: string, mode: ConsumeMode, samples: number): Promise<{ p50: number; idleCpu: number }> {
  const subject = await idleConsumerSubject(rheo, appender, stream, mode);
  try {
    const idleCpu = await idleCpuPercent(2_000);
    const [p50] = await interleavedLatency([subject], samples);
    return { p50: p50!, idleCpu };
  } finally {
    await subject.stop();
  }
}


function cpuMicros(usage: NodeJS.CpuUsage): number {
  return usage.user + usage.system;
}
