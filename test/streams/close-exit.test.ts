import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { databaseUrl, sharedPool, uniqueSchema } from '../support/postgres.js';

const CHILD = fileURLToPath(new URL('../support/close-child.ts', import.meta.url));

const children = new Set<ReturnType<typeof spawn>>();
// A child that never exits (the failure this file tests for) must not outlive its test.
afterEach(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  children.clear();
});

/** Runs the child to its natural exit; a child kept alive by a leftover timer or socket fails the test by its timeout. */
function runChild(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

// The child's pollMs is 100 s and its leases 60 s: a producer that kept
// polling or a renewal timer that survived close() would hold it open far
// past the test timeout.
describe('after rheo.close() the process exits on its own', () => {
  for (const backend of ['memory', 'postgres'] as const) {
    it(`${backend}: a producer pipeline ends with closed, a consumer stops, nothing keeps the event loop alive`, async () => {
      // The shared pool's cleanup drops the schema after the file.
      const args = backend === 'memory' ? ['memory'] : (sharedPool(), [databaseUrl(), uniqueSchema('close')]);
      const { code, stdout, stderr } = await runChild(args);
      expect(stderr).toBe('');
      expect(code).toBe(0);
      expect(JSON.parse(stdout)).toEqual({ piped: 'closed', consumer: 'stopped' });
    });
  }
});
