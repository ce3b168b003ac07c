import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/backends/postgres/migrations/index.js';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { RheoError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/types.js';
import { createRheo } from '../../src/rheo.js';
import { databaseUrl, makeTestBackend, sharedPool, uniqueSchema } from '../support/postgres.js';

describe('postgres concurrency', () => {
  it('concurrent appenders to one partition while a group consumes: every event acked exactly once, none skipped', async () => {
    // Several pools so appenders and the consumer really run on separate connections.
    const schema = uniqueSchema();
    const writers = Array.from({ length: 4 }, () =>
      createRheo({ backend: postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 2 } }, { schema }) }),
    );
    const reader = createRheo({ backend: postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 2 } }, { schema }) });
    try {
      await reader.migrate();
      await reader.createStream('s');
      await reader.createGroup('s', 'g');
      const perWriter = 250;
      const batch = 5;
      let writing = true;
      const appends = Promise.all(
        writers.map(async (w, wi) => {
          for (let i = 0; i < perWriter; i += batch) {
            const inputs = Array.from({ length: batch }, (_, j) => ({ payload: { w: wi, i: i + j } }));
            // Mix single appends and batches so commits interleave at every size.
            if (i % 2 === 0) await w.appendBatch('s', inputs);
            else for (const input of inputs) await w.append('s', input);
          }
        }),
      ).finally(() => {
        writing = false;
      });
      const acked = new Map<number, number>();
      const total = writers.length * perWriter;
      while (writing || acked.size < total) {
        // Read before the fetch is sent: a fetch whose snapshot predates the
        // last append's commit can answer empty after `writing` turns false.
        const appendsDone = !writing;
        const leases = await reader.fetch('s', 'g', { limit: 37 });
        const results = await reader.ackMany(leases);
        leases.forEach((l, i) => {
          expect(results[i]?.ok).toBe(true);
          acked.set(l.event.sequence, (acked.get(l.event.sequence) ?? 0) + 1);
        });
        if (appendsDone && leases.length === 0 && acked.size < total) break;
      }
      await appends;
      expect(acked.size).toBe(total);
      expect([...acked.values()].every((n) => n === 1)).toBe(true);
      expect([...acked.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
      const lag = await reader.lag('s', 'g');
      expect(lag.partitions[0]).toMatchObject({ frontier: total, highWatermark: total, lag: 0 });
    } finally {
      await Promise.all([...writers, reader].map((r) => r.close()));
    }
  });

  it('8 connections fetching concurrently over 2,000 events never lease the same delivery twice while leases are live', async () => {
    const clock = new ManualClock();
    const backend = await makeTestBackend(clock);
    const setup = createRheo({ backend, clock });
    await setup.createStream('s', { partitions: 3 });
    await setup.createGroup('s', 'g');
    await setup.appendBatch('s', Array.from({ length: 2000 }, (_, i) => ({ payload: i, key: `k${i}` })));
    // Eight backends on eight independent pools of one connection each.
    const workers = Array.from({ length: 8 }, () =>
      postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 1 } }, { schema: backend.schema, clock }),
    );
    try {
      const held = new Map<string, string>();
      const leases: Lease[] = [];
      await Promise.all(
        workers.map(async (w, wi) => {
          for (;;) {
            const batch = await w.fetch('s', 'g', { limit: 25, consumerId: `w${wi}`, leaseMs: 600_000, partitions: null, maxBytes: 1 << 24 });
            if (batch.length === 0) return;
            for (const lease of batch) {
              const previous = held.get(lease.receipt);
              expect(previous, `${lease.receipt} leased twice`).toBeUndefined();
              held.set(lease.receipt, lease.leaseId);
              leases.push(lease);
            }
          }
        }),
      );
      expect(leases).toHaveLength(2000);
      expect(held.size).toBe(2000);
      const results = await setup.ackMany(leases);
      expect(results.every((r) => r.ok)).toBe(true);
      expect((await setup.lag('s', 'g')).lag).toBe(0);
    } finally {
      await Promise.all(workers.map((w) => w.close()));
    }
  });

  it('two concurrent createStream of one name: exactly one already_exists', async () => {
    const backend = await makeTestBackend();
    const other = postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 1 } }, { schema: backend.schema });
    try {
      for (let round = 0; round < 10; round++) {
        const results = await Promise.allSettled([backend.createStream(`s${round}`, 2), other.createStream(`s${round}`, 2)]);
        const rejected = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
        expect(rejected).toHaveLength(1);
        expect(rejected[0]?.reason).toBeInstanceOf(RheoError);
        expect((rejected[0]?.reason as RheoError).code).toBe('already_exists');
      }
      const groups = await Promise.allSettled([
        backend.createGroup('s0', 'g', { start: { kind: 'after', after: 0, perPartition: {} }, maxAttempts: 3 }),
        other.createGroup('s0', 'g', { start: { kind: 'after', after: 0, perPartition: {} }, maxAttempts: 3 }),
      ]);
      expect(groups.filter((r) => r.status === 'rejected').map((r) => ((r as PromiseRejectedResult).reason as RheoError).code)).toEqual([
        'already_exists',
      ]);
    } finally {
      await other.close();
    }
  });

  it('concurrent migrate() from 4 backends applies each migration once', async () => {
    const schema = uniqueSchema();
    const backends = Array.from({ length: 4 }, () =>
      postgresBackend({ connectionString: databaseUrl(), poolConfig: { max: 1 } }, { schema }),
    );
    try {
      await Promise.all(backends.map((b) => b.migrate()));
      await Promise.all(backends.map((b) => b.migrate()));
      const { rows } = await sharedPool().query<{ version: number }>(`SELECT version FROM "${schema}".migrations ORDER BY version`);
      expect(rows.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
      await backends[0]!.createStream('s', 1);
      expect((await backends[3]!.listStreams()).map((s) => s.name)).toEqual(['s']);
    } finally {
      await Promise.all(backends.map((b) => b.close()));
    }
  });
});
