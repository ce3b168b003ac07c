import pg from 'pg';

import type { Rheo } from '../../src/index.js';
import { log, type BenchContext } from '../lib/context.js';
import { PGBOSS_FAST, graphileDrain, pgBossDrain } from '../lib/peers.js';
import { caughtUp, fill, openRheo } from '../lib/rheo-setup.js';
import { now, rate, waitUntil } from '../lib/stats.js';
import { EVENT_TYPE, inChunks, payload } from '../lib/workload.js';
import { drainWithConsume } from './consume.js';
import { RHEO_PEER_SETTING } from './peers.js';

export const HORIZON = '8 held horizon';

const PARTITION_COUNT = 8;
const PARTITION_BATCH = 100;

const SYSTEMS = {
  graphile: 'graphile-worker',
  pgBoss: `pg-boss (${PGBOSS_FAST.workers} workers × batchSize ${PGBOSS_FAST.batchSize})`,
  competing: `rheo competing mode (maxDemand ${RHEO_PEER_SETTING.maxDemand}, concurrency ${RHEO_PEER_SETTING.concurrency})`,
  partitions: `rheo partition mode (${PARTITION_COUNT} partitions, batch ${PARTITION_BATCH})`,
} as const;
type System = keyof typeof SYSTEMS;

export const HORIZON_CASES = {
  rate: (system: System, phase: 'free' | 'held', window: number) => `${SYSTEMS[system]}: drain ${window}, ${phase}`,
  ratio: (system: System) => `${SYSTEMS[system]}: last drain held ÷ free`,
  dead: (system: System, phase: 'free' | 'held') => `${SYSTEMS[system]}: dead rows after the ${phase} phase (thousands)`,
  size: (system: System, phase: 'free' | 'held') => `${SYSTEMS[system]}: its tables after the ${phase} phase`,
  systems: SYSTEMS,
} as const;

/** The tables whose rows each system inserts, rewrites or deletes while it drains. */
const TABLES: Record<System, { schema: string; tables: string[] }> = {
  graphile: { schema: 'graphile_worker', tables: ['_private_jobs', '_private_job_queues', '_private_tasks'] },
  pgBoss: { schema: 'pgboss', tables: ['job', 'archive', 'queue'] },
  competing: { schema: 'rheo', tables: ['events', 'lease_ranges', 'deliveries', 'group_cursors', 'stream_partitions'] },
  partitions: {
    schema: 'rheo',
    tables: ['events', 'group_cursors', 'stream_partitions', 'partition_owners', 'group_members', 'group_ownership'],
  },
};

/**
 * Scenario 8: drain speed under a held xmin horizon. Each system drains
 * `windows` backlogs back to back, first with nothing held open, then with a
 * REPEATABLE READ transaction open on another connection to its database
 * for the whole phase (it read the catalog once, so its snapshot holds the
 * horizon, and it locks none of the queue's tables, like a report on other
 * tables or an idle-in-transaction session). VACUUM then removes no row
 * version deleted or updated after that snapshot. A horizon is per
 * database for ordinary tables, so each system's database gets its own held
 * transaction. Systems are interleaved drain by drain so drift on a shared
 * machine hits them alike; the whole sequence repeats `runs` times, in fresh
 * databases, the held phase first in every second run. Per system: each
 * drain's rate, the last drain's rate held ÷
 * free, and its tables' dead rows (pg_stat_user_tables) and total size at
 * the end of each phase.
 */
export async function horizonScenario(ctx: BenchContext): Promise<void> {
  if (!ctx.pg) return ctx.skip(HORIZON, 'no database');
  const backlog = ctx.size(50_000, 10_000);
  const windows = ctx.size(4, 3);
  for (let run = 0; run < ctx.runs; run++) {
    const urls: Record<System, string> = {
      graphile: await ctx.pg.createDatabase('rheo_bench_h_graphile'),
      pgBoss: await ctx.pg.createDatabase('rheo_bench_h_pgboss'),
      competing: await ctx.pg.createDatabase('rheo_bench_h_competing'),
      partitions: await ctx.pg.createDatabase('rheo_bench_h_partitions'),
    };
    const competing = await openRheo('postgres', { url: urls.competing });
    const partitioned = await openRheo('postgres', { url: urls.partitions });
    try {
      await competing.createStream('jobs');
      await competing.createGroup('jobs', 'g');
      await partitioned.createStream('jobs', { partitions: PARTITION_COUNT });
      await partitioned.createGroup('jobs', 'g');
      // One unrecorded drain each first: the first drains of a fresh database ran up to 2× slower
      // (caches, plans, JIT of the client), which put the nothing-held phase at a disadvantage.
      await drainAll(urls, competing, partitioned, backlog, 0);
      const last: Record<'free' | 'held', Partial<Record<System, number>>> = { free: {}, held: {} };
      // Alternate which phase goes first, run by run: drains of one database sped up over its first
      // windows even after the warm-up (held-phase drains ran 1.3-2.3× the free ones when free always
      // went first), and alternating cancels that drift out of the median.
      const phases = run % 2 === 0 ? (['free', 'held'] as const) : (['held', 'free'] as const);
      for (const [p, phase] of phases.entries()) {
        const holders = phase === 'held' ? await Promise.all(Object.values(urls).map(holdHorizon)) : [];
        try {
          for (let w = 1; w <= windows; w++) {
            const rates = await drainAll(urls, competing, partitioned, backlog, (p * windows + w) * backlog);
            for (const system of Object.keys(SYSTEMS) as System[]) {
              ctx.record(HORIZON, HORIZON_CASES.rate(system, phase, w), 'events/s', rates[system]);
              if (w === windows) last[phase][system] = rates[system];
            }
            log(`  run ${run + 1}, ${phase} drain ${w}/${windows}: ${(Object.keys(SYSTEMS) as System[]).map((s) => `${s} ${Math.round(rates[s])}`).join(', ')} events/s`);
          }
          for (const system of Object.keys(SYSTEMS) as System[]) {
            const { dead, mb } = await tableState(urls[system], TABLES[system]);
            ctx.record(HORIZON, HORIZON_CASES.dead(system, phase), 'x', dead / 1000);
            ctx.record(HORIZON, HORIZON_CASES.size(system, phase), 'MB', mb);
          }
        } finally {
          for (const holder of holders) await holder.end().catch(() => {});
        }
      }
      for (const system of Object.keys(SYSTEMS) as System[]) {
        ctx.record(HORIZON, HORIZON_CASES.ratio(system), 'x', last.held[system]! / last.free[system]!);
      }
    } finally {
      await competing.close();
      await partitioned.close();
      for (const db of ['rheo_bench_h_graphile', 'rheo_bench_h_pgboss', 'rheo_bench_h_competing', 'rheo_bench_h_partitions']) {
        await ctx.pg.dropDatabase(db);
      }
    }
  }
  ctx.notes.push(
    `Held horizon: ${windows} back-to-back drains of ${backlog} jobs/events per system with nothing held, then ${windows} with a ` +
      `REPEATABLE READ snapshot held open on another connection to the same database (the held phase first in every second run); ` +
      `${ctx.runs} run(s) in fresh databases, each after one unrecorded drain per system. ` +
      'Dead rows are pg_stat_user_tables.n_dead_tup of the tables listed in bench/scenarios/horizon.ts, sizes pg_total_relation_size.',
  );
}

