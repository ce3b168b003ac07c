import { describe, expect, it } from 'vitest';
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
): Promise<{ acked: number; held: Lease[]; rejected: number }> {
  let index = 0;
  let acked = 0;
  let rejected = 0;
  const held: Lease[] = [];
  while (true) {
    const batch = await rheo.fetch(stream, group, { limit: 1000, leaseMs: 3_600_000 });
    if (batch.length === 0) break;
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
  }
  return { acked, held, rejected };
}

/** Invariant 7: group storage is bounded by the unsettled window plus dead letters. */
export function registerStorageTests(makeBackend: BackendFactory, events: number): void {
  describe(`bounded storage (${events} events)`, () => {
    const fx = useFixture(makeBackend);

    it('after acking every event the group holds no delivery state', async () => {
      const { rheo, backend } = fx();
      await rheo.createStream('big', { partitions: 4 });
      await rheo.createGroup('big', 'g');
      await appendMany(rheo, 'big', events);
      const { acked } = await drain(rheo, 'big', 'g', () => 'ack');
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
      const { acked, held, rejected } = await drain(rheo, 'big', 'g', (_, i) =>
        holdAt.has(i) ? 'hold' : rejectAt.has(i) ? 'reject' : 'ack',
      );
      expect([held.length, rejected, acked]).toEqual([3, 2, events - 5]);
      expect(await backend.storageStats('big', 'g')).toEqual({ deliveries: 3, deadLetters: 2 });
      expect((await rheo.groupInfo('big', 'g')).inflight).toBe(3);
      await rheo.ackMany(held);
      expect(await backend.storageStats('big', 'g')).toEqual({ deliveries: 0, deadLetters: 2 });
      expect((await rheo.lag('big', 'g')).lag).toBe(0);
    });

    it('a second group that has consumed nothing holds no delivery state either', async () => {
      const { rheo, backend } = fx();
      await rheo.createStream('big', { partitions: 2 });
      await rheo.createGroup('big', 'idle');
      await appendMany(rheo, 'big', Math.min(events, 10_000));
      expect(await backend.storageStats('big', 'idle')).toEqual({ deliveries: 0, deadLetters: 0 });
    });
  });
}
