/**
 * `npm run chaos`: every chaos scenario at full length against its own
 * throwaway PostgreSQL cluster (default durability, since the restart
 * scenarios test what survives), then the Redis ones against their own
 * throwaway redis-server (appendonly yes, appendfsync always), then one table;
 * then exactly-once effects (competing consumers and partition ownership with
 * `transaction: true`; twice more with a fault proxy that loses answers to
 * COMMITs and other statements, the second through a throwaway PgBouncer in
 * transaction pooling mode) and the partition-ownership process scenarios, with
 * their own table. Exits 1 on any lost event, accepted stale settle or
 * commit, sequence gap, process crash, undrained group, duplicated effect,
 * duplicate beyond crash redeliveries, per-key order violation or
 * overlapping tenure. The PGlite scenario (one process per data directory)
 * SIGKILLs a chain of processes on one directory and checks what reopening
 * it finds against what they saw confirmed.
 *
 *     npm run chaos                      # all scenarios, full length
 *     npm run chaos -- --scale=0.2       # shorter
 *     npm run chaos -- --only=sigkill,immediate   # scenarios whose name contains any of these
 *     npm run chaos -- --only=redis      # the Redis scenarios only
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { bundleChildren } from '../test/chaos/child-bundle.js';
import { runScenario, type ChaosServer, type ScenarioResult, type ScenarioSpec } from '../test/chaos/scenario.js';
import { chaosScenarios, redisChaosScenarios } from '../test/chaos/scenarios.js';
import { startThrowawayPgbouncer } from './throwaway-pgbouncer.js';
import { runExactlyOnce } from '../test/chaos/exactly-once.js';
import {
  PARTITION_SCENARIOS,
  formatPartitionFailures,
  formatPartitionTable,
  runPartitionScenario,
  type PartitionScenarioResult,
} from '../test/chaos/partition-ownership.js';
import { formatFailures, formatTable } from '../test/chaos/table.js';
import {
  formatPgliteFailures,
  formatPgliteTable,
  pgliteDurabilityScenario,
  runPgliteDurability,
  type PgliteDurabilityResult,
} from '../test/chaos/pglite-durability.js';
import { startThrowawayPostgres } from './throwaway-postgres.js';
import { startThrowawayRedis } from './throwaway-redis.js';

const { values } = parseArgs({ options: { scale: { type: 'string', default: '1' }, only: { type: 'string' } } });
const scale = Number(values.scale);
if (!Number.isFinite(scale) || scale <= 0) throw new Error(`--scale must be a positive number, got ${values.scale}`);
const only = values.only?.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean) ?? [];
const scenarios = [...chaosScenarios(scale), ...redisChaosScenarios(scale)].filter((s) => only.length === 0 || only.some((o) => s.name.toLowerCase().includes(o)));

const workDir = mkdtempSync(join(tmpdir(), 'rheo-chaos-'));
const children = await bundleChildren();
const results: ScenarioResult[] = [];
/** A server per scenario: a restart must not reach into another scenario, and each starts from a clean server. */
async function startServer(spec: ScenarioSpec): Promise<{ server: ChaosServer; stop(): void }> {
  if (spec.backend === 'redis') {
    // appendfsync always: an append is acknowledged only once it is on disk, so the SIGKILL loses none.
    const redis = await startThrowawayRedis({ label: 'rheo-chaos', settings: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    return { server: { backend: 'redis', url: redis.urls[0]!, restart: () => redis.restart() }, stop: () => redis.stop() };
  }
  const cluster = await startThrowawayPostgres({ durable: true, label: 'rheo-chaos', settings: ['max_connections=200'] });
  return { server: { url: cluster.url(), restart: (mode) => cluster.restart(mode) }, stop: () => cluster.stop() };
}

for (const spec of scenarios) {
  const { server, stop } = await startServer(spec);
  try {
    process.stderr.write(`${spec.name}: `);
    const result = await runScenario(server, spec, { workDir, children });
    results.push(result);
    process.stderr.write(`${result.passed ? 'pass' : 'FAIL'} (${result.events} events, ${result.faults} faults, ${result.seconds.toFixed(1)} s)\n`);
  } finally {
    stop();
  }
}
// PGlite (one process per data directory): a chain of processes SIGKILLed at random points on one directory.
const pgliteResults: PgliteDurabilityResult[] = [];
const pgliteSpec = pgliteDurabilityScenario(scale);
if (only.length === 0 || only.some((o) => pgliteSpec.name.toLowerCase().includes(o))) {
  process.stderr.write(`${pgliteSpec.name}: `);
  const result = await runPgliteDurability(pgliteSpec, { workDir: mkdtempSync(join(workDir, 'pglite-')), child: children.pglite });
  pgliteResults.push(result);
  process.stderr.write(`${result.passed ? 'pass' : 'FAIL'} (${result.kills} kills, ${result.appended} appends, ${result.seconds.toFixed(1)} s)\n`);
}
children.remove();
rmSync(workDir, { recursive: true, force: true });

if (results.length > 0) process.stdout.write(`${formatTable(results)}\n`);
const failures = formatFailures(results);
if (failures) process.stdout.write(`\n${failures}\n`);
if (pgliteResults.length > 0) {
  process.stdout.write(`\n${formatPgliteTable(pgliteResults)}\n`);
  const pgliteFailures = formatPgliteFailures(pgliteResults);
  if (pgliteFailures) process.stdout.write(`\n${pgliteFailures}\n`);
}

// Exactly-once effects (consume({ transaction: true })) under SIGKILLs and terminated connections:
// competing consumers, and partition ownership (the offset commit joins the transaction, and every kill moves partitions).
let exactlyOncePassed = true;
// The "answers lost" runs add a fault proxy in front of the workers' connections that loses the answers
// to their statements after the server ran them (a COMMIT's 1 in 12 times), and resets connections;
// the partitions one also goes through PgBouncer in transaction pooling mode (pooler: 'transaction').
const LOST_ANSWERS = { commit: 1 / 12, answer: 1 / 400, reset: 1 / 1500 };
const exactlyOnceRuns: ReadonlyArray<{
  name: string;
  assignment: 'leases' | 'partitions';
  partitions: number;
  leaseMs: number;
  proxy?: typeof LOST_ANSWERS;
  pgbouncer?: boolean;
}> = [
  { name: 'exactly-once', assignment: 'leases', partitions: 4, leaseMs: 3_000 },
  { name: 'exactly-once partitions', assignment: 'partitions', partitions: 8, leaseMs: 2_000 },
  { name: 'exactly-once, answers lost', assignment: 'leases', partitions: 4, leaseMs: 3_000, proxy: LOST_ANSWERS },
  { name: 'exactly-once partitions, answers lost, pgbouncer', assignment: 'partitions', partitions: 8, leaseMs: 2_000, proxy: LOST_ANSWERS, pgbouncer: true },
];
for (const run of exactlyOnceRuns) {
  if (only.length > 0 && !only.some((o) => run.name.includes(o))) continue;
  const cluster = await startThrowawayPostgres({ durable: true, label: 'rheo-chaos', settings: ['max_connections=200'] });
  const bouncer = run.pgbouncer ? await startThrowawayPgbouncer({ target: { host: '127.0.0.1', port: cluster.port } }).catch((error: unknown) => {
    cluster.stop();
    throw error;
  }) : null;
  try {
    const events = Math.round(20_000 * scale);
    process.stderr.write(`${run.name}: `);
    const eo = await runExactlyOnce({
      url: cluster.url(),
      schema: 'exactly_once',
      assignment: run.assignment,
      partitions: run.partitions,
      events,
      workers: 4,
      leaseMs: run.leaseMs,
      seed: 13,
      faultEveryMs: 2_000,
      timeoutMs: 30 * 60_000,
      proxy: run.proxy,
      pgbouncerUrl: bouncer?.url('postgres'),
    });
    const passed = eo.rows === events && eo.distinct === events && eo.duplicated === 0 && eo.missing === 0 && eo.lag === 0;
    exactlyOncePassed &&= passed;
    process.stderr.write(`${passed ? 'pass' : 'FAIL'} (${eo.seconds.toFixed(1)} s)\n`);
    process.stdout.write(
      `\n${run.name}: ${events} events, ${eo.kills} SIGKILLs, ${eo.terminations} connections terminated; ` +
        (run.proxy ? `${eo.droppedCommits} COMMIT answers and ${eo.droppedAnswers - eo.droppedCommits} other answers lost, ${eo.proxyResets} connections reset by the proxy; ` : '') +
        `${eo.rows} effect rows, ${eo.distinct} distinct, ${eo.duplicated} duplicated, ${eo.missing} missing, lag ${eo.lag}\n`,
    );
  } finally {
    bouncer?.stop();
    cluster.stop();
  }
}
// Partition ownership (issue 11): member processes SIGKILLed, SIGSTOPped past their session, restarted one by one.
const partitionResults: PartitionScenarioResult[] = [];
const partitionScenarios = PARTITION_SCENARIOS.filter((name) => only.length === 0 || only.some((o) => name.toLowerCase().includes(o) || 'partition ownership'.includes(o)));
if (partitionScenarios.length > 0) {
  const cluster = await startThrowawayPostgres({ durable: true, label: 'rheo-chaos', settings: ['max_connections=200'] });
  try {
    for (const [i, name] of partitionScenarios.entries()) {
      process.stderr.write(`partition ownership, ${name}: `);
      const result = await runPartitionScenario(name, { url: cluster.url(), schema: `partitions_${i}`, scale: scale * 5 });
      partitionResults.push(result);
      process.stderr.write(`${result.passed ? 'pass' : 'FAIL'} (${result.events} events, ${result.seconds.toFixed(1)} s)\n`);
    }
  } finally {
    cluster.stop();
  }
  process.stdout.write(`\n${formatPartitionTable(partitionResults)}\n`);
  const failed = formatPartitionFailures(partitionResults);
  if (failed) process.stdout.write(`\n${failed}\n`);
}
process.exitCode = results.every((r) => r.passed) && pgliteResults.every((r) => r.passed) && exactlyOncePassed && partitionResults.every((r) => r.passed) ? 0 : 1;
