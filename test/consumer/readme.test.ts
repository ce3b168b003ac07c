import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from './harness.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MARKER = '<!-- quick-start: run by test/consumer/readme.test.ts -->';

/** The README's quick start, verbatim, with `'rheo'` pointed at the sources. */
function quickStart(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const at = readme.indexOf(MARKER);
  if (at < 0) throw new Error('README.md lost its quick-start marker');
  const match = /```ts\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!match) throw new Error('no ts block after the quick-start marker');
  const entry = pathToFileURL(join(ROOT, 'src/index.ts')).href;
  return match[1]!.replaceAll("from 'rheo'", `from '${entry}'`);
}

describe('README quick start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rheo-readme-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('consumes, then drains on SIGTERM and lets the process exit by itself', async () => {
    const file = join(dir, 'quick-start.mts');
    writeFileSync(file, quickStart());
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
