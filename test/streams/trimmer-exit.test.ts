import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createRheo } from '../../src/rheo.js';

const CHILD = fileURLToPath(new URL('../support/trimmer-child.ts', import.meta.url));
const children = new Set<ReturnType<typeof spawn>>();
afterEach(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  children.clear();
});

function runChild(mode: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, mode], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
}

describe('the background trimmer', () => {
  // A trimmer timer that kept the event loop alive would hold the child open past the test timeout.
  for (const mode of ['close', 'leave'] as const) {
    it(`trims on its timer and never keeps the process alive (${mode === 'close' ? 'closed' : 'never closed'})`, async () => {
      const { code, stdout, stderr } = await runChild(mode);
      expect(stderr).toBe('');
      expect(code).toBe(0);
      expect(JSON.parse(stdout)).toEqual({ low: 9 });
    });
  }

  it('stops with close(): no pass starts afterwards', async () => {
    const rheo = createRheo({ retention: { intervalMs: 1 } });
    await rheo.createStream('s', { retention: { maxEvents: 0 } });
    await expect.poll(() => rheo.trimmer!.passes).toBeGreaterThan(2);
    await rheo.close();
    const passes = rheo.trimmer!.passes;
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(rheo.trimmer!.passes).toBe(passes);
    expect(rheo.trimmer!.lastError).toBeNull();
  });

  it('can be disabled, and rejects bad options', () => {
    expect(createRheo({ retention: { enabled: false } }).trimmer).toBeNull();
    for (const retention of [{ intervalMs: 0 }, { batchSize: 0 }, { enabled: 'no' }, 'fast']) {
      expect(() => createRheo({ retention } as never)).toThrow(/retention/);
    }
  });
});
