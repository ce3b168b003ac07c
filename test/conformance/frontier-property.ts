import fc from 'fast-check';
import { expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import type { Fixture } from './fixture.js';

const NUM_RUNS = 30;
const PARTITIONS = 2;
const MAX_ATTEMPTS = 3;

type Command =
  | { kind: 'append'; partition: number; count: number }
  | { kind: 'fetch'; limit: number; leaseMs: number }
  | { kind: 'settle'; how: 'ack' | 'nack' | 'reject' | 'release'; pick: number; delayMs: number }
  | { kind: 'advance'; ms: number };

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  fc.record({
    kind: fc.constant('append' as const),
    partition: fc.integer({ min: 0, max: PARTITIONS - 1 }),
    count: fc.integer({ min: 1, max: 3 }),
  }),
  fc.record({
    kind: fc.constant('fetch' as const),
    limit: fc.integer({ min: 1, max: 4 }),
    leaseMs: fc.integer({ min: 50, max: 300 }),
  }),
  fc.record({
    kind: fc.constant('settle' as const),
    how: fc.constantFrom('ack' as const, 'ack' as const, 'nack' as const, 'reject' as const, 'release' as const),
    pick: fc.nat(),
    delayMs: fc.constantFrom(0, 0, 100),
  }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 400 }) }),
);

/**
 * Drives random interleavings of append, fetch, ack, nack, reject, release and
 * expiry against a model of which deliveries are settled, and checks after
 * every step: the frontier is exactly one below the lowest unsettled sequence
 * (so it never passes one) and never moves back; no delivery is ever held by
 * two live leases; a settle succeeds exactly when its token is the current one;
 * `inflight` counts the deliveries currently leased.
 */
export function registerFrontierProperty(fx: () => Fixture, fresh: () => string): void {
  it('the frontier never passes an unsettled sequence, under random fetch/settle/expiry interleavings', async () => {
    const { rheo, clock } = fx();
    await fc.assert(
      fc.asyncProperty(fc.array(commandArb, { minLength: 1, maxLength: 40 }), async (commands) => {
        const stream = fresh();
        await rheo.createStream(stream, { partitions: PARTITIONS });
        await rheo.createGroup(stream, 'g', { maxAttempts: MAX_ATTEMPTS });
        await rheo.appendBatch(stream, [
          { payload: 0, partition: 0 },
          { payload: 1, partition: 0 },
          { payload: 2, partition: 1 },
        ]);
        const highWatermark = [2, 1];
        const acked = new Set<string>();
        let dead = new Set<string>();
        /** The lease each leased delivery is held under, by `partition:sequence`. */
        const current = new Map<string, Lease>();
        const everHeld: Lease[] = [];
        const lastFrontier = [0, 0];
        const key = (l: Lease): string => `${l.event.partition}:${l.event.sequence}`;

        for (const command of commands) {
          switch (command.kind) {
            case 'append':
              await rheo.appendBatch(
                stream,
                Array.from({ length: command.count }, () => ({ payload: 'x', partition: command.partition })),
              );
              highWatermark[command.partition]! += command.count;
              break;
            case 'advance':
              clock.advance(command.ms);
              break;
            case 'fetch': {
              const leases = await rheo.fetch(stream, 'g', { limit: command.limit, leaseMs: command.leaseMs });
              expect(leases.length).toBeLessThanOrEqual(command.limit);
              for (const lease of leases) {
                const k = key(lease);
                expect(acked.has(k), `acked delivery ${k} was handed out again`).toBe(false);
                expect(dead.has(k), `dead delivery ${k} was handed out again`).toBe(false);
                const previous = current.get(k);
                if (previous) {
                  expect(previous.expiresAt.getTime(), `${k} leased twice while live`).toBeLessThanOrEqual(clock.now());
                }
                expect(lease.attempt).toBeGreaterThanOrEqual(1);
                expect(lease.attempt).toBeLessThanOrEqual(MAX_ATTEMPTS);
                current.set(k, lease);
                everHeld.push(lease);
              }
              break;
            }
            case 'settle': {
              if (everHeld.length === 0) break;
              const lease = everHeld[command.pick % everHeld.length]!;
              const k = key(lease);
              const isCurrent = current.get(k)?.leaseId === lease.leaseId && !dead.has(k);
              const result =
                command.how === 'ack'
                  ? await rheo.ackMany([lease])
                  : command.how === 'nack'
                    ? await rheo.nackMany([lease], 'n', { delayMs: command.delayMs })
                    : command.how === 'reject'
                      ? await rheo.rejectMany([lease], 'r')
                      : await rheo.releaseMany([lease]);
              const outcome = result[0]!;
              expect(outcome.ok, `${command.how} of ${k} with ${isCurrent ? 'the current' : 'an old'} token`).toBe(
                isCurrent,
              );
              if (!outcome.ok) expect(outcome.error.code).toBe('stale_lease');
              if (outcome.ok) {
                current.delete(k);
                if (command.how === 'ack') acked.add(k);
              }
              break;
            }
          }

          const deadLetters = await rheo.deadLetters(stream, 'g', { limit: 10_000 });
          const nowDead = new Set(deadLetters.map((d) => `${d.event.partition}:${d.event.sequence}`));
          for (const k of dead) expect(nowDead.has(k), `dead letter ${k} disappeared`).toBe(true);
          for (const k of nowDead) expect(acked.has(k), `${k} is both acked and dead`).toBe(false);
          dead = nowDead;
          for (const k of dead) current.delete(k);

          const lag = await rheo.lag(stream, 'g');
          for (let p = 0; p < PARTITIONS; p++) {
            let lowestUnsettled = highWatermark[p]! + 1;
            for (let s = 1; s <= highWatermark[p]!; s++) {
              if (!acked.has(`${p}:${s}`) && !dead.has(`${p}:${s}`)) {
                lowestUnsettled = s;
                break;
              }
            }
            const reported = lag.partitions[p]!;
            expect(reported.frontier, `frontier of partition ${p}`).toBe(lowestUnsettled - 1);
            expect(reported.frontier).toBeGreaterThanOrEqual(lastFrontier[p]!);
            expect(reported.highWatermark).toBe(highWatermark[p]);
            lastFrontier[p] = reported.frontier;
          }
          expect((await rheo.groupInfo(stream, 'g')).inflight).toBe(current.size);
        }
      }),
      { numRuns: NUM_RUNS },
    );
  });
}
