import { describe, expect, it } from 'vitest';
import type { Backend } from '../../src/core/backend.js';
import type { Lease } from '../../src/core/types.js';
import type { Rheo } from '../../src/rheo.js';
import { useFixture, type BackendFactory } from './fixture.js';

const CHUNK = 5000;

/** Appends `count` events spread over the stream's partitions by key. */
async function appendMany(rheo: Rheo, stream: string, count: number): Promise<void> {
  for (let start = 0; start < count; start += CHUNK) {
    const n = Math.min(CHUNK, count - start);
    await rheo.appendBatch(
      stream,
      Array.from({ length: n }, (_, i) => ({ payload: { i: start + i }, key: `k${start + i}` })),
    );
  }
}

/**
 * Fetches and acks everything, except that `keep` decides which leases to hold
 * (never settle) and `reject` which to dead-letter.
 */
async function drain(
  rheo: Rheo,
  stream: string,
  group: string,
  decide: (lease: Lease, index: number) => 'ack' | 'hold' | 'reject',
  sample: (expected: StorageStats) => Promise<void>,
): Promise<{ acked: number; held: Lease[]; rejected: number }> {
  let index = 0;
  let acked = 0;
  let rejected = 0;
  const held: Lease[] = [];
  while (true) {
    const batch = await rheo.fetch(stream, group, { limit: 1000, leaseMs: 3_600_000 });
    if (batch.length === 0) break;
    // At its peak the group holds the leases just fetched on top of what it held.
    await sample({ deliveries: held.length + batch.length, deadLetters: rejected });
    const toAck: Lease[] = [];
    const toReject: Lease[] = [];
    for (const lease of batch) {
      const what = decide(lease, index++);
      if (what === 'ack') toAck.push(lease);
      else if (what === 'hold') held.push(lease);
      else toReject.push(lease);
    }
    const results = [...(await rheo.ackMany(toAck)), ...(await rheo.rejectMany(toReject, 'poison'))];
    expect(results.every((r) => r.ok)).toBe(true);
    acked += toAck.length;
    rejected += toReject.length;
    await sample({ deliveries: held.length, deadLetters: rejected });
  }
  return { acked, held, rejected };
}

interface StorageStats {
  deliveries: number;
  deadLetters: number;
}

/** Invariant 7: group storage is bounded by the unsettled window plus dead letters. */
export function registerStorageTests(makeBackend: BackendFactory, events: number): void {
  describe(`bounded storage (${events} events)`, () => {
    const fx = useFixture(makeBackend);

    /** Checks the group's storage at every sample, so growth that is reclaimed only at the end still fails. */
    const exactly = (backend: Backend, stream: string, group: string) => async (expected: StorageStats) => {
      expect(await backend.storageStats(stream, group)).toEqual(expected);
    };

    it('after acking every event the group holds no delivery state', async () => {
      const { rheo, backend } = fx();
      await rheo.createStream('big', { partitions: 4 });
      await rheo.createGroup('big', 'g');
      await appendMany(rheo, 'big', events);
      const { acked } = await drain(rheo, 'big', 'g', () => 'ack', exactly(backend, 'big', 'g'));
      expect(acked).toBe(events);
      expect(await backend.storageStats('big', 'g')).toEqual({ deliveries: 0, deadLetters: 0 });
      const lag = await rheo.lag('big', 'g');
      expect(lag.lag).toBe(0);
    });

    it('with a few held leases and dead letters it holds exactly those', async () => {
      const { rheo, backend } = fx();
      await rheo.createStream('big', { partitions: 4 });
      await rheo.createGroup('big', 'g');
      await appendMany(rheo, 'big', events);
      const holdAt = new Set([7, Math.floor(events / 2), events - 3]);
      const rejectAt = new Set([100, 101]);
      const { acked, held, rejected } = await drain(
        rheo,
        'big',
        'g',
        (_, i) => (holdAt.has(i) ? 'hold' : rejectAt.has(i) ? 'reject' : 'ack'),
        exactly(backend, 'big', 'g'),
      );
      expect([held.length, rejected, acked]).toEqual([3, 2, events - 5]);
      expect(await backend.storageStats('big', 'g')).toEqual({ deliveries: 3, deadLetters: 2 });
      expect((await rheo.groupInfo('big', 'g')).inflight).toBe(3);
      await rheo.ackMany(held);
      expect(await backend.storageStats('big', 'g')).toEqual({ deliveries: 0, deadLetters: 2 });
      expect((await rheo.lag('big', 'g')).lag).toBe(0);
    });

    it('a group that has consumed nothing holds nothing, while another group over the same log holds state', async () => {
      const { rheo, backend } = fx();
      await rheo.createStream('big', { partitions: 2 });
      await rheo.createGroup('big', 'busy');
      await rheo.createGroup('big', 'idle');
      const n = Math.min(events, 10_000);
      await appendMany(rheo, 'big', n);
      const { held, rejected } = await drain(
        rheo,
        'big',
        'busy',
        (_, i) => (i % 1000 === 0 ? 'hold' : i % 1000 === 1 ? 'reject' : 'ack'),
        async () => {
          expect(await backend.storageStats('big', 'idle')).toEqual({ deliveries: 0, deadLetters: 0 });
        },
      );
      expect(await backend.storageStats('big', 'busy')).toEqual({ deliveries: held.length, deadLetters: rejected });
      expect(held.length).toBeGreaterThan(0);
      // Replaying a group that never consumed reopens nothing it has to store.
      await rheo.replay('big', 'idle', { fromSequence: 1 });
      expect(await backend.storageStats('big', 'idle')).toEqual({ deliveries: 0, deadLetters: 0 });
      expect((await rheo.lag('big', 'idle')).lag).toBe(n);
    });
  });
}
