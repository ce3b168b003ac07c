import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from './harness.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** A README snippet marked `<!-- name: run by ... -->`, verbatim, with `'rheo'` pointed at the sources. */
function snippet(name: string): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const at = readme.indexOf(`<!-- ${name}: run by test/consumer/readme.test.ts -->`);
  if (at < 0) throw new Error(`README.md lost its ${name} marker`);
  const match = /```ts\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!match) throw new Error(`no ts block after the ${name} marker`);
  const entry = pathToFileURL(join(ROOT, 'src/index.ts')).href;
  return match[1]!.replaceAll("from 'rheo'", `from '${entry}'`);
}

describe('README quick start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rheo-readme-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('consumes, then drains on SIGTERM and lets the process exit by itself', async () => {
    const file = join(dir, 'quick-start.mts');
    writeFileSync(file, snippet('quick-start'));
    const child = spawn(process.execPath, ['--import', 'tsx', file], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      await waitFor(() => stdout.includes('charged ') || child.exitCode !== null, 'the quick start to charge', 20_000);
      expect(stdout, stderr).toMatch(/charged \S+ on attempt 1/);
      child.kill('SIGTERM');
      // Exit code 0 by itself: the drain left no timer or handle behind.
      expect(await exit, stderr).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

describe('README partition ownership', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rheo-readme-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('handles every event as a member, shows the membership, leaves and exits by itself', async () => {
    const file = join(dir, 'partitions.mts');
    writeFileSync(file, snippet('partitions'));
    const child = spawn(process.execPath, ['--import', 'tsx', file], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const guard = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    clearTimeout(guard);
    expect(code, stderr).toBe(0);
    expect(stdout.split('\n').filter((l) => l.startsWith('shipped '))).toHaveLength(20);
    expect(stdout).toContain('members: 1');
  });
});

describe('README pipeline', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rheo-readme-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('writes every event through the producer and batch sink, reaches lag 0 and exits by itself', async () => {
    const file = join(dir, 'pipeline.mts');
    writeFileSync(file, snippet('pipeline'));
    const child = spawn(process.execPath, ['--import', 'tsx', file], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const guard = setTimeout(() => child.kill('SIGKILL'), 20_000); // a hang fails the test instead of leaking the child
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    clearTimeout(guard);
    expect(code, stderr).toBe(0);
    expect(stdout.trim()).toBe('wrote 250 rows; lag 0');
  });
});
