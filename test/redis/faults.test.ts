import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { RheoError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/types.js';
import { redisBackend } from '../../src/backends/redis/redis-backend.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { startThrowawayRedis, type ThrowawayRedis } from '../../scripts/throwaway-redis.js';
import { uniquePrefix } from '../support/redis.js';

/**
 * Real faults against a real redis-server run with `appendonly yes` and
 * `appendfsync always`: SIGKILL and restart of the server, and CLIENT KILL of
 * rheo's connections, while an appender and a fetch/ack worker run. Then
 * counts what was lost (appended and acknowledged but gone from the log, or
 * never acked), acked twice (a lost ack or an accepted stale one) and
 * delivered more than once (allowed: at-least-once), and checks that every
 * failure reached the caller as a RheoError with a transport code.
 */
const EVENTS = 600;
const TRANSPORT = new Set(['backend_unavailable', 'ambiguous']);

let server: ThrowawayRedis;
beforeAll(async () => {
  server = await startThrowawayRedis({ settings: ['--appendonly', 'yes', '--appendfsync', 'always'], label: 'rheo-redis-faults' });
}, 60_000);
afterAll(() => server?.stop());

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Tally {
  appended: Set<string>;
  deliveries: Map<string, number>;
  acked: Map<string, number>;
  /** Acks that failed with `ambiguous`: maybe applied, so the event may never come back. */
  ambiguousAcks: Set<string>;
  errors: Map<string, number>;
  foreign: unknown[];
}

function noteError(tally: Tally, error: unknown): void {
  if (error instanceof RheoError && TRANSPORT.has(error.code)) {
    tally.errors.set(error.code, (tally.errors.get(error.code) ?? 0) + 1);
  } else {
    tally.foreign.push(error);
  }
}

async function appender(rheo: Rheo, tally: Tally, done: () => boolean): Promise<void> {
  for (let i = 0; i < EVENTS; ) {
    const batch = Array.from({ length: Math.min(20, EVENTS - i) }, (_, k) => ({ id: `e-${i + k}`, key: `k${(i + k) % 13}`, payload: { n: i + k } }));
    try {
      const stored = await rheo.appendBatch('s', batch);
      for (const e of stored) tally.appended.add(e.id);
      i += batch.length;
    } catch (error) {
      // Retried with the same ids: an ambiguous batch that landed comes back as existed.
      noteError(tally, error);
      if (done()) return;
      await pause(20);
    }
    await pause(5);
  }
}

async function worker(rheo: Rheo, tally: Tally, done: () => boolean): Promise<void> {
  while (!done()) {
    let leases: Lease[] = [];
    try {
      leases = await rheo.fetch('s', 'g', { limit: 25, leaseMs: 1500 });
    } catch (error) {
      noteError(tally, error);
      await pause(20);
      continue;
    }
    if (leases.length === 0) {
      await pause(10);
      continue;
    }
    for (const lease of leases) tally.deliveries.set(lease.event.id, (tally.deliveries.get(lease.event.id) ?? 0) + 1);
    let results;
    try {
      results = await rheo.ackMany(leases);
    } catch (error) {
      if (error instanceof RheoError && error.code === 'ambiguous') for (const lease of leases) tally.ambiguousAcks.add(lease.event.id);
      noteError(tally, error);
      continue;
    }
    results.forEach((result, k) => {
      if (result.ok) tally.acked.set(leases[k]!.event.id, (tally.acked.get(leases[k]!.event.id) ?? 0) + 1);
      else if (result.error.code !== 'stale_lease') {
        if (result.error.code === 'ambiguous') tally.ambiguousAcks.add(leases[k]!.event.id);
        noteError(tally, result.error);
      }
    });
  }
}

describe('redis faults (appendfsync always)', () => {
  it('SIGKILL + restart of redis-server and CLIENT KILL lose nothing, accept no stale ack, and never crash the process', async () => {
    const prefix = uniquePrefix('faults');
    const rheo = createRheo({ backend: redisBackend({ url: server.urls[0]! }, { prefix }) });
    await rheo.migrate();
    await rheo.createStream('s', { partitions: 4 });
    await rheo.createGroup('s', 'g');
    const tally: Tally = { appended: new Set(), deliveries: new Map(), acked: new Map(), ambiguousAcks: new Set(), errors: new Map(), foreign: [] };
    let finished = false;
    const done = () => finished;
    const appending = appender(rheo, tally, done);
    const working = worker(rheo, tally, done);

    const admin = () => new Redis(server.urls[0]!, { lazyConnect: true, maxRetriesPerRequest: 0 });
    const faults: string[] = [];
    for (let round = 0; round < 2; round++) {
      await pause(250);
      server.kill();
      faults.push('SIGKILL');
      await pause(300);
      await server.start();
      await pause(250);
      const client = admin();
      client.on('error', () => {});
      await client.connect();
      // Every connection but this one: rheo's command and subscriber connections.
      await client.call('client', 'kill', 'type', 'normal', 'skipme', 'yes');
      faults.push('CLIENT KILL');
      client.disconnect();
    }
    await appending;
    // Drain: everything appended is eventually acked (expired leases come back).
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const lag = await rheo.lag('s', 'g').catch(() => null);
      if (lag && lag.lag === 0 && tally.appended.size === EVENTS) break;
      await pause(50);
    }
    finished = true;
    await working;

    const log = new Set<string>();
    for (let p = 0; p < 4; p++) for (const e of await rheo.read('s', { partition: p, limit: 10_000 })) log.add(e.id);
    const lost = [...tally.appended].filter((id) => !log.has(id));
    // An ack that failed as ambiguous may have landed; then the event is done
    // and never delivered again. The group's lag of 0 (asserted below) is what
    // proves every event reached a terminal state.
    const neverAcked = [...tally.appended].filter((id) => !tally.acked.has(id) && !tally.ambiguousAcks.has(id));
    const ackedTwice = [...tally.acked].filter(([, n]) => n > 1).length;
    const redelivered = [...tally.deliveries].filter(([, n]) => n > 1).length;
    const summary = {
      faults: faults.length,
      appended: tally.appended.size,
      log: log.size,
      lost: lost.length,
      neverAcked: neverAcked.length,
      ambiguousAcks: tally.ambiguousAcks.size,
      ackedTwice,
      redelivered,
      errors: Object.fromEntries(tally.errors),
    };
    console.log(`redis faults: ${JSON.stringify(summary)}`);

    expect(tally.foreign).toEqual([]);
    expect(tally.appended.size).toBe(EVENTS);
    expect(log.size).toBe(EVENTS); // no duplicate appends: ids are idempotent across retries
    expect(lost).toEqual([]);
    expect(neverAcked).toEqual([]);
    expect(ackedTwice).toBe(0);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
    expect(await rheo.deadLetters('s', 'g')).toEqual([]);
    // The faults were felt: some calls failed with a transport code.
    expect([...tally.errors.values()].reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    await rheo.close();
  }, 90_000);
});
