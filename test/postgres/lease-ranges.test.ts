import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { Lease } from '../../src/core/types.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { makeTestBackend, sharedPool } from '../support/postgres.js';

/**
 * Lease ranges (migration 002): a claim of contiguous fresh sequences stores
 * one row, and its leases are `token.sequence`. These tests reach the paths
 * where members leave a range one by one, which the conformance suite only
 * crosses by chance, and check the table itself.
 */
async function setup(events: number, partitions = 1): Promise<{ rheo: Rheo; clock: ManualClock; schema: string }> {
  const clock = new ManualClock();
  const backend = await makeTestBackend(clock);
  const rheo = createRheo({ backend, clock });
  await rheo.createStream('s', { partitions });
  await rheo.createGroup('s', 'g');
  await rheo.appendBatch(
    's',
    Array.from({ length: events }, (_, i) => ({ payload: i, partition: i % partitions })),
  );
  return { rheo, clock, schema: `"${backend.schema}"` };
}

async function rangeRows(schema: string): Promise<Array<{ first_seq: string; last_seq: string; settled: string }>> {
  const { rows } = await sharedPool().query<{ first_seq: string; last_seq: string; settled: string }>(
    `SELECT first_seq, last_seq, settled::text AS settled FROM ${schema}.lease_ranges ORDER BY partition, first_seq`,
  );
  return rows;
}

async function deliveryRows(schema: string): Promise<number> {
  const { rows } = await sharedPool().query<{ n: string }>(`SELECT count(*) AS n FROM ${schema}.deliveries`);
  return Number(rows[0]?.n);
}

const seqs = (leases: Lease[]) => leases.map((l) => l.event.sequence);

