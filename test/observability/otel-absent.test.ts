import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const CHILD = fileURLToPath(new URL('./otel-child.ts', import.meta.url));

function runChild(mode: 'absent' | 'no-provider'): { metadata: unknown; seen: unknown[]; attempts: string[]; loaded: number } {
  const result = spawnSync(process.execPath, ['--import', 'tsx', CHILD, mode], { encoding: 'utf8', timeout: 60_000 });
  if (result.status !== 0) throw new Error(`child exited ${result.status}: ${result.stderr}`);
  return JSON.parse(result.stdout.trim().split('\n').at(-1)!) as ReturnType<typeof runChild>;
}

describe('without OpenTelemetry', () => {
  it('an application without @opentelemetry/api loads nothing of it and runs unchanged', () => {
    const out = runChild('absent');
    expect(out.attempts).toEqual(['@opentelemetry/api']); // asked for once, on createRheo
    expect(out.loaded).toBe(0);
    expect(out.metadata).toEqual({});
    expect(out.seen).toEqual([{}]);
  });

  it('with the API installed but no provider registered, events carry no trace context', () => {
    const out = runChild('no-provider');
    expect(out.loaded).toBeGreaterThan(0);
    expect(out.metadata).toEqual({});
    expect(out.seen).toEqual([{}]);
  });
});
