import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { partitionForKey } from '../../src/core/partitioner.js';
import type { Lease, RheoEvent } from '../../src/core/types.js';
import { fetchAll, pos, readAll, stored, useFixture, type BackendFactory } from './fixture.js';
import { byPosition, pageThrough } from './query.js';
import { registerFrontierProperty } from './frontier-property.js';

/** Modest, because the Postgres run executes the same properties. */
export const NUM_RUNS = 30;

const keyArb = fc.option(fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('ключ', '🦀', 'k1', 'k2')), {
  nil: undefined,
});

export function registerPropertyTests(makeBackend: BackendFactory, timeoutMs?: number): void {
  describe('properties', { timeout: timeoutMs }, () => {
    const fx = useFixture(makeBackend);
    let runs = 0;
    const fresh = (): string => `prop-${runs++}`;

    it('sequences stay contiguous per partition and keys route stably, under random keys and batching', async () => {
      const { rheo } = fx();
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 6 }),
          fc.array(fc.array(keyArb, { minLength: 1, maxLength: 5 }), { maxLength: 12 }),
          async (partitions, chunks) => {
            const stream = fresh();
            await rheo.createStream(stream, { partitions });
            for (const chunk of chunks) {
              const inputs = chunk.map((key, i) => ({ payload: i, key }));
              if (chunk.length === 1) await rheo.append(stream, inputs[0]!);
              else await rheo.appendBatch(stream, inputs);
            }
            const events = await readAll(rheo, stream);
            expect(events).toHaveLength(chunks.flat().length);
            for (let p = 0; p < partitions; p++) {
              const seqs = events.filter((e) => e.partition === p).map((e) => e.sequence);
              expect(seqs).toEqual(seqs.map((_, i) => i + 1));
            }
            for (const e of events) {
              expect(e.partition).toBe(e.key === null ? 0 : partitionForKey(e.key, partitions));
            }
          },
        ),
        { numRuns: NUM_RUNS },
      );
    });

    registerFrontierProperty(fx, fresh);

    it('old tokens never settle or renew a newer lease of the same delivery', async () => {
      const { rheo, clock } = fx();
      const kinds = ['ack', 'nack', 'reject', 'release', 'renew'] as const;
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.integer({ min: 1, max: 500 }), { minLength: 1, maxLength: 5 }),
          fc.array(fc.tuple(fc.nat(), fc.constantFrom(...kinds)), { minLength: 1, maxLength: 8 }),
          async (leaseMsList, tries) => {
            const stream = fresh();
            await rheo.createStream(stream);
            await rheo.createGroup(stream, 'g', { maxAttempts: 100 });
            await rheo.append(stream, { payload: 'x' });
            const leases: Lease[] = [];
            for (const leaseMs of [...leaseMsList, 1000]) {
              const [lease] = await rheo.fetch(stream, 'g', { leaseMs });
              expect(lease!.attempt).toBe(leases.length + 1);
              leases.push(lease!);
              clock.advance(leaseMs);
            }
            // The newest lease (1000 ms) has just expired but nobody reclaimed it: it is still current.
            const current = leases[leases.length - 1]!;
            const old = leases.slice(0, -1);
            const before = await rheo.groupInfo(stream, 'g');
            for (const [i, kind] of tries) {
              const lease = old[i % old.length]!;
              const call =
                kind === 'renew'
                  ? rheo.renew(lease)
                  : kind === 'nack'
                    ? rheo.nack(lease)
                    : kind === 'reject'
                      ? rheo.reject(lease)
                      : kind === 'release'
                        ? rheo.release(lease)
                        : rheo.ack(lease);
              await expect(call).rejects.toMatchObject({ code: 'stale_lease' });
            }
            expect(await rheo.groupInfo(stream, 'g')).toEqual(before);
            await rheo.ack(current);
            expect((await rheo.lag(stream, 'g')).lag).toBe(0);
          },
        ),
        { numRuns: NUM_RUNS },
      );
    });

    it('query paging never skips or duplicates, whatever the limit, order and filter', async () => {
      const { rheo, clock } = fx();
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 4 }),
          fc.array(fc.record({ key: keyArb, dt: fc.integer({ min: 0, max: 2 }), type: fc.constantFrom('a', 'b') }), {
            maxLength: 40,
          }),
          fc.integer({ min: 1, max: 8 }),
          fc.constantFrom('asc' as const, 'desc' as const),
          fc.option(fc.constantFrom('a', 'b'), { nil: undefined }),
          async (partitions, inputs, limit, order, type) => {
            const stream = fresh();
            await rheo.createStream(stream, { partitions });
            const events: RheoEvent[] = [];
            for (const input of inputs) {
              clock.advance(input.dt);
              events.push(stored(await rheo.append(stream, { payload: 0, key: input.key, type: input.type })));
            }
            const expected = events.filter((e) => type === undefined || e.type === type).sort(byPosition);
            if (order === 'desc') expected.reverse();
            const { events: paged } = await pageThrough(rheo, stream, { limit, order, type });
            expect(paged.map((e) => e.id)).toEqual(expected.map((e) => e.id));
            expect(paged).toEqual(expected);
          },
        ),
        { numRuns: NUM_RUNS },
      );
    });

    it('replay changes which deliveries are claimable, never the events', async () => {
      const { rheo, clock } = fx();
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 3 }),
          fc.array(fc.record({ key: keyArb, dt: fc.integer({ min: 0, max: 3 }), reject: fc.boolean() }), {
            minLength: 1,
            maxLength: 15,
          }),
          fc.oneof(
            fc.record({ kind: fc.constant('fromSequence' as const), n: fc.integer({ min: 1, max: 8 }) }),
            fc.record({ kind: fc.constant('from' as const), n: fc.nat() }),
            fc.record({ kind: fc.constant('eventIds' as const), picks: fc.array(fc.nat(), { minLength: 1, maxLength: 5 }) }),
          ),
          fc.option(fc.array(fc.nat({ max: 2 }), { minLength: 1, maxLength: 2 }), { nil: undefined }),
          async (partitions, inputs, spec, partitionPick) => {
            const stream = fresh();
            await rheo.createStream(stream, { partitions });
            await rheo.createGroup(stream, 'g');
            const events: RheoEvent[] = [];
            for (const input of inputs) {
              clock.advance(input.dt);
              events.push(await rheo.append(stream, { payload: { dt: input.dt }, key: input.key }));
            }
            const leases = await fetchAll(rheo, stream, 'g');
            const rejected = new Set<string>();
            for (const lease of leases) {
              if (inputs[events.findIndex((e) => e.id === lease.event.id)]!.reject) {
                await rheo.reject(lease, 'r');
                rejected.add(lease.event.id);
              } else {
                await rheo.ack(lease);
              }
            }
            const snapshot = await readAll(rheo, stream);
            const only = partitionPick ? [...new Set(partitionPick.filter((p) => p < partitions))] : undefined;
            const options = only && only.length > 0 ? { partitions: only } : {};
            const inScope = (e: RheoEvent): boolean => !options.partitions || options.partitions.includes(e.partition);
            let reopened: RheoEvent[];
            if (spec.kind === 'fromSequence') {
              await rheo.replay(stream, 'g', { fromSequence: spec.n }, options);
              reopened = events.filter((e) => inScope(e) && e.sequence >= spec.n);
            } else if (spec.kind === 'from') {
              const from = events[spec.n % events.length]!.timestamp;
              await rheo.replay(stream, 'g', { from }, options);
              reopened = events.filter((e) => inScope(e) && e.timestamp.getTime() >= from.getTime());
            } else {
              const ids = spec.picks.map((i) => events[i % events.length]!.id);
              await rheo.replay(stream, 'g', { eventIds: ids }, options);
              reopened = events.filter((e) => inScope(e) && ids.includes(e.id));
            }
            const again = await fetchAll(rheo, stream, 'g');
            expect(again.map(pos).sort()).toEqual(reopened.map(pos).sort());
            for (const lease of again) {
              expect(lease.attempt).toBe(1);
              expect(lease.event).toEqual(snapshot.find((e) => e.id === lease.event.id));
            }
            const stillDead = (await rheo.deadLetters(stream, 'g', { limit: 1000 })).map((d) => d.event.id).sort();
            const reopenedIds = new Set(reopened.map((e) => e.id));
            expect(stillDead).toEqual([...rejected].filter((id) => !reopenedIds.has(id)).sort());
            expect(await readAll(rheo, stream)).toEqual(snapshot);
          },
        ),
        { numRuns: NUM_RUNS },
      );
    });
  });
}