describe('postgres lease ranges', () => {
  it('a fresh claim is one range row; acks set its bits and the last one deletes it', async () => {
    const { rheo, schema } = await setup(6);
    const leases = await rheo.fetch('s', 'g', { limit: 6 });
    expect(new Set(leases.map((l) => l.leaseId)).size).toBe(6);
    expect(leases.every((l) => l.leaseId.endsWith(`.${l.event.sequence}`))).toBe(true);
    expect(await rangeRows(schema)).toEqual([{ first_seq: '1', last_seq: '6', settled: '000000' }]);
    expect(await deliveryRows(schema)).toBe(0);

    await rheo.ackMany([leases[1]!, leases[3]!]);
    expect(await rangeRows(schema)).toEqual([{ first_seq: '1', last_seq: '6', settled: '010100' }]);
    expect((await rheo.lag('s', 'g')).partitions[0]!.frontier).toBe(0);
    expect((await rheo.groupInfo('s', 'g')).inflight).toBe(4);

    await rheo.ack(leases[0]!);
    expect((await rheo.lag('s', 'g')).partitions[0]!.frontier).toBe(2);
    // A second ack of a member that already left the range is stale.
    const again = await rheo.ackMany([leases[1]!]);
    expect(again[0]!.ok).toBe(false);

    await rheo.ackMany([leases[2]!, leases[4]!, leases[5]!]);
    expect(await rangeRows(schema)).toEqual([]);
    expect(await rheo.backend.storageStats('s', 'g')).toEqual({ deliveries: 0, deadLetters: 0 });
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });

  it('nack, reject and release move single members out of the range', async () => {
    const { rheo, clock, schema } = await setup(4);
    const leases = await rheo.fetch('s', 'g', { limit: 4 });
    await rheo.nack(leases[0]!, 'again', { delayMs: 1000 });
    await rheo.reject(leases[1]!, 'bad');
    await rheo.release(leases[2]!);
    expect(await rangeRows(schema)).toEqual([{ first_seq: '1', last_seq: '4', settled: '1110' }]);
    expect(await deliveryRows(schema)).toBe(2); // the nacked and the released one, pending

    const dead = await rheo.deadLetters('s', 'g', { limit: 10 });
    expect(dead.map((d) => [d.event.sequence, d.attempt, d.reason])).toEqual([[2, 1, 'bad']]);
    // The released one is claimable now with its attempt given back; the nacked one after its delay.
    const now = await rheo.fetch('s', 'g', { limit: 10 });
    expect(now.map((l) => [l.event.sequence, l.attempt])).toEqual([[3, 1]]);
    clock.advance(1000);
    const later = await rheo.fetch('s', 'g', { limit: 10 });
    expect(later.map((l) => [l.event.sequence, l.attempt])).toEqual([[1, 2]]);
    // The member still in the range is untouched.
    await rheo.ack(leases[3]!);
    expect(await rangeRows(schema)).toEqual([]);
  });

  it('renewing some members of a range leaves the others to expire; renewing all extends the range', async () => {
    const { rheo, clock, schema } = await setup(6);
    const first = await rheo.fetch('s', 'g', { limit: 3, leaseMs: 1000 });
    const second = await rheo.fetch('s', 'g', { limit: 3, leaseMs: 1000 });
    clock.advance(500);
    const renewedOne = await rheo.renew(first[1]!, { leaseMs: 5000 });
    expect(renewedOne.expiresAt.getTime()).toBe(clock.now() + 5000);
    const renewedAll = await rheo.renewMany(second, { leaseMs: 5000 });
    expect(renewedAll.every((r) => r.ok)).toBe(true);
    // first: member 2 left as a row; second: still one range with a later expiry.
    expect(await rangeRows(schema)).toEqual([
      { first_seq: '1', last_seq: '3', settled: '010' },
      { first_seq: '4', last_seq: '6', settled: '000' },
    ]);

    clock.advance(500);
    const reclaimed = await rheo.fetch('s', 'g', { limit: 10 });
    expect(reclaimed.map((l) => [l.event.sequence, l.attempt])).toEqual([
      [1, 2],
      [3, 2],
    ]);
    expect((await rheo.ackMany([first[0]!, first[2]!])).every((r) => !r.ok)).toBe(true);
    expect((await rheo.ackMany([renewedOne, ...second])).every((r) => r.ok)).toBe(true);
    expect((await rheo.ackMany(reclaimed)).every((r) => r.ok)).toBe(true);
    expect(await rangeRows(schema)).toEqual([]);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });

  it('an expired range is reclaimed member by member; the rest keep their old lease until taken', async () => {
    const { rheo, clock, schema } = await setup(6);
    const leases = await rheo.fetch('s', 'g', { limit: 6, leaseMs: 1000 });
    await rheo.ack(leases[0]!);
    clock.advance(1000);
    const two = await rheo.fetch('s', 'g', { limit: 2 });
    expect(two.map((l) => [l.event.sequence, l.attempt])).toEqual([
      [2, 2],
      [3, 2],
    ]);
    expect(await rangeRows(schema)).toEqual([{ first_seq: '1', last_seq: '6', settled: '111000' }]);
    // Ack after expiry, before anyone reclaimed: still allowed for members left in the range.
    expect((await rheo.ackMany([leases[3]!]))[0]!.ok).toBe(true);
    expect((await rheo.ackMany([leases[1]!]))[0]!.ok).toBe(false);
    const rest = await rheo.fetch('s', 'g', { limit: 10 });
    expect(seqs(rest)).toEqual([5, 6]);
    expect(await rangeRows(schema)).toEqual([]);
    expect((await rheo.ackMany([...two, ...rest])).every((r) => r.ok)).toBe(true);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });

  it('with maxAttempts 1 an expired range member is dead-lettered when the walk passes it', async () => {
    const clock = new ManualClock();
    const backend = await makeTestBackend(clock);
    const rheo = createRheo({ backend, clock });
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g', { maxAttempts: 1 });
    await rheo.appendBatch('s', Array.from({ length: 4 }, (_, i) => ({ payload: i })));
    const leases = await rheo.fetch('s', 'g', { limit: 3, leaseMs: 1000 });
    clock.advance(1000);
    const next = await rheo.fetch('s', 'g', { limit: 10 });
    expect(seqs(next)).toEqual([4]);
    const dead = await rheo.deadLetters('s', 'g', { limit: 10 });
    expect(dead.map((d) => [d.event.sequence, d.reason])).toEqual([
      [1, 'max attempts exceeded'],
      [2, 'max attempts exceeded'],
      [3, 'max attempts exceeded'],
    ]);
    expect((await rheo.ackMany(leases)).every((r) => !r.ok)).toBe(true);
    // Only the new claim's range is left.
    expect(await rangeRows(`"${backend.schema}"`)).toEqual([{ first_seq: '4', last_seq: '4', settled: '0' }]);
  });

  it('a forged range lease id never settles: wrong sequence, wrong partition, wrong token', async () => {
    const { rheo, schema } = await setup(4, 2);
    const leases = await rheo.fetch('s', 'g', { limit: 4 });
    const p0 = leases.find((l) => l.event.partition === 0)!;
    const p1 = leases.find((l) => l.event.partition === 1)!;
    const token = p0.leaseId.split('.')[0]!;
    const forged: Lease[] = [
      { ...p0, leaseId: `${token}.${p0.event.sequence + 1}` },
      { ...p1, leaseId: `${token}.${p1.event.sequence}` },
      { ...p0, leaseId: `00000000-0000-4000-8000-000000000000.${p0.event.sequence}` },
      { ...p0, leaseId: token },
    ];
    const results = await rheo.ackMany(forged);
    expect(results.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual(['stale_lease', 'stale_lease', 'stale_lease', 'stale_lease']);
    expect((await rangeRows(schema)).every((r) => !r.settled.includes('1'))).toBe(true);
    // Mixed with real ones in one ackMany, each forged op fails alone.
    const mixed = await rheo.ackMany([leases[0]!, forged[0]!, leases[1]!, forged[2]!]);
    expect(mixed.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual(['ok', 'stale_lease', 'ok', 'stale_lease']);
    expect((await rheo.ackMany(leases.slice(2))).every((r) => r.ok)).toBe(true);
    expect(await rangeRows(schema)).toEqual([]);
  });

  it('acks of one range racing on many connections all apply', async () => {
    const { rheo, schema } = await setup(400);
    const leases = await rheo.fetch('s', 'g', { limit: 400 });
    const chunks = Array.from({ length: 40 }, (_, i) => leases.filter((_, j) => j % 40 === i));
    const results = (await Promise.all(chunks.map((chunk) => rheo.ackMany(chunk)))).flat();
    expect(results.every((r) => r.ok)).toBe(true);
    expect(await rangeRows(schema)).toEqual([]);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
  });

  it('replay splits the ranges it crosses into rows: open leases stay held, acked members come back', async () => {
    const { rheo, schema } = await setup(5);
    const leases = await rheo.fetch('s', 'g', { limit: 5 });
    await rheo.ackMany([leases[0]!, leases[1]!]);
    await rheo.replay('s', 'g', { fromSequence: 1 });
    expect(await rangeRows(schema)).toEqual([]);
    expect(await deliveryRows(schema)).toBe(3);
    const again = await rheo.fetch('s', 'g', { limit: 10 });
    expect(seqs(again)).toEqual([1, 2]);
    expect((await rheo.ackMany([...leases.slice(2), ...again])).every((r) => r.ok)).toBe(true);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
    // The cursor moved over the open rows above the replayed ones: nothing is offered twice.
    expect(await rheo.fetch('s', 'g', { limit: 10 })).toEqual([]);
  });
});
