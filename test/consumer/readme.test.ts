import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { docBlock } from '../support/doc-blocks.js';
import { waitFor } from './harness.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** A documentation snippet marked `<!-- name: run by test/consumer/readme.test.ts -->`, verbatim. */
const snippet = (name: string): string => docBlock(name, 'test/consumer/readme.test.ts');

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

describe('docs/consuming.md partition ownership', () => {
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

describe('docs/pipelines.md pipeline', () => {
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
