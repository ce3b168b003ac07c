import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { duplicatedModules, unexportedDeclarations, valueExportsOf } from './package-test/bundle-checks.js';
import { entryCheckScript } from './package-test/entry-check.js';
import { pgliteCheckScript } from './package-test/pglite-check.js';
import { docBlocks, docFiles, namedBlock, toCommonJs } from './package-test/readme-blocks.js';
import { startThrowawayPostgres, type ThrowawayPostgres } from './throwaway-postgres.js';

/**
 * `npm run test:package`: the package as users install it. Builds, packs the
 * tarball, installs it into a scratch project from the registry's point of
 * view (the tarball plus its declared dependencies, nothing from this
 * checkout), and from there:
 *  1. checks the built files: every source module in one output per module
 *     system, and every type the declarations use exported;
 *  2. runs the PostgreSQL block of docs/backends/postgres.md verbatim as ESM, and its CommonJS
 *     equivalent, against a throwaway PostgreSQL;
 *  3. loads every runtime export with `import` and with `require`, checks that
 *     `rheo` and `rheo/postgres` share one implementation (errors keep their
 *     class and code across them) and runs `createBatchSink` in both;
 *  4. type-checks every ```ts block of the README and docs/ (see readme-blocks.ts for
 *     the rules) and a CommonJS consumer in a strict TypeScript project.
 * Build, pack and install failures end the run; after that every check runs
 * and the exit code is non-zero if any failed. `--keep` leaves the scratch
 * project for inspection; `RHEO_PACKAGE_TEST_NODE=/path/to/node` runs the
 * runtime checks (2 and 3) on another Node.js binary, to test `engines`.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const keep = process.argv.includes('--keep');
const userNode = process.env.RHEO_PACKAGE_TEST_NODE ?? process.execPath;

/**
 * CommonJS runs without require(esm): Node 20 before 20.19 has none, so an
 * ESM-only dependency reached from `require('rheo')` throws there (p-limit 7
 * did) even though it loads on a newer Node 20. Older binaries lack the flag
 * and need none.
 */
const COMMONJS_FLAGS = spawnSync(userNode, ['--no-experimental-require-module', '-e', '0']).status === 0 ? ['--no-experimental-require-module'] : [];
const nodeArgs = (file: string): string[] => (file.endsWith('.cjs') ? [...COMMONJS_FLAGS, file] : [file]);

interface PackageJson {
  name: string;
  exports: Record<string, string | { import?: { types?: string }; require?: { types?: string } }>;
}

/** A hang (a snippet that leaves a pool open, a stuck install) becomes a failure instead of a stuck CI job. */
const HANG_GUARD_MS = 10 * 60_000;

function run(command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): string {
  const result = spawnSync(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    encoding: 'utf8',
    timeout: HANG_GUARD_MS,
    killSignal: 'SIGKILL',
  });
  if (result.status !== 0) {
    const output = `${result.stdout ?? ''}${result.stderr ?? ''}`.trim();
    throw new Error(`${command} ${args.join(' ')} failed (${result.error?.message ?? `exit ${result.status}`})\n${output}`);
  }
  return result.stdout;
}

const failed: string[] = [];

/** Runs one check; a failed check is reported and the independent ones after it still run. */
async function step(name: string, check: () => string[] | void | Promise<string[] | void>): Promise<void> {
  let problems: string[];
  try {
    problems = (await check()) ?? [];
  } catch (error) {
    problems = [error instanceof Error ? error.message : String(error)];
  }
  if (problems.length === 0) return console.log(`ok    ${name}`);
  failed.push(name);
  console.log(`FAIL  ${name}\n      ${problems.join('\n').replaceAll('\n', '\n      ')}`);
}

function installedVersion(name: string): string {
  return (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
}

async function createDatabases(server: ThrowawayPostgres, names: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: server.url() });
  await client.connect();
  try {
    for (const name of names) {
      // CREATE DATABASE takes no parameters: the name is checked, then quoted.
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`unexpected database name ${name}`);
      await client.query(`CREATE DATABASE "${name}"`);
    }
  } finally {
    await client.end();
  }
}

