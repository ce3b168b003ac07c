import { describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { isRheoError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/types.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { LeaseHistory, type SettleKind } from '../support/lease-history.js';
import { databaseUrl, makeTestBackend } from '../support/postgres.js';

const WORKERS = 6;
const ROUNDS = 20;
const EPOCHS = 3;
const MAX_LIMIT = 6;
const EVENTS = 240;

/** A small seeded generator (mulberry32), so a failing run can be repeated with its seed. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('postgres under concurrent fetch, settle, renew, expiry and replay', () => {
  // Six clients on a connection each work the same two partitions with short
  // leases on a shared ManualClock that they themselves move forward, so
  // claims of first deliveries (lease ranges), redeliveries (rows), reclaims
  // after expiry, renewals, releases, delayed nacks and deliberately stale
  // settles all race. Everything the backend answers is recorded in a
  // LeaseHistory and checked against invariants 1, 2, 6 and 7 afterwards.
  const seed = Number(process.env.RHEO_STRESS_SEED ?? 20261130);

  it(`keeps every lease invariant (seed ${seed})`, { timeout: 120_000 }, async () => {
    const random = seeded(seed);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const clock = new ManualClock();
    const backend = await makeTestBackend(clock);
    const admin = createRheo({ backend, clock });
    await admin.createStream('s', { partitions: 2 });
    await admin.createGroup('s', 'g', { maxAttempts: 1000 });
    await admin.appendBatch('s', Array.from({ length: EVENTS }, (_, i) => ({ payload: i, key: `k${i}` })));
    const workers = Array.from({ length: WORKERS }, () =>
      createRheo({
        backend: postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 1 } }, { schema: backend.schema, clock }),
        clock,
      }),
    );
    const history = new LeaseHistory();
    /** Receipts claimed and not yet acked or rejected: what the group may store rows for. */
    const open = new Set<string>();
    /** Positions dead-lettered in the current epoch. */
    let rejected = new Set<string>();
    /** Every lease ever returned, for deliberately stale settles. */
    const seen: Lease[] = [];
    const storage: Array<{ deliveries: number; bound: number }> = [];

    const settle = async (rheo: Rheo, kind: SettleKind, lease: Lease): Promise<void> => {
      const done = history.issue(kind, lease);
      try {
        if (kind === 'renew') {
          const renewed = await rheo.renew(lease, { leaseMs: 1000 + Math.floor(random() * 1000) });
          done({ ok: true, expiresAt: renewed.expiresAt });
          return;
        }
        if (kind === 'ack') await rheo.ack(lease);
        else if (kind === 'nack') await rheo.nack(lease, 'stress', { delayMs: pick([0, 0, 300]) });
        else if (kind === 'reject') await rheo.reject(lease, 'stress');
        else await rheo.release(lease);
        done({ ok: true });
        if (kind === 'ack' || kind === 'reject') open.delete(lease.receipt);
        if (kind === 'reject') rejected.add(`${lease.event.partition}:${lease.event.sequence}`);
      } catch (error) {
        done({ ok: false, code: isRheoError(error) ? error.code : String(error) });
      }
    };

    const claim = async (rheo: Rheo, consumerId: string, limit: number): Promise<Lease[]> => {
      const leases = await rheo.fetch('s', 'g', { limit, consumerId, leaseMs: 1000 + Math.floor(random() * 1000) });
      history.claimed(leases);
      for (const lease of leases) open.add(lease.receipt);
      seen.push(...leases);
      return leases;
    };

    const work = async (rheo: Rheo, index: number): Promise<void> => {
      let held: Lease[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        if (random() < 0.3) clock.advance(200 + Math.floor(random() * 700));
        held.push(...(await claim(rheo, `w${index}`, 1 + Math.floor(random() * MAX_LIMIT))));
        const keep: Lease[] = [];
        const calls: Promise<void>[] = [];
        for (const lease of held) {
          const roll = random();
          if (roll < 0.35) calls.push(settle(rheo, 'ack', lease));
          else if (roll < 0.47) calls.push(settle(rheo, 'nack', lease));
          else if (roll < 0.5) calls.push(settle(rheo, 'reject', lease));
          else if (roll < 0.6) calls.push(settle(rheo, 'release', lease));
          else if (roll < 0.75) {
            calls.push(settle(rheo, 'renew', lease));
            keep.push(lease);
          } else keep.push(lease); // held on without renewal: it expires and is reclaimed by someone
        }
        // A settle or renewal with a lease taken from anybody, most often a stale one.
        if (seen.length > 0 && random() < 0.5) calls.push(settle(rheo, pick(['ack', 'nack', 'renew', 'release'] as const), pick(seen)));
        await Promise.all(calls);
        held = keep.filter(() => random() < 0.8);
      }
    };

    const sample = async (): Promise<void> => {
      const bound = open.size + WORKERS * MAX_LIMIT;
      const lag = await admin.lag('s', 'g');
      for (const [p, info] of Object.entries(lag.partitions)) history.frontier(Number(p), info.frontier);
      const stats = await backend.storageStats('s', 'g');
      storage.push({ deliveries: stats.deliveries, bound: Math.max(bound, open.size + WORKERS * MAX_LIMIT) });
    };

    try {
      for (let epoch = 0; epoch < EPOCHS; epoch++) {
        let running = true;
        const sampler = (async () => {
          while (running) {
            await sample();
            await new Promise<void>((resolve) => setImmediate(resolve));
          }
        })();
        await Promise.all(workers.map((w, i) => work(w, i))).finally(() => (running = false));
        await sampler;
        if (epoch < EPOCHS - 1) {
          await admin.replay('s', 'g', { fromSequence: 1 });
          history.replayed();
          rejected = new Set();
        }
      }

      // Everything still open expires; one client settles it all, and the group ends settled.
      clock.advance(10_000);
      for (;;) {
        const leases = await claim(admin, 'final', 500);
        if (leases.length === 0) break;
        await Promise.all(leases.map((lease) => settle(admin, 'ack', lease)));
      }
      await sample();
    } finally {
      await Promise.all(workers.map((w) => w.close()));
    }

    expect(history.check()).toEqual([]);
    const counts = history.counts;
    // The run did what it claims to exercise.
    expect(counts.claims).toBeGreaterThan(EPOCHS * EVENTS);
    expect(counts.staleRefused).toBeGreaterThan(10);
    expect(seen.some((l) => l.attempt >= 3)).toBe(true);
    expect(storage.length).toBeGreaterThan(EPOCHS * 3);
    // Invariant 7 at every sample, not only at the end.
    expect(storage.filter((s) => s.deliveries > s.bound)).toEqual([]);
    const lag = await admin.lag('s', 'g');
    expect(lag.lag).toBe(0);
    for (const info of Object.values(lag.partitions)) expect(info.frontier).toBe(info.highWatermark);
    expect(await backend.storageStats('s', 'g')).toEqual({ deliveries: 0, deadLetters: rejected.size });
  });
});
