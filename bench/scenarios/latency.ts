import type { BenchContext } from '../lib/context.js';
import { idleCpuPercent } from '../lib/cpu.js';
import { graphileLatency, graphileLatencySubject, pgBossLatency } from '../lib/peers.js';
import { idleConsumer, modesInTurnsWith, openRheo, type BackendKind, type ConsumeMode } from '../lib/rheo-setup.js';
import { now, percentile, sleep, waitUntil } from '../lib/stats.js';
import { EVENT_TYPE, latencyGapMs } from '../lib/workload.js';

export const LATENCY = '4 latency';

export const LATENCY_CASES = {
  notify: 'rheo postgres, notifications',
  partitions: 'rheo postgres, partition mode, notifications',
  poll: 'rheo postgres, polling only (pollMs 200)',
  memory: 'rheo memory',
  graphile: 'graphile-worker (LISTEN/NOTIFY)',
  pgBoss: 'pg-boss (polling 0.5 s, its minimum)',
  notifyTurns: 'rheo postgres, notifications, in turns with partition mode and graphile-worker',
  partitionsTurns: 'rheo postgres, partition mode, in turns with competing and graphile-worker',
  graphileTurns: 'graphile-worker, in turns with both rheo modes',
} as const;

/**
 * Scenario 4: append one event at a time to an idle consumer and measure
 * append call → handler start, p50/p95/p99 per repetition.
 */
export async function latencyScenario(ctx: BenchContext): Promise<void> {
  const count = ctx.size(200, 50);
  for (let run = 0; run < ctx.runs; run++) {
    recordPercentiles(ctx, LATENCY_CASES.memory, await rheoLatency('memory', undefined, true, count));
    if (!ctx.pg) continue;
    const url = await ctx.pg.createDatabase('rheo_bench_latency');
    try {
      recordPercentiles(ctx, LATENCY_CASES.notify, await rheoLatency('postgres', url, true, count));
      recordPercentiles(ctx, LATENCY_CASES.partitions, await rheoLatency('postgres', url, true, count, 'partitions'));
      recordPercentiles(ctx, LATENCY_CASES.poll, await rheoLatency('postgres', url, false, count));
    } finally {
      await ctx.pg.dropDatabase('rheo_bench_latency');
    }
    const graphileUrl = await ctx.pg.createDatabase('rheo_bench_latency_graphile');
    try {
      recordPercentiles(ctx, LATENCY_CASES.graphile, await graphileLatency(graphileUrl, count));
    } finally {
      await ctx.pg.dropDatabase('rheo_bench_latency_graphile');
    }
    // The targets compare these: one system after the other, the machine drifted between cases by more than the difference.
    const turnsUrl = await ctx.pg.createDatabase('rheo_bench_latency_turns');
    const turnsGraphileUrl = await ctx.pg.createDatabase('rheo_bench_latency_turns_graphile');
    try {
      // rheo and graphile-worker each in a database of its own on the same server.
      const turns = await modesInTurnsWith(
        () => openRheo('postgres', { url: turnsUrl, notify: true }),
        'turns',
        () => graphileLatencySubject(turnsGraphileUrl),
        count,
      );
      ctx.record(LATENCY, `${LATENCY_CASES.notifyTurns} p50`, 'ms', turns.competing);
      ctx.record(LATENCY, `${LATENCY_CASES.partitionsTurns} p50`, 'ms', turns.partitions);
      ctx.record(LATENCY, `${LATENCY_CASES.graphileTurns} p50`, 'ms', turns.peer);
    } finally {
      await ctx.pg.dropDatabase('rheo_bench_latency_turns');
      await ctx.pg.dropDatabase('rheo_bench_latency_turns_graphile');
    }
    const bossUrl = await ctx.pg.createDatabase('rheo_bench_latency_pgboss');
    try {
      recordPercentiles(ctx, LATENCY_CASES.pgBoss, await pgBossLatency(bossUrl, count));
    } finally {
      await ctx.pg.dropDatabase('rheo_bench_latency_pgboss');
    }
  }
  if (!ctx.pg) ctx.skip(`${LATENCY} (PostgreSQL and peers)`, 'no database');
}

/** The idle-CPU case of a latency case: what its consumer cost while it waited for appends. */
export function idleCase(name: string): string {
  return `${name}: idle consumer CPU (% of one core, ${IDLE_MS / 1000} s)`;
}

const IDLE_MS = 2_000;

function recordPercentiles(ctx: BenchContext, name: string, result: number[] | { samples: number[]; idleCpu: number }): void {
  const samples = Array.isArray(result) ? result : result.samples;
  for (const p of [50, 95, 99]) ctx.record(LATENCY, `${name} p${p}`, 'ms', percentile(samples, p));
  if (!Array.isArray(result)) ctx.record(LATENCY, idleCase(name), '%', result.idleCpu);
}

/**
 * The appender and the consumer use separate rheo instances (separate pools,
 * as two processes would), so the consumer learns about an append only
 * through PostgreSQL (NOTIFY, or its next poll) and never through the
 * backend's in-process wake-up of its own appends. `mode` is how the
 * consumer consumes: competing `rheo.consume` (claims leases) or partition
 * ownership (reads its partition).
 */
async function rheoLatency(
  kind: BackendKind,
  url: string | undefined,
  notify: boolean,
  count: number,
  mode: ConsumeMode = 'competing',
): Promise<{ samples: number[]; idleCpu: number }> {
  const rheo = await openRheo(kind, { url, notify });
  const appender = kind === 'memory' ? rheo : await openRheo(kind, { url, notify });
  const stream = `latency-${notify ? 'notify' : 'poll'}-${mode}`;
  const sentAt = new Map<number, number>();
  const samples: number[] = [];
  try {
    await rheo.createStream(stream);
    await rheo.createGroup(stream, 'g');
    const consumer = await idleConsumer<{ n: number }>(rheo, stream, mode, (event) => {
      const at = now();
      const sent = sentAt.get(event.payload.n);
      if (sent !== undefined) samples.push(at - sent);
    });
    const idleCpu = await idleCpuPercent(IDLE_MS);
    for (let i = 0; i < count; i++) {
      sentAt.set(i, now());
      await appender.append(stream, { type: EVENT_TYPE, payload: { n: i } });
      await sleep(latencyGapMs(i));
    }
    await waitUntil('latency handlers', () => samples.length >= count, 30_000);
    await consumer.stop();
    return { samples, idleCpu };
  } finally {
    if (appender !== rheo) await appender.close();
    await rheo.close();
  }
}