async function migratedTables(url: string, schema: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = $1',
      [schema],
    );
    return rows[0]?.n ?? 0;
  } finally {
    await client.end();
  }
}

/** The source behind each entry point; a new entry point without one fails the run instead of going unchecked. */
const ENTRY_SOURCES: Record<string, string> = {
  '.': 'src/index.ts',
  './postgres': 'src/postgres.ts',
  './redis': 'src/redis.ts',
  './pglite': 'src/pglite.ts',
};

function expectedRuntimeExports(manifest: PackageJson): Record<string, string[]> {
  const expected: Record<string, string[]> = {};
  for (const subpath of Object.keys(manifest.exports)) {
    if (subpath === './package.json') continue;
    const source = ENTRY_SOURCES[subpath];
    if (!source) throw new Error(`package.json exports ${subpath}, which ENTRY_SOURCES in scripts/package-test.ts does not map to a source`);
    expected[manifest.name + subpath.slice(1)] = valueExportsOf(join(ROOT, source));
  }
  return expected;
}

async function main(): Promise<void> {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageJson;
  const docs = docFiles(ROOT);
  const scratch = mkdtempSync(join(tmpdir(), 'rheo-package-'));
  const project = join(scratch, 'project');
  let server: ThrowawayPostgres | null = null;
  try {
    // Build, pack and install are what every later check stands on: a failure there ends the run.
    run('npm', ['run', 'build', '--silent'], { cwd: ROOT });
    const packed = JSON.parse(
      run('npm', ['pack', '--json', '--silent', '--pack-destination', scratch], { cwd: ROOT }),
    ) as Array<{ filename: string }>;
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'rheo-package-test', private: true, type: 'module' }));
    // The type-checker and Node's types at the versions this repository builds with: what a user on Node 20 has.
    const tools = [`typescript@${installedVersion('typescript')}`, `@types/node@${installedVersion('@types/node')}`];
    const install = ['install', '--no-audit', '--no-fund', '--loglevel=error', join(scratch, packed[0]!.filename), ...tools];
    run('npm', install, { cwd: project });
    console.log(`ok    build, pack and install ${packed[0]!.filename} into a scratch project`);
    const version = run(userNode, ['--version'], { cwd: project }).trim();
    console.log(`      runtime checks on Node.js ${version}; CommonJS with ${COMMONJS_FLAGS.join(' ') || 'no flags'}`);

    const dist = join(project, 'node_modules', manifest.name, 'dist');
    await step('one copy of every module per module system', () => duplicatedModules(dist));
    const entryTypes = Object.values(manifest.exports)
      .flatMap((entry) => (typeof entry === 'string' ? [] : [entry.import?.types, entry.require?.types]))
      .filter((types): types is string => types !== undefined)
      .map((types) => types.replace('./dist/', ''));
    await step('every type the declarations use is exported', () => unexportedDeclarations(dist, entryTypes));

    server = await startThrowawayPostgres({ durable: false, label: 'rheo-package' });
    const pgUrl = server.url.bind(server);
    await createDatabases(server, ['readme_esm', 'readme_cjs', 'entries_esm', 'entries_cjs', 'cli']);

    const postgresBlock = namedBlock(docs, 'postgres').code;
    writeFileSync(join(project, 'readme-postgres.mjs'), postgresBlock);
    writeFileSync(join(project, 'readme-postgres.cjs'), toCommonJs(postgresBlock));
    for (const [file, database] of [
      ['readme-postgres.mjs', 'readme_esm'],
      ['readme-postgres.cjs', 'readme_cjs'],
    ] as const) {
      await step(`docs/backends/postgres.md PostgreSQL block runs as ${file}`, async () => {
        run(userNode, nodeArgs(file), { cwd: project, env: { ...process.env, DATABASE_URL: pgUrl(database) } });
        const tables = await migratedTables(pgUrl(database), 'rheo');
        return tables > 0 ? [] : [`it exited 0 but schema "rheo" in ${database} has no tables`];
      });
    }

    await step('the installed `rheo` bin runs through npx and migrates a database', async () => {
      run('npx', ['--no-install', 'rheo', 'migrate', '--url', pgUrl('cli'), '--schema', 'ops'], { cwd: project, env: process.env });
      const tables = await migratedTables(pgUrl('cli'), 'ops');
      return tables > 0 ? [] : ['npx rheo migrate exited 0 but schema "ops" has no tables'];
    });

    const expected = JSON.stringify(expectedRuntimeExports(manifest));
    for (const [file, system, database] of [
      ['entries.mjs', 'esm', 'entries_esm'],
      ['entries.cjs', 'cjs', 'entries_cjs'],
    ] as const) {
      await step(`every runtime export through ${system === 'esm' ? 'import' : 'require'}, one implementation behind rheo and rheo/postgres, createBatchSink (${file})`, () => {
        writeFileSync(join(project, file), entryCheckScript(system));
        const env = { ...process.env, DATABASE_URL: pgUrl(database), RHEO_EXPECTED_EXPORTS: expected };
        run(userNode, nodeArgs(file), { cwd: project, env });
      });
    }

    // rheo/pglite without its optional peer, then with it, through import and require.
    for (const peer of ['absent', 'present'] as const) {
      if (peer === 'present') run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', `@electric-sql/pglite@${installedVersion('@electric-sql/pglite')}`], { cwd: project });
      for (const system of ['esm', 'cjs'] as const) {
        const file = `pglite-${peer}.${system === 'esm' ? 'mjs' : 'cjs'}`;
        await step(`rheo/pglite through ${system === 'esm' ? 'import' : 'require'} with @electric-sql/pglite ${peer} (${file})`, () => {
          writeFileSync(join(project, file), pgliteCheckScript(system));
          run(userNode, nodeArgs(file), { cwd: project, env: { ...process.env, RHEO_PGLITE_PEER: peer } });
        });
      }
    }

    const blocks = docBlocks(docs).filter((block) => !block.skipped);
    await step(`${blocks.length} blocks of the README and docs/ and a CommonJS consumer type-check (strict, nodenext, skipLibCheck false, lib ESNext)`, () => {
      mkdirSync(join(project, 'readme'));
      for (const block of blocks) {
        writeFileSync(join(project, 'readme', `${block.file.replaceAll(/[^\w]+/g, '-')}-line-${block.line}.ts`), block.code);
      }
      writeFileSync(join(project, 'consumer.cts'), COMMONJS_CONSUMER);
      writeFileSync(join(project, 'tsconfig.json'), JSON.stringify(STRICT_TSCONFIG, null, 2));
      run(process.execPath, [join(project, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: project });
    });
  } finally {
    server?.stop();
    if (keep) console.log(`scratch project kept in ${project}`);
    else rmSync(scratch, { recursive: true, force: true });
  }
  if (failed.length > 0) throw new Error(`${failed.length} package check(s) failed`);
}

