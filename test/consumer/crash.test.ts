import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createRheo } from '../../src/rheo.js';
import { databaseUrl, makeTestBackend } from '../support/postgres.js';
import { waitFor } from './harness.js';

const CHILD = fileURLToPath(new URL('../support/consumer-crash-child.ts', import.meta.url));

// Postgres only: the crash needs a second process sharing the store, and the
// memory backend lives inside one process. Real time here (the database clock
// is the lease authority for both processes), with a short lease.
describe('consume: a crashed worker (postgres)', () => {
  it('after SIGKILL of a process holding leases, another consumer gets every event after expiry with attempt 2', async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend });
    const stream = 'payments';
    const group = 'ledger';
    const leaseMs = 1500;
    await rheo.createStream(stream, { partitions: 2 });
    await rheo.createGroup(stream, group);
    const appended = await rheo.appendBatch(
      stream,
      Array.from({ length: 6 }, (_, n) => ({ key: `account-${n}`, payload: { n } })),
    );

    const child = spawn(
      process.execPath,
      ['--import', 'tsx', CHILD, databaseUrl(), backend.schema, stream, group, '6', String(leaseMs)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      await waitFor(() => stdout.split('\n').filter((l) => l.startsWith('holding ')).length === 6, `the child to hold 6 leases (stderr: ${stderr})`, 20_000);
    } finally {
      child.kill('SIGKILL');
    }
    expect(await exited).toBe('SIGKILL');
    expect(stdout.split('\n').filter(Boolean).every((l) => l.endsWith(' 1'))).toBe(true);

    // Every handler run, so a duplicate delivery shows even if its ack was fenced.
    const runs: Array<[string, number]> = [];
    const survivor = rheo.consume({
      stream,
      group,
      consumerId: 'survivor',
      concurrency: 3,
      leaseMs,
      pollMs: 50,
      handler: (event, { attempt }) => {
        runs.push([event.id, attempt]);
        return 'ack';
      },
    });
    try {
      // Bounded polling: the leases expire on the database clock, leaseMs after their last renewal.
      await waitFor(() => survivor.stats().acked === 6, 'the survivor to ack all 6', 20_000);
    } finally {
      await survivor.stop();
    }
    expect(runs.map(([id]) => id).sort()).toEqual(appended.map((e) => e.id).sort());
    expect(runs.map(([, attempt]) => attempt)).toEqual([2, 2, 2, 2, 2, 2]);
    expect((await rheo.lag(stream, group)).lag).toBe(0);
    expect(await rheo.deadLetters(stream, group)).toEqual([]);
    await rheo.close();
  });
});
