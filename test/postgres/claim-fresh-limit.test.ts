import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { Lease } from '../../src/core/types.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { makeTestBackend } from '../support/postgres.js';

/**
 * The fresh claim reads at most ceil(limit / n) sequences from each of n
 * partitions when it has proved that each one has that many (routines.ts),
 * and `limit` per partition otherwise. These are the cases where fewer than
 * ceil(limit / n) are claimable in some partition, so reading only that many
 * from the others would lease fewer than `limit`.
 */
async function open(partitions: number): Promise<Rheo> {
  const clock = new ManualClock();
  const rheo = createRheo({ backend: await makeTestBackend(clock), clock });
  await rheo.createStream('s', { partitions });
  return rheo;
}

async function append(rheo: Rheo, partition: number, count: number): Promise<void> {
  await rheo.appendBatch('s', Array.from({ length: count }, (_, i) => ({ partition, payload: i })));
}

const byPartition = (leases: Lease[]): number[][] => {
  const out: number[][] = [];
  for (const lease of leases) (out[lease.event.partition] ??= []).push(lease.event.sequence);
  return out.map((seqs) => [...seqs].sort((a, b) => a - b));
};

describe('postgres fresh claim, partitions with fewer fresh events than their share', () => {
  it('an even backlog: each partition gives its share, round-robin', async () => {
    const rheo = await open(4);
    for (let p = 0; p < 4; p++) await append(rheo, p, 10);
    await rheo.createGroup('s', 'g');
    expect(byPartition(await rheo.fetch('s', 'g', { limit: 8 }))).toEqual([[1, 2], [1, 2], [1, 2], [1, 2]]);
    expect((await rheo.fetch('s', 'g', { limit: 40 })).length).toBe(32);
  });

  it('a partition with one event: the others fill the claim', async () => {
    const rheo = await open(2);
    await append(rheo, 0, 1);
    await append(rheo, 1, 9);
    await rheo.createGroup('s', 'g');
    expect(byPartition(await rheo.fetch('s', 'g', { limit: 10 }))).toEqual([[1], [1, 2, 3, 4, 5, 6, 7, 8, 9]]);
  });

  it('a partition whose fresh events are mostly replay holds: the others fill the claim', async () => {
    const rheo = await open(2);
    await append(rheo, 0, 6);
    await append(rheo, 1, 10);
    await rheo.createGroup('s', 'g');
    // Partition 0's 1..6 leased, 1 acked, then a replay to the start: 2..6
    // are open above the cursor, so held, and only 1 is fresh there.
    const first = await rheo.fetch('s', 'g', { limit: 6, partitions: [0] });
    expect(first.map((l) => l.event.sequence)).toEqual([1, 2, 3, 4, 5, 6]);
    await rheo.ack(first[0]!);
    await rheo.replay('s', 'g', { fromSequence: 1 });
    expect(byPartition(await rheo.fetch('s', 'g', { limit: 10 }))).toEqual([[1], [1, 2, 3, 4, 5, 6, 7, 8, 9]]);
  });

  it('a partition whose lowest events were trimmed: the others fill the claim', async () => {
    const rheo = await open(2);
    await append(rheo, 0, 5);
    await append(rheo, 1, 2);
    await rheo.trim('s', { keep: 2, force: true });
    await append(rheo, 1, 8);
    await rheo.createGroup('s', 'g');
    expect(byPartition(await rheo.fetch('s', 'g', { limit: 10 }))).toEqual([[4, 5], [1, 2, 3, 4, 5, 6, 7, 8]]);
  });
  it('a replay to sequence 1 after a trim: the others fill the claim', async () => {
    const rheo = await open(2);
    await rheo.createGroup('s', 'g');
    await append(rheo, 0, 5);
    await append(rheo, 1, 2);
    await rheo.trim('s', { keep: 2, force: true });
    await append(rheo, 1, 8);
    await rheo.replay('s', 'g', { fromSequence: 1 });
    expect(byPartition(await rheo.fetch('s', 'g', { limit: 10 }))).toEqual([[4, 5], [1, 2, 3, 4, 5, 6, 7, 8]]);
  });
});
