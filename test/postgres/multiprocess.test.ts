import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createRheo } from '../../src/rheo.js';
import { databaseUrl, makeTestBackend } from '../support/postgres.js';

const CHILD = fileURLToPath(new URL('../support/consumer-child.ts', import.meta.url));

function runChild(args: string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`consumer child exited with ${code}: ${err}`));
      else resolve(JSON.parse(out.trim().split('\n').pop() ?? '[]') as string[]);
    });
  });
}

describe('postgres across processes', () => {
  it('three processes consume one group over 3,000 events: each handed to exactly one handler once, frontier = high watermark', { timeout: 120_000 }, async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend });
    await rheo.createStream('s', { partitions: 3 });
    await rheo.createGroup('s', 'g');
    const total = 3000;
    const children = [0, 1, 2].map(() => runChild([databaseUrl(), backend.schema, 's', 'g', String(total)]));
    // Append while the children are already consuming.
    for (let i = 0; i < total; i += 100) {
      await rheo.appendBatch('s', Array.from({ length: 100 }, (_, j) => ({ payload: i + j, key: `k${(i + j) % 97}` })));
    }
    const results = await Promise.all(children);
    const all = results.flat();
    expect(all).toHaveLength(total);
    expect(new Set(all).size).toBe(total);
    const lag = await rheo.lag('s', 'g');
    expect(lag.lag).toBe(0);
    let sum = 0;
    for (const p of Object.values(lag.partitions)) {
      expect(p.frontier).toBe(p.highWatermark);
      sum += p.highWatermark;
    }
    expect(sum).toBe(total);
  });
});
