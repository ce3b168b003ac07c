import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** What `npx rheo` runs: package.json's bin. */
export const CLI = join(ROOT, 'dist', 'cli.js');

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function isStale(): boolean {
  const sources = Math.max(newestSource(join(ROOT, 'src')), statSync(join(ROOT, 'tsup.config.ts')).mtimeMs);
  return !existsSync(CLI) || statSync(CLI).mtimeMs < sources;
}

/**
 * The tests run the built binary, as users do; `npm test` on a fresh clone has
 * not built it, so build once when dist/cli.js is missing or older than src/.
 * Test files run in parallel workers and tsup cleans dist/ first, so one
 * worker builds under a lock directory while the others wait for it.
 */
export async function ensureBuilt(): Promise<void> {
  const lock = join(tmpdir(), `rheo-cli-build-${createHash('sha256').update(ROOT).digest('hex').slice(0, 12)}`);
  const waitUntil = Date.now() + 280_000;
  while (existsSync(lock) || isStale()) {
    try {
      mkdirSync(lock);
    } catch {
      if (Date.now() > waitUntil) throw new Error(`another worker holds ${lock}; remove it if no build is running`);
      await new Promise((resolve) => setTimeout(resolve, 250));
      continue;
    }
    try {
      if (!isStale()) return;
      const result = spawnSync('npm', ['run', 'build'], { cwd: ROOT, encoding: 'utf8' });
      if (result.status !== 0) throw new Error(`npm run build failed:\n${result.stdout}\n${result.stderr}`);
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  }
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Environment without the variables the CLI reads, so each test says what it means. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  if (!('RHEO_DATABASE_URL' in extra)) delete env.RHEO_DATABASE_URL;
  if (!('RHEO_SCHEMA' in extra)) delete env.RHEO_SCHEMA;
  return env;
}

/** Runs the built CLI to completion. A hung child fails the test instead of stalling the run. */
export function runCli(args: string[], options: { input?: string; env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env: options.env ?? cleanEnv() });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`rheo ${args.join(' ')} did not exit\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, 25_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** Resolves when the accumulated output of `child` satisfies `test` (an event, not a sleep). */
export function waitForOutput(child: ChildProcess, test: (output: string) => boolean, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (d: Buffer): void => {
      output += d.toString('utf8');
      if (test(output)) {
        child.stdout?.off('data', onData);
        resolve(output);
      }
    };
    child.stdout?.on('data', onData);
    child.once('close', () => reject(new Error(`exited before ${what}; output:\n${output}`)));
  });
}
