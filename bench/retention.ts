/**
 * `npx tsx bench/retention.ts [--quick] [--runs=N] [--throughput-only]`: the retention scenario
 * alone (it needs none of the peer queues `npm run bench` installs), on a
 * throwaway PostgreSQL 15 with the same settings as `npm run bench`, or on
 * RHEO_BENCH_DATABASE_URL. Prints every metric; `npm run bench` runs it too.
 */
import { BenchContext, log, pgAccess, summarize } from './lib/context.js';
import { formatNumber } from './lib/stats.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../scripts/throwaway-postgres.js';
import { retentionScenario } from './scenarios/retention.js';

const quick = process.argv.includes('--quick');
const runsArg = process.argv.find((a) => a.startsWith('--runs='));
const runs = runsArg ? Number(runsArg.slice('--runs='.length)) : quick ? 1 : 3;

let cluster: ThrowawayPostgres | null = null;
try {
  const given = process.env.RHEO_BENCH_DATABASE_URL;
  if (!given) {
    log('starting a throwaway PostgreSQL on 127.0.0.1 ...');
    cluster = await startThrowawayPostgres({ durable: true, label: 'rheo-bench-pg', settings: ['max_connections=200', 'max_wal_size=4GB'] });
  }
  const pg = await pgAccess(given ?? cluster!.url());
  log(`${pg.version}; ${runs} run(s)${quick ? ', quick sizes' : ''}`);
  const ctx = new BenchContext({ quick, runs, only: null }, pg);
  await retentionScenario(ctx, { storage: !process.argv.includes('--throughput-only') });
  for (const m of [...ctx.metrics.values()].map(summarize)) {
    process.stdout.write(
      `${m.name}: median ${formatNumber(m.median)} ${m.unit} (min ${formatNumber(m.min)}, max ${formatNumber(m.max)}, n=${m.samples.length})\n`,
    );
  }
  for (const note of ctx.notes) process.stdout.write(`${note}\n`);
} finally {
  cluster?.stop();
}
