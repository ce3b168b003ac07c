import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import { fetchAll, useFixture, type BackendFactory } from './fixture.js';
import { expectRetentionUnsupported } from './retention.js';

/** Modest, because the PostgreSQL run executes the same property. */
const NUM_RUNS = 20;

type Step =
  | { kind: 'append'; partition: number; count: number }
  | { kind: 'fetch'; group: number; limit: number }
  | { kind: 'settle'; group: number; take: number; reject: boolean }
  | { kind: 'trim'; keep: number; force: boolean };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('append' as const), partition: fc.integer({ min: 0, max: 1 }), count: fc.integer({ min: 1, max: 6 }) }),
  fc.record({ kind: fc.constant('fetch' as const), group: fc.integer({ min: 0, max: 1 }), limit: fc.integer({ min: 1, max: 5 }) }),
  fc.record({ kind: fc.constant('settle' as const), group: fc.integer({ min: 0, max: 1 }), take: fc.integer({ min: 1, max: 4 }), reject: fc.boolean() }),
  fc.record({ kind: fc.constant('trim' as const), keep: fc.integer({ min: 0, max: 4 }), force: fc.boolean() }),
);

/**
 * Random appends, fetches, acks/rejects and (forced or not) trims over two
 * groups: no lease is ever handed out below the low watermark, the retained
 * log is exactly `lowWatermark..highWatermark`, frontiers never sit below
 * `lowWatermark - 1`, a normal trim never passes a frontier, and after a
 * final drain every appended sequence was settled exactly once per group or
 * reported as removed unsettled by a forced trim.
 */
export function registerRetentionProperty(makeBackend: BackendFactory): void {
  describe('retention property', () => {
    const fx = useFixture(makeBackend);
    let runs = 0;

    it('every event is settled once or reported removed, per group, whatever trims interleave', async () => {
      const { rheo } = fx();
      // Without the retention capability there is nothing to trim: trims are refused as unsupported.
      if (!rheo.capabilities.retention) return expectRetentionUnsupported(rheo);
      await fc.assert(
        fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 30 }), async (steps) => {
          const stream = `ret-${runs++}`;
          const groups = ['a', 'b'];
          await rheo.createStream(stream, { partitions: 2 });
          for (const g of groups) await rheo.createGroup(stream, g);
          let appended = 0;
          const held: Lease[][] = [[], []];
          const settled = [0, 0];
          const removed = [0, 0];
          const lows = async (): Promise<number[]> => {
            const info = (await rheo.listStreams()).find((s) => s.name === stream)!;
            return [0, 1].map((p) => info.watermarks[p]!.lowWatermark);
          };
          const check = async (): Promise<void> => {
            const low = await lows();
            for (const g of groups) {
              const lag = await rheo.lag(stream, g);
              for (const p of [0, 1]) expect(lag.partitions[p]!.frontier).toBeGreaterThanOrEqual(low[p]! - 1);
            }
            for (const p of [0, 1]) {
              const events = await rheo.read(stream, { partition: p, limit: 1000 });
              const info = (await rheo.listStreams()).find((s) => s.name === stream)!.watermarks[p]!;
              expect(events.map((e) => e.sequence)).toEqual(
                Array.from({ length: info.highWatermark - info.lowWatermark + 1 }, (_, i) => info.lowWatermark + i),
              );
            }
          };
          for (const step of steps) {
            if (step.kind === 'append') {
              await rheo.appendBatch(stream, Array.from({ length: step.count }, (_, i) => ({ payload: i, partition: step.partition })));
              appended += step.count;
            } else if (step.kind === 'fetch') {
              const low = await lows();
              const leases = await rheo.fetch(stream, groups[step.group]!, { limit: step.limit });
              for (const l of leases) expect(l.event.sequence).toBeGreaterThanOrEqual(low[l.event.partition]!);
              held[step.group]!.push(...leases);
            } else if (step.kind === 'settle') {
              const batch = held[step.group]!.splice(0, step.take);
              const results = step.reject ? await rheo.rejectMany(batch, 'no') : await rheo.ackMany(batch);
              for (const r of results) {
                if (r.ok) settled[step.group]!++;
                else expect(r.error.code).toBe('stale_lease');
              }
            } else {
              const before = await Promise.all(groups.map((g) => rheo.lag(stream, g)));
              const report = await rheo.trim(stream, { keep: step.keep, force: step.force });
              if (!step.force) {
                expect(report.forced).toEqual([]);
                for (const [p, r] of Object.entries(report.partitions)) {
                  for (const lag of before) expect(r.lowWatermark - 1).toBeLessThanOrEqual(lag.partitions[Number(p)]!.frontier);
                }
              }
              for (const f of report.forced) removed[groups.indexOf(f.group)]! += f.unsettled;
            }
            await check();
          }
          for (const [i, g] of groups.entries()) {
            const results = await rheo.ackMany([...held[i]!, ...(await fetchAll(rheo, stream, g))]);
            for (const r of results) {
              if (r.ok) settled[i]!++;
              else expect(r.error.code).toBe('stale_lease');
            }
            expect((await rheo.lag(stream, g)).lag).toBe(0);
            expect(settled[i]! + removed[i]!).toBe(appended);
          }
        }),
        { numRuns: NUM_RUNS },
      );
    });
  });
}
