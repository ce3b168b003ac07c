import { describe, expect, it } from 'vitest';
import type { RheoEvent } from '../../src/core/types.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { FaultyBackend } from '../support/faulty-backend.js';
import { expectCode, stored, useFixture, type BackendFactory } from './fixture.js';
import { pageThrough } from './query.js';

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

/** Ten events over three partitions, one millisecond apart, payload sizes all alike. */
async function seed(rheo: Rheo, advance: (ms: number) => void): Promise<RheoEvent[]> {
  await rheo.createStream('qa', { partitions: 3 });
  const events: RheoEvent[] = [];
  for (let i = 0; i < 10; i++) {
    advance(1);
    events.push(stored(await rheo.append('qa', { type: i % 2 ? 'odd' : 'even', partition: i % 3, payload: { n: i, pad: 'x'.repeat(20) } })));
  }
  return events;
}

export function registerQueryAllTests(makeBackend: BackendFactory): void {
  describe('queryAll', () => {
    const fx = useFixture(makeBackend);

    /** A second facade over the fixture's backend that counts backend.query calls (the fixture closes the backend). */
    function counted(): { rheo: Rheo; calls: () => number } {
      const { backend, clock } = fx();
      const faulty = new FaultyBackend(backend);
      return { rheo: createRheo({ backend: faulty, clock }), calls: () => faulty.calls.query };
    }

    it('yields the same events as paging by hand, in both orders and with filters', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, (ms) => clock.advance(ms));
      expect(await collect(rheo.queryAll('qa', { limit: 3 }))).toEqual(events);
      for (const options of [{ limit: 3, order: 'desc' as const }, { limit: 2, type: 'odd' }, { limit: 1000 }]) {
        const byHand = await pageThrough(rheo, 'qa', options);
        expect(await collect(rheo.queryAll('qa', options))).toEqual(byHand.events);
      }
    });

    it('is lazy: no query before the first event is asked for, the next page only past the current one', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, (ms) => clock.advance(ms));
      const { rheo: counting, calls } = counted();
      const iterator = counting.queryAll('qa', { limit: 4 })[Symbol.asyncIterator]();
      expect(calls()).toBe(0);
      const seen: RheoEvent[] = [];
      const callsAfter: number[] = [];
      for (let i = 0; i < events.length; i++) {
        const next = await iterator.next();
        expect(next.done).toBe(false);
        seen.push(next.value as RheoEvent);
        callsAfter.push(calls());
      }
      // Pages of 4: events 1-4 from the first call, 5-8 from the second, 9-10 from the third.
      expect(callsAfter).toEqual([1, 1, 1, 1, 2, 2, 2, 2, 3, 3]);
      expect((await iterator.next()).done).toBe(true);
      expect(calls()).toBe(3);
      expect(seen).toEqual(events);
    });

    it('leaving a for await early fetches no further page', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, (ms) => clock.advance(ms));
      const { rheo: counting, calls } = counted();
      const seen: RheoEvent[] = [];
      for await (const event of counting.queryAll('qa', { limit: 2 })) {
        seen.push(event);
        if (seen.length === 3) break;
      }
      expect(seen).toEqual(events.slice(0, 3));
      expect(calls()).toBe(2);
      // The iterator is finished: asking again neither yields nor queries.
      const again = counting.queryAll('qa', { limit: 2 })[Symbol.asyncIterator]();
      await again.return?.();
      expect(await again.next()).toEqual({ done: true, value: undefined });
      expect(calls()).toBe(2);
    });

    it('an empty result ends after one query', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('empty');
      await seed(rheo, (ms) => clock.advance(ms));
      const { rheo: counting, calls } = counted();
      expect(await collect(counting.queryAll('empty'))).toEqual([]);
      expect(calls()).toBe(1);
      expect(await collect(counting.queryAll('qa', { type: 'no-such-type' }))).toEqual([]);
      expect(calls()).toBe(2);
    });

    it('follows pages cut by maxBytes as well as by limit', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, (ms) => clock.advance(ms));
      // Every seeded event is the same size give or take a digit: a budget of 2.5 events holds two per page.
      const size = JSON.stringify(events[0]!.payload).length + 2;
      const options = { maxBytes: Math.floor(size * 2.5), limit: 100 };
      const byHand: RheoEvent[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await rheo.query('qa', { ...options, cursor });
        expect(page.events.length).toBeLessThanOrEqual(2);
        byHand.push(...page.events);
        cursor = page.nextCursor ?? undefined;
        pages++;
      } while (cursor !== undefined);
      expect(byHand).toEqual(events);
      const { rheo: counting, calls } = counted();
      expect(await collect(counting.queryAll('qa', options))).toEqual(events);
      expect(calls()).toBe(pages);
      expect(pages).toBeGreaterThanOrEqual(5);
    });

    it('bad input throws invalid_argument at the call and queries nothing; a missing stream fails on iteration', async () => {
      const { rheo: counting, calls } = counted();
      for (const bad of [{ limit: 0 }, { order: 'up' }, { cursor: '!!' }, { maxBytes: -1 }, { correlationId: '' }]) {
        await expectCode(Promise.resolve().then(() => counting.queryAll('qa', bad as never)), 'invalid_argument');
      }
      await expectCode(Promise.resolve().then(() => counting.queryAll('bad name!')), 'invalid_argument');
      expect(calls()).toBe(0);
      await expectCode(collect(counting.queryAll('missing')), 'stream_not_found');
    });

    it('a close between pages ends the iteration with closed', async () => {
      const { rheo, clock } = fx();
      await seed(rheo, (ms) => clock.advance(ms));
      const iterator = rheo.queryAll('qa', { limit: 1 })[Symbol.asyncIterator]();
      await iterator.next();
      await rheo.close();
      await expectCode(iterator.next(), 'closed');
    });
  });
}