/** The strictest setup a user plausibly has; `skipLibCheck: false` checks rheo's declarations and its dependencies' too. */
const STRICT_TSCONFIG = {
  compilerOptions: {
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'es2022',
    strict: true,
    skipLibCheck: false,
    lib: ['ESNext'],
    types: ['node'],
    noEmit: true,
  },
  include: ['readme/*.ts', 'consumer.cts'],
};

/** The declarations a `require` user gets (`.d.cts`), used the way the README uses the ESM ones. */
const COMMONJS_CONSUMER = `import { createRheo, isRheoError, RheoError, type Lease, type RheoProducer } from 'rheo';
import { postgresBackend } from 'rheo/postgres';

export const rheo = createRheo({ backend: postgresBackend({ connectionString: 'postgres://127.0.0.1/app' }) });
export function isStale(error: unknown): error is RheoError {
  return isRheoError(error, 'stale_lease') && error instanceof RheoError;
}
export async function settle(lease: Lease<{ total: number }>): Promise<number> {
  await rheo.ack(lease);
  return lease.event.payload.total;
}
export async function firstTotal(producer: RheoProducer<{ total: number }>): Promise<number | undefined> {
  for await (const lease of producer) {
    // @ts-expect-error iterating a producer yields typed leases, not \`any\`
    const wrong: string = lease.event.payload.total;
    return lease.event.payload.total + wrong.length;
  }
  return undefined;
}
`;

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
