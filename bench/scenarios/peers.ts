import type { BenchContext } from '../lib/context.js';
import { GRAPHILE_FAST, PGBOSS_FAST, graphileDrain, pgBossDrain } from '../lib/peers.js';
import { fill, openRheo } from '../lib/rheo-setup.js';
import { now, rate } from '../lib/stats.js';
import { drainWithConsume } from './consume.js';

export const PEERS = '3 peers';

/** The rheo configuration compared with the peers: same shape as graphile-worker's (a local batch, tens of handlers). */
export const RHEO_PEER_SETTING = { maxDemand: 500, concurrency: 50 } as const;

export const PEER_CASES = {
  graphile: `graphile-worker drain (concurrency ${GRAPHILE_FAST.concurrency}, localQueue ${GRAPHILE_FAST.localQueueSize}, completeJobBatchDelay ${GRAPHILE_FAST.completeJobBatchDelay})`,
  graphileEnqueue: 'graphile-worker enqueue (addJobs × 1000)',
  pgBoss: `pg-boss drain (${PGBOSS_FAST.workers} workers × batchSize ${PGBOSS_FAST.batchSize}, polling ${PGBOSS_FAST.pollingIntervalSeconds}s)`,
  pgBossEnqueue: 'pg-boss enqueue (insert × 1000)',
  rheo: `rheo postgres rheo.consume (maxDemand ${RHEO_PEER_SETTING.maxDemand}, concurrency ${RHEO_PEER_SETTING.concurrency})`,
  rheoTwo: `rheo postgres 2 × rheo.consume in one process (maxDemand ${RHEO_PEER_SETTING.maxDemand}, concurrency ${RHEO_PEER_SETTING.concurrency} each)`,
  rheoEnqueue: 'rheo postgres enqueue (appendBatch × 1000)',
  vsGraphile: 'rheo.consume ÷ graphile-worker',
  vsPgBoss: 'rheo.consume ÷ pg-boss',
  twoVsGraphile: '2 × rheo.consume ÷ graphile-worker',
  twoVsPgBoss: '2 × rheo.consume ÷ pg-boss',
};

/**
 * Scenario 3: the same 20,000 no-op jobs enqueued in bulk and drained by
 * graphile-worker, pg-boss and rheo, each in its own database on the same
 * cluster, interleaved within each repetition so drift hits all three alike.
 * The ratio is computed per repetition, then summarised. rheo also drains
 * with two consumers of the group in one process, as pg-boss runs two workers.
 */
export async function peersScenario(ctx: BenchContext): Promise<void> {
  if (!ctx.pg) return ctx.skip(PEERS, 'no database');
  const jobs = ctx.size(20_000, 2_000);
  const graphileUrl = await ctx.pg.createDatabase('rheo_bench_graphile');
  const bossUrl = await ctx.pg.createDatabase('rheo_bench_pgboss');
  const rheoUrl = await ctx.pg.createDatabase('rheo_bench_peers_rheo');
  const rheo = await openRheo('postgres', { url: rheoUrl });
  try {
    for (let run = 0; run < ctx.runs; run++) {
      const g = await graphileDrain(graphileUrl, jobs);
      ctx.record(PEERS, PEER_CASES.graphileEnqueue, 'jobs/s', g.enqueuePerSec);
      ctx.record(PEERS, PEER_CASES.graphile, 'jobs/s', g.drainPerSec);

      const b = await pgBossDrain(bossUrl, jobs, `bench_${run}`);
      ctx.record(PEERS, PEER_CASES.pgBossEnqueue, 'jobs/s', b.enqueuePerSec);
      ctx.record(PEERS, PEER_CASES.pgBoss, 'jobs/s', b.drainPerSec);

      const stream = `peers-${run}`;
      await rheo.createStream(stream);
      await rheo.createGroup(stream, 'g');
      const t0 = now();
      await fill(rheo, stream, jobs, 1000);
      ctx.record(PEERS, PEER_CASES.rheoEnqueue, 'events/s', rate(jobs, now() - t0));
      const r = await drainWithConsume(rheo, { stream, group: 'g' }, jobs, RHEO_PEER_SETTING);
      ctx.record(PEERS, PEER_CASES.rheo, 'events/s', r);
      ctx.record(PEERS, PEER_CASES.vsGraphile, 'x', r / g.drainPerSec);
      ctx.record(PEERS, PEER_CASES.vsPgBoss, 'x', r / b.drainPerSec);

      // pg-boss runs two workers; the same with two consumers of one group.
      const twoStream = `peers-two-${run}`;
      await rheo.createStream(twoStream);
      await rheo.createGroup(twoStream, 'g');
      await fill(rheo, twoStream, jobs, 1000);
      const two = await drainWithConsume(rheo, { stream: twoStream, group: 'g' }, jobs, RHEO_PEER_SETTING, 2);
      ctx.record(PEERS, PEER_CASES.rheoTwo, 'events/s', two);
      ctx.record(PEERS, PEER_CASES.twoVsGraphile, 'x', two / g.drainPerSec);
      ctx.record(PEERS, PEER_CASES.twoVsPgBoss, 'x', two / b.drainPerSec);
    }
  } finally {
    await rheo.close();
    for (const db of ['rheo_bench_graphile', 'rheo_bench_pgboss', 'rheo_bench_peers_rheo']) await ctx.pg.dropDatabase(db);
  }
}
