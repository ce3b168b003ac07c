import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import type { FetchErrorInfo } from '../../src/producer/producer-options.js';
import { backendFactories } from '../support/backends.js';
import { useStreamsFixture } from './support/fixture.js';
import type { ManualTimers } from './support/manual-timers.js';
import { nextEvent, readOne } from './support/wait.js';

for (const factory of backendFactories) {
  describe(`producer fetching (${factory.name})`, () => {
    const fx = useStreamsFixture(factory);

    it('backs off exponentially (capped) on fetch errors, never ends the stream, and recovers', async () => {
      const { faulty, timers } = fx();
      await fx().append(1);
      faulty.fail('fetch', 'backend_unavailable', { times: 4 });
      const producer = fx().producer({ fetchBackoff: { initialMs: 100, maxMs: 300 }, random: () => 0 });
      const errors: FetchErrorInfo[] = [];
      producer.on('fetch-error', (info) => errors.push(info));
      const first = nextEvent<FetchErrorInfo>(producer, 'fetch-error');
      producer.read(0);
      await first;
      for (let failures = 1; failures < 4; failures++) {
        const next = nextEvent<FetchErrorInfo>(producer, 'fetch-error');
        timers.advance(errors.at(-1)!.backoffMs);
        await next;
      }
      expect(errors.map((e) => [e.failures, e.backoffMs, e.error.code])).toEqual([
        [1, 100, 'backend_unavailable'],
        [2, 200, 'backend_unavailable'],
        [3, 300, 'backend_unavailable'],
        [4, 300, 'backend_unavailable'],
      ]);
      expect(producer.destroyed || producer.readableEnded).toBe(false);
      timers.advance(300);
      const lease = await readOne<Lease>(producer);
      expect(lease.event.sequence).toBe(1);
    });

    it('an empty fetch waits pollMs, and wakes early when an event is appended', async () => {
      const { faulty, rheo, stream, timers } = fx();
      const producer = fx().producer({ pollMs: 60_000 });
      producer.read(0);
      // Wait for the first (empty) fetch and the poll timer it leaves behind.
      await nextEventLoopUntil(() => faulty.calls.fetch >= 1 && timers.pendingDelays({ keepAlive: true }).length === 1);
      expect(timers.pendingDelays({ keepAlive: true })).toEqual([60_000]);
      await rheo.append(stream, { payload: { late: true } });
      const lease = await readOne<Lease<{ late: boolean }>>(producer);
      expect(lease.event.payload).toEqual({ late: true });
    });

    it('an empty fetch polls again after pollMs, then backs off to maxPollMs while notifications are trusted', async () => {
      const { faulty, timers } = fx();
      const producer = fx().producer({ pollMs: 1000, maxPollMs: 3000 });
      producer.read(0);
      await nextEventLoopUntil(() => faulty.calls.fetch === 1 && timers.pendingDelays({ keepAlive: true }).length === 1);
      expect(timers.pendingDelays({ keepAlive: true })).toEqual([1000]);
      // Nothing fetches again before the poll is due, however many turns pass.
      timers.advance(999);
      for (let i = 0; i < 20; i++) await new Promise<void>((resolve) => setImmediate(resolve));
      expect(faulty.calls.fetch).toBe(1);
      timers.advance(1);
      await nextEventLoopUntil(() => faulty.calls.fetch === 2 && timers.pendingDelays({ keepAlive: true }).length === 1);
      // Still empty, and no notification ended the wait: the next one is twice as long, then capped.
      expect(timers.pendingDelays({ keepAlive: true })).toEqual([2000]);
      timers.advance(2000);
      await nextEventLoopUntil(() => faulty.calls.fetch === 3 && timers.pendingDelays({ keepAlive: true }).length === 1);
      expect(timers.pendingDelays({ keepAlive: true })).toEqual([3000]);
      // An append is announced: the producer claims it at once and the wait starts at pollMs again.
      await fx().append(1);
      const lease = await readOne<Lease<{ n: number }>>(producer);
      expect(lease.event.payload).toEqual({ n: 1 });
      // (A store may announce it twice, in process and by its notification: the wait is pollMs either way.)
      await nextEventLoopUntil(() => timers.pendingDelays({ keepAlive: true }).join() === '1000');
      expect(faulty.calls.fetch).toBeGreaterThanOrEqual(4);
    });

    it('never backs off past the due time of a retry it nacked', async () => {
      await fx().append(1);
      const producer = fx().producer({ pollMs: 1000, maxPollMs: 8000 });
      const lease = await readOne<Lease>(producer);
      await producer.nack(lease, 'later', { delayMs: 5000 });
      const waits = await idleWaits(fx(), 1, 3);
      // 1000 after the claim, 2000 after an empty poll, then 2000 to the retry's due time (not 4000).
      expect(waits).toEqual([1000, 2000, 2000]);
      const retried = await readOne<Lease>(producer);
      expect([retried.event.sequence, retried.attempt]).toEqual([1, 2]);
    });

    it('a nack that failed bounds no wait: its retry is not due then', async () => {
      const { faulty } = fx();
      await fx().append(1);
      // The lease outlives the test: nothing becomes claimable again.
      const producer = fx().producer({ pollMs: 1000, maxPollMs: 8000, leaseMs: 60_000 });
      const lease = await readOne<Lease>(producer);
      faulty.fail('settle', 'stale_lease', { times: 1 });
      await producer.nack(lease, 'later', { delayMs: 5000 }).catch(() => undefined);
      const waits = await idleWaits(fx(), 1, 3);
      expect(waits).toEqual([1000, 2000, 4000]);
    });

    it('an ack or a reject bounds no wait', async () => {
      await fx().append(2);
      const producer = fx().producer({ pollMs: 1000, maxPollMs: 8000 });
      const first = await readOne<Lease>(producer);
      const second = await readOne<Lease>(producer);
      await producer.ack(first);
      await producer.reject(second, 'bad');
      const waits = await idleWaits(fx(), 1, 3);
      expect(waits).toEqual([1000, 2000, 4000]);
    });

    it('maxPollMs equal to pollMs keeps every idle wait at pollMs; below it is refused', async () => {
      const producer = fx().producer({ pollMs: 1000, maxPollMs: 1000 });
      producer.read(0);
      expect(await idleWaits(fx(), 1, 3)).toEqual([1000, 1000, 1000]);
      expect(() => fx().producer({ pollMs: 1000, maxPollMs: 999 })).toThrow(/maxPollMs/);
      expect(producer.maxPollMs).toBe(1000);
      expect(fx().producer({ pollMs: 300 }).maxPollMs).toBe(1500);
    });
  });
}

/**
 * The producer's next `count` idle waits, from the one after fetch `after`:
 * each read off the manual timers once that fetch is answered, then waited out.
 */
async function idleWaits(fixture: { faulty: { calls: { fetch: number } }; timers: ManualTimers }, after: number, count: number): Promise<number[]> {
  const { faulty, timers } = fixture;
  const waits: number[] = [];
  for (let fetch = after; fetch < after + count; fetch++) {
    await nextEventLoopUntil(() => faulty.calls.fetch === fetch && timers.pendingDelays({ keepAlive: true }).length === 1);
    const [wait] = timers.pendingDelays({ keepAlive: true });
    waits.push(wait!);
    timers.advance(wait!);
  }
  return waits;
}

async function nextEventLoopUntil(condition: () => boolean): Promise<void> {
  const { until } = await import('./support/wait.js');
  await until(condition, 'the condition holds');
}
