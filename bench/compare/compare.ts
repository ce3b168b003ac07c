/**
 * `npm run bench:compare -- <git ref> [--cases=consume-1,consume-8] [--events=N] [--rounds=R]`
 *
 * A regression guard for speed: checks the ref out in a scratch git worktree,
 * then runs the chosen cases (bench/compare/cases.ts) for that build and for
 * this working tree, interleaved (base, head, base, head, ...) on one
 * throwaway PostgreSQL 15 cluster (default durability), each build on its
 * own database migrated by itself, and for the Redis cases on one throwaway
 * redis-server (AOF everysec), each build under its own key prefix (a ref
 * without the Redis backend skips them). Every run is a fresh child process.
 * Prints, per case, the median drain rate and client CPU per event of each
 * build and their ratios (head / base). Interleaving spreads a shared
 * machine's noise over both builds; client CPU per event is the steadier figure.
 * The latency cases run both builds in one process instead, an idle
 * consumer each, with single appends alternating between them one by one
 * (latency.ts, `--appends` per build and round), and print the p50 of append
 * call → handler start.
 * Defaults: every case, 20000 events, 300 appends, 3 rounds. Both builds are bundled
 * with tsup first and run from their bundles, as users run them;
 * RHEO_COMPARE_SOURCE=1 runs their sources through tsx instead (whose
 * keepNames adds a __name() call to every closure created, which the bundle
 * does not have).
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startThrowawayPostgres } from '../../scripts/throwaway-postgres.js';
import { startThrowawayRedis, type ThrowawayRedis } from '../../scripts/throwaway-redis.js';
import { pgAccess } from '../lib/context.js';
import { COMPARE_CASES, isLatencyCase, type CompareBackend, type CompareCaseId } from './cases.js';

const here = dirname(fileURLToPath(import.meta.url));
const headRoot = resolve(here, '../..');

interface Args {
  ref: string;
  cases: CompareCaseId[];
  events: number;
  appends: number;
  rounds: number;
}

function parseArgs(argv: string[]): Args {
  let ref: string | null = null;
  let cases = Object.keys(COMPARE_CASES) as CompareCaseId[];
  let events = 20_000;
  let appends = 300;
  let rounds = 3;
  for (const arg of argv) {
    if (arg.startsWith('--cases=')) {
      cases = arg.slice('--cases='.length).split(',').filter(Boolean) as CompareCaseId[];
      for (const c of cases) if (!(c in COMPARE_CASES)) throw new Error(`unknown case ${c}; known: ${Object.keys(COMPARE_CASES).join(', ')}`);
    } else if (arg.startsWith('--events=')) events = Number(arg.slice('--events='.length));
    else if (arg.startsWith('--appends=')) appends = Number(arg.slice('--appends='.length));
    else if (arg.startsWith('--rounds=')) rounds = Number(arg.slice('--rounds='.length));
    else if (arg === '--help' || arg === '-h') {
      process.stdout.write(`usage: npm run bench:compare -- <git ref> [--cases=${Object.keys(COMPARE_CASES).join(',')}] [--events=N] [--appends=N] [--rounds=R]\n`);
      process.exit(0);
    } else if (!arg.startsWith('--') && ref === null) ref = arg;
    else throw new Error(`unknown argument ${arg}`);
  }
  if (ref === null) throw new Error('give the git ref to compare against, e.g. npm run bench:compare -- main');
  if (!(Number.isInteger(events) && events >= 100)) throw new Error('--events must be an integer of at least 100');
  if (!(Number.isInteger(appends) && appends > 20)) throw new Error('--appends must be an integer above 20 (the first 20 of each build warm up)');
  if (!(Number.isInteger(rounds) && rounds >= 1)) throw new Error('--rounds must be a positive integer');
  return { ref, cases, events, appends, rounds };
}

/**
 * Runs `case.ts` in a child against `root` (or `latency.ts` against both
 * roots); resolves with its last stdout line. `--expose-gc` lets the case
 * collect the warm-up's garbage before it starts its clocks.
 */