/** One backlog per system, drained by each in turn. */
async function drainAll(
  urls: Record<System, string>,
  competing: Rheo,
  partitioned: Rheo,
  backlog: number,
  offset: number,
): Promise<Record<System, number>> {
  return {
    graphile: (await graphileDrain(urls.graphile, backlog)).drainPerSec,
    pgBoss: (await pgBossDrain(urls.pgBoss, backlog, 'jobs')).drainPerSec,
    competing: await competingDrain(competing, backlog, offset),
    partitions: await partitionDrain(partitioned, backlog, offset),
  };
}

/** A connection whose REPEATABLE READ snapshot, taken now, stays open until `end()`; it locks no table but the catalog it read. */
async function holdHorizon(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  await client.query('SELECT count(*) FROM pg_catalog.pg_class');
  return client;
}

async function tableState(url: string, which: { schema: string; tables: string[] }): Promise<{ dead: number; mb: number }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // Statistics reach pg_stat_user_tables when each backend flushes them (within a second of its last transaction).
    await client.query('SELECT pg_stat_clear_snapshot()');
    const { rows } = await client.query<{ dead: string | null; bytes: string | null }>(
      // pg_partition_tree lists a partitioned table's leaves and nothing for a plain table.
      `WITH named AS (
         SELECT to_regclass(quote_ident($1) || '.' || quote_ident(n.name)) AS rel FROM unnest($2::text[]) AS n(name)
       ),
       leaves AS (
         SELECT c.oid AS relid FROM named JOIN pg_class c ON c.oid = named.rel WHERE c.relkind = 'r'
         UNION ALL
         SELECT t.relid FROM named CROSS JOIN LATERAL pg_partition_tree(named.rel) t WHERE t.isleaf
       )
       SELECT (SELECT sum(s.n_dead_tup) FROM pg_stat_user_tables s JOIN leaves l ON l.relid = s.relid) AS dead,
              (SELECT sum(pg_total_relation_size(l.relid)) FROM leaves l) AS bytes`,
      [which.schema, which.tables],
    );
    return { dead: Number(rows[0]?.dead ?? 0), mb: Number(rows[0]?.bytes ?? 0) / 1024 / 1024 };
  } finally {
    await client.end();
  }
}

async function competingDrain(rheo: Rheo, backlog: number, offset: number): Promise<number> {
  await fill(rheo, 'jobs', backlog, 1000, offset);
  return drainWithConsume(rheo, { stream: 'jobs', group: 'g' }, backlog, RHEO_PEER_SETTING);
}

/** The backlog spread over the partitions, then drained by one partition-mode consumer, from its start until lag 0. */
async function partitionDrain(rheo: Rheo, backlog: number, offset: number): Promise<number> {
  await inChunks(backlog, 1000, async (start, end) => {
    const inputs = [];
    for (let i = start; i < end; i++) inputs.push({ type: EVENT_TYPE, partition: i % PARTITION_COUNT, payload: payload(offset + i) });
    await rheo.appendBatch('jobs', inputs);
  });
  let handled = 0;
  // The clock starts at the first handler call, as graphile-worker's does at its first fetch: a
  // partition-mode consumer first joins the group and is assigned its partitions (a heartbeat or
  // two), which at small backlogs was most of the variance between drains.
  let t0 = 0;
  const consumer = rheo.consume({
    stream: 'jobs',
    group: 'g',
    assignment: 'partitions',
    batchSize: PARTITION_BATCH,
    concurrency: 16,
    heartbeatMs: 200,
    handler: () => {
      if (handled++ === 0) t0 = now();
    },
  });
  await waitUntil('partition handlers', () => handled >= backlog, 300_000, 1);
  await waitUntil('partition frontier', () => caughtUp(rheo, 'jobs', 'g'), 60_000, 5);
  const elapsed = now() - t0;
  await consumer.stop();
  return rate(backlog, elapsed);
}