function child(root: string, args: string[], script = 'case.ts'): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const proc = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', join(here, script), root, ...args], {
      cwd: headRoot,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    proc.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    proc.once('error', reject);
    proc.once('exit', (code) => {
      if (code === 0) resolvePromise(out.trim().split('\n').at(-1) ?? '');
      else reject(new Error(`case ${args[0]} on ${root} exited with ${code}`));
    });
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const commit = execFileSync('git', ['rev-parse', '--verify', `${args.ref}^{commit}`], { cwd: headRoot, encoding: 'utf8' }).trim();
  const scratch = mkdtempSync(join(tmpdir(), 'rheo-compare-'));
  const baseRoot = join(scratch, 'base');
  execFileSync('git', ['worktree', 'add', '--detach', baseRoot, commit], { cwd: headRoot, stdio: 'ignore' });
  // The ref runs from source with this tree's dependencies (same toolchain for
  // both) when its lock file is the same; a ref with other runtime
  // dependencies (the previous release still used p-limit) gets its own.
  const lockOf = (root: string): string => readFileSync(join(root, 'package-lock.json'), 'utf8');
  if (lockOf(baseRoot) === lockOf(headRoot)) {
    symlinkSync(join(headRoot, 'node_modules'), join(baseRoot, 'node_modules'));
  } else {
    process.stdout.write(`${args.ref} has other dependencies than this tree: npm ci in the scratch worktree\n`);
    execFileSync('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: baseRoot, stdio: 'inherit' });
  }
  // Both builds run as users run them, from their bundles (case.ts), unless
  // RHEO_COMPARE_SOURCE=1 asks for their sources through tsx.
  if (process.env.RHEO_COMPARE_SOURCE !== '1') {
    for (const root of [baseRoot, headRoot]) {
      process.stdout.write(`building ${root === headRoot ? 'this tree' : args.ref} (npx tsup)\n`);
      execFileSync('npx', ['tsup', '--silent'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
    }
  }
  if (!existsSync(join(baseRoot, 'src/redis.ts')) && args.cases.some((c) => COMPARE_CASES[c].backend === 'redis')) {
    process.stdout.write(`${args.ref} has no Redis backend: its Redis cases are skipped\n`);
    args.cases = args.cases.filter((c) => COMPARE_CASES[c].backend !== 'redis');
  }
  const cluster = await startThrowawayPostgres({ durable: true, label: 'rheo-compare-pg', settings: ['max_connections=200', 'max_wal_size=4GB'] });
  let redis: ThrowawayRedis | null = null;
  const cleanup = (): void => {
    cluster.stop();
    redis?.stop();
    try {
      execFileSync('git', ['worktree', 'remove', '--force', baseRoot], { cwd: headRoot, stdio: 'ignore' });
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  };
  process.once('SIGINT', () => {
    cleanup();
    process.exit(130);
  });
  try {
    const pg = await pgAccess(cluster.url());
    if (args.cases.some((c) => COMPARE_CASES[c].backend === 'redis')) {
      redis = await startThrowawayRedis({ settings: ['--appendonly', 'yes', '--appendfsync', 'everysec'], label: 'rheo-compare-redis' });
    }
    const redisUrl = redis?.urls[0] ?? '';
    const builds = await Promise.all(
      (['base', 'head'] as const).map(async (name) => {
        const urls: Record<CompareBackend, string> = {
          postgres: await pg.createDatabase(`rheo_compare_${name}`),
          redis: `${redisUrl}/?prefix=compare-${name}`,
        };
        return { name, root: name === 'base' ? baseRoot : headRoot, urls };
      }),
    );
    const filled = new Set<string>();
    for (const b of builds) {
      for (const c of args.cases) {
        if (isLatencyCase(c)) continue;
        const { backend, partitions } = COMPARE_CASES[c];
        if (filled.has(`${b.name}/${backend}/${partitions}`)) continue;
        filled.add(`${b.name}/${backend}/${partitions}`);
        await child(b.root, ['fill', b.urls[backend], `compare-${partitions}`, String(args.events), String(partitions)]);
      }
    }
    process.stderr.write(`base ${args.ref} (${commit.slice(0, 9)}) against this tree; ${args.events} events, ${args.rounds} round(s)\n`);
    const results = new Map<string, Array<{ rate: number; cpuUs: number; serverUs: number | null }>>();
    const latencies = new Map<CompareCaseId, Array<{ base: number; head: number }>>();
    for (let round = 0; round < args.rounds; round++) {
      for (const c of args.cases) {
        if (isLatencyCase(c)) {
          const backend = COMPARE_CASES[c].backend;
          const [base, head] = builds;
          const line = await child(base!.root, [head!.root, c, base!.urls[backend], head!.urls[backend], String(args.appends)], 'latency.ts');
          const sample = JSON.parse(line) as { base: number; head: number };
          latencies.set(c, [...(latencies.get(c) ?? []), sample]);
          process.stderr.write(`  round ${round + 1} ${c}: p50 base ${sample.base.toFixed(3)} ms, head ${sample.head.toFixed(3)} ms\n`);
          continue;
        }
        // Alternate which build goes first, so neither always runs on a warmer cluster.
        const order = round % 2 === 0 ? builds : [...builds].reverse();
        for (const b of order) {
          const line = await child(b.root, [c, b.urls[COMPARE_CASES[c].backend], `compare-${COMPARE_CASES[c].partitions}`, String(args.events)]);
          const sample = JSON.parse(line) as { rate: number; cpuUs: number; serverUs: number | null };
          const key = `${c}/${b.name}`;
          results.set(key, [...(results.get(key) ?? []), sample]);
          const store = COMPARE_CASES[c].backend === 'redis' ? 'Redis' : 'PostgreSQL';
          const server = sample.serverUs === null ? '' : `, ${store} ${sample.serverUs.toFixed(1)} µs/event`;
          process.stderr.write(`  round ${round + 1} ${c} ${b.name}: ${Math.round(sample.rate)} events/s, client ${sample.cpuUs.toFixed(1)} µs CPU/event${server}\n`);
        }
      }
    }
    const rows = [['case', 'base events/s', 'head events/s', 'rate ratio', 'base µs/event', 'head µs/event', 'CPU ratio', 'base store µs/event', 'head store µs/event', 'store CPU ratio']];
    for (const c of args.cases) {
      if (isLatencyCase(c)) continue;
      const base = results.get(`${c}/base`)!;
      const head = results.get(`${c}/head`)!;
      const [br, hr] = [median(base.map((s) => s.rate)), median(head.map((s) => s.rate))];
      const [bc, hc] = [median(base.map((s) => s.cpuUs)), median(head.map((s) => s.cpuUs))];
      const server = (samples: typeof base): number => median(samples.map((s) => s.serverUs ?? Number.NaN));
      const [bs, hs] = [server(base), server(head)];
      rows.push([c, String(Math.round(br)), String(Math.round(hr)), `${(hr / br).toFixed(2)}×`, bc.toFixed(1), hc.toFixed(1), `${(hc / bc).toFixed(2)}×`, bs.toFixed(1), hs.toFixed(1), `${(hs / bs).toFixed(2)}×`]);
    }
    printTable(rows);
    if (latencies.size > 0) {
      // Per round, both builds' p50 over the same moments; the ratio is the median of the rounds' ratios.
      const table = [['latency case', 'base p50 ms', 'head p50 ms', 'ratio', 'rounds (base → head)']];
      for (const [c, samples] of latencies) {
        const ratio = median(samples.map((s) => s.head / s.base));
        const rounds = samples.map((s) => `${s.base.toFixed(2)} → ${s.head.toFixed(2)}`).join(', ');
        table.push([c, median(samples.map((s) => s.base)).toFixed(3), median(samples.map((s) => s.head)).toFixed(3), `${ratio.toFixed(2)}×`, rounds]);
      }
      printTable(table);
    }
  } finally {
    cleanup();
  }
}

function printTable(rows: string[][]): void {
  if (rows.length < 2) return;
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  for (const row of rows) process.stdout.write(`${row.map((cell, i) => cell.padEnd(widths[i]!)).join('  ')}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
