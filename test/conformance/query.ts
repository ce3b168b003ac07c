import { describe, expect, it } from 'vitest';
import type { ManualClock } from '../../src/core/clock.js';
import type { AppendInput, QueryOptions, RheoEvent } from '../../src/core/types.js';
import type { Rheo } from '../../src/rheo.js';
import { expectCode, stored, useFixture, type BackendFactory } from './fixture.js';

/** The query order: (timestamp, partition, sequence). */
export function byPosition(a: RheoEvent, b: RheoEvent): number {
  return a.timestamp.getTime() - b.timestamp.getTime() || a.partition - b.partition || a.sequence - b.sequence;
}

/** Pages through a query with `limit` until `nextCursor` is null. */
export async function pageThrough(
  rheo: Rheo,
  stream: string,
  options: QueryOptions,
): Promise<{ events: RheoEvent[]; pages: number }> {
  const events: RheoEvent[] = [];
  let cursor = options.cursor;
  let pages = 0;
  while (true) {
    const page = await rheo.query(stream, { ...options, cursor });
    pages++;
    events.push(...page.events);
    if (page.nextCursor === null) return { events, pages };
    expect(page.events).toHaveLength(options.limit ?? 100);
    cursor = page.nextCursor;
    if (pages > 10_000) throw new Error('query paging does not terminate');
  }
}

const SEED: AppendInput[] = [
  { type: 'order.created', key: 'o1', partition: 0, payload: { status: 'new', total: 10, tags: ['a', 'b'] }, metadata: { source: 'web' } },
  { type: 'order.paid', key: 'o1', partition: 0, payload: { status: 'paid', total: 10, customer: { tier: 'gold', id: 7 } }, metadata: { source: 'web', region: 'eu' } },
  { type: 'order.created', key: 'o2', partition: 1, payload: { status: 'new', total: 25, tags: ['b', 'c'] }, metadata: { source: 'app' } },
  { type: 'order.paid', key: 'o2', partition: 1, payload: { status: 'paid', total: 25, customer: { tier: 'silver', id: 8 } }, metadata: { source: 'app', region: 'us' } },
  { type: 'order.shipped', key: 'o1', partition: 0, payload: { status: 'shipped', total: 10 }, metadata: { source: 'batch' } },
  { type: 'note', key: 'n1', partition: 2, payload: 'plain', metadata: {} },
  { type: 'note', key: 'n2', partition: 2, payload: [1, { deep: true }], metadata: { source: 'web' } },
  { type: 'order.created', key: 'o3', partition: 2, payload: { status: 'new', total: 5, tags: [] }, metadata: { source: 'web' } },
  { type: 'order.paid', key: 'o3', partition: 1, payload: { status: 'paid', total: 5, customer: { tier: 'gold', id: 9 } }, metadata: { source: 'web', region: 'eu' } },
];

/** Nine events on three partitions, ten milliseconds apart. */
async function seed(rheo: Rheo, clock: ManualClock): Promise<RheoEvent[]> {
  await rheo.createStream('q', { partitions: 3 });
  const events: RheoEvent[] = [];
  for (const input of SEED) {
    clock.advance(10);
    events.push(stored(await rheo.append('q', input)));
  }
  return events;
}

function payloadOf(e: RheoEvent): Record<string, unknown> {
  return (typeof e.payload === 'object' && e.payload !== null && !Array.isArray(e.payload) ? e.payload : {}) as Record<
    string,
    unknown
  >;
}

export function registerQueryTests(makeBackend: BackendFactory): void {
  describe('query filters', () => {
    const fx = useFixture(makeBackend);

    it('with no filter returns every event in (timestamp, partition, sequence) order', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      // Same timestamp on three partitions: the partition breaks the tie.
      clock.advance(10);
      const tied = (
        await rheo.appendBatch('q', [
          { payload: 't2', partition: 2 },
          { payload: 't0', partition: 0 },
          { payload: 't1', partition: 1 },
          { payload: 't0b', partition: 0 },
        ])
      ).map(stored);
      const result = await rheo.query('q');
      expect(result.events).toEqual([...events, ...tied].sort(byPosition));
      expect(result.events.slice(-4).map((e) => e.payload)).toEqual(['t0', 't0b', 't1', 't2']);
      expect(result.nextCursor).toBeNull();
    });

    it('a partition the stream does not have is invalid_partition; listStreams is in name order', async () => {
      const { rheo } = fx();
      await rheo.createStream('q', { partitions: 2 });
      await rheo.createStream('b');
      await rheo.createStream('m');
      expect((await rheo.query('q', { partition: 1 })).events).toEqual([]);
      await expectCode(rheo.query('q', { partition: 2 }), 'invalid_partition');
      expect((await rheo.listStreams()).map((s) => s.name)).toEqual(['b', 'm', 'q']);
    });

    it('filters by one type or a list of types', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      const paid = await rheo.query('q', { type: 'order.paid' });
      expect(paid.events).toEqual(events.filter((e) => e.type === 'order.paid').sort(byPosition));
      expect(paid.events).toHaveLength(3);
      const two = await rheo.query('q', { type: ['note', 'order.shipped'] });
      expect(two.events.map((e) => e.type)).toEqual(['order.shipped', 'note', 'note']);
    });

    it('filters by key', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      const result = await rheo.query('q', { key: 'o1' });
      expect(result.events).toEqual(events.filter((e) => e.key === 'o1'));
      expect(result.events).toHaveLength(3);
    });

    it('where.payload is JSON containment on nested objects', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      const gold = await rheo.query('q', { where: { payload: { status: 'paid', customer: { tier: 'gold' } } } });
      expect(gold.events).toEqual([events[1], events[8]]);
      const none = await rheo.query('q', { where: { payload: { status: 'paid', total: 25, customer: { tier: 'gold' } } } });
      expect(none.events).toEqual([]);
    });

    it('where.payload array patterns match when every element is contained', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      const withB = await rheo.query('q', { where: { payload: { tags: ['b'] } } });
      expect(withB.events).toEqual([events[0], events[2]]);
      const withAandC = await rheo.query('q', { where: { payload: { tags: ['a', 'c'] } } });
      expect(withAandC.events).toEqual([]);
      const deep = await rheo.query('q', { where: { payload: [{ deep: true }] } });
      expect(deep.events).toEqual([events[6]]);
    });

    it('where.payload with a scalar matches an equal scalar payload only', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      const result = await rheo.query('q', { where: { payload: 'plain' } });
      expect(result.events).toEqual([events[5]]);
    });

    it('where.metadata is containment too, and combines with where.payload', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      const eu = await rheo.query('q', { where: { metadata: { region: 'eu' } } });
      expect(eu.events).toEqual([events[1], events[8]]);
      const webNew = await rheo.query('q', { where: { metadata: { source: 'web' }, payload: { status: 'new' } } });
      expect(webNew.events).toEqual([events[0], events[7]]);
    });

    it('from is inclusive and to is exclusive', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      const result = await rheo.query('q', { from: events[2]!.timestamp, to: events[5]!.timestamp });
      expect(result.events).toEqual([events[2], events[3], events[4]]);
    });

    it('afterSequence is exclusive and untilSequence inclusive, per partition', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      const result = await rheo.query('q', { afterSequence: 1, untilSequence: 2 });
      expect(result.events).toEqual(events.filter((e) => e.sequence === 2).sort(byPosition));
      expect(result.events.map((e) => [e.partition, e.sequence])).toEqual([
        [0, 2],
        [1, 2],
        [2, 2],
      ]);
    });

    it('filters by partition', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      const result = await rheo.query('q', { partition: 2 });
      expect(result.events).toEqual(events.filter((e) => e.partition === 2));
      expect(result.events.map((e) => e.sequence)).toEqual([1, 2, 3]);
    });

    it('order desc reverses the order', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      const result = await rheo.query('q', { order: 'desc', type: 'order.created' });
      expect(result.events).toEqual(events.filter((e) => e.type === 'order.created').sort(byPosition).reverse());
    });

    it('combines filters with AND', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      const result = await rheo.query('q', {
        type: ['order.created', 'order.paid'],
        partition: 1,
        where: { payload: { status: 'paid' } },
        from: events[3]!.timestamp,
      });
      expect(result.events).toEqual([events[3], events[8]]);
      expect(payloadOf(result.events[0]!).total).toBe(25);
    });

    it('limit bounds a page and a full page carries a cursor', async () => {
      const { rheo, clock } = fx();
      const events = await seed(rheo, clock);
      const first = await rheo.query('q', { limit: 4 });
      expect(first.events).toEqual(events.slice(0, 4));
      expect(typeof first.nextCursor).toBe('string');
      const second = await rheo.query('q', { limit: 4, cursor: first.nextCursor! });
      expect(second.events).toEqual(events.slice(4, 8));
      const third = await rheo.query('q', { limit: 4, cursor: second.nextCursor! });
      expect(third.events).toEqual(events.slice(8));
      expect(third.nextCursor).toBeNull();
    });

    it('rejects malformed cursors, bad limits, unknown where keys and bad orders', async () => {
      const { rheo, clock } = fx();
      await seed(rheo, clock);
      await expectCode(rheo.query('q', { cursor: 'not-a-cursor' }), 'invalid_argument');
      await expectCode(rheo.query('q', { cursor: Buffer.from('[1,2]').toString('base64url') }), 'invalid_argument');
      await expectCode(rheo.query('q', { limit: 0 }), 'invalid_argument');
      await expectCode(rheo.query('q', { limit: 1001 }), 'invalid_argument');
      await expectCode(rheo.query('q', { where: { other: 1 } as unknown as QueryOptions['where'] }), 'invalid_argument');
      await expectCode(rheo.query('q', { order: 'up' as unknown as 'asc' }), 'invalid_argument');
      await expectCode(rheo.query('q', { type: [] }), 'invalid_argument');
      await expectCode(rheo.query('q', { from: new Date(Number.NaN) }), 'invalid_argument');
      await expectCode(rheo.query('q', { afterSequence: -1 }), 'invalid_argument');
    });
  });

  describe('query paging', () => {
    const fx = useFixture(makeBackend);

    /** 50 keyed events over four partitions, three per millisecond so timestamps tie. */
    async function seedSpread(rheo: Rheo, clock: ManualClock): Promise<RheoEvent[]> {
      await rheo.createStream('p', { partitions: 4 });
      const events: RheoEvent[] = [];
      for (let i = 0; i < 50; i++) {
        if (i % 3 === 0) clock.advance(1);
        events.push(stored(await rheo.append('p', { payload: { i }, key: `user-${i}`, type: i % 2 ? 'odd' : 'even' })));
      }
      expect(new Set(events.map((e) => e.partition)).size).toBe(4);
      return events;
    }

    it('pages ascending across partitions without skipping or duplicating', async () => {
      const { rheo, clock } = fx();
      const events = await seedSpread(rheo, clock);
      const { events: paged, pages } = await pageThrough(rheo, 'p', { limit: 7 });
      expect(pages).toBe(8);
      expect(paged).toEqual([...events].sort(byPosition));
    });

    it('pages descending across partitions without skipping or duplicating', async () => {
      const { rheo, clock } = fx();
      const events = await seedSpread(rheo, clock);
      const { events: paged } = await pageThrough(rheo, 'p', { limit: 6, order: 'desc' });
      expect(paged).toEqual([...events].sort(byPosition).reverse());
    });

    it('pages a filtered query: the filter holds on every page', async () => {
      const { rheo, clock } = fx();
      const events = await seedSpread(rheo, clock);
      const { events: paged, pages } = await pageThrough(rheo, 'p', { limit: 5, type: 'odd' });
      expect(paged).toEqual(events.filter((e) => e.type === 'odd').sort(byPosition));
      // 25 odd events in pages of 5: five full pages, then an empty one ends it.
      expect(pages).toBe(6);
    });

    it('events appended after a page was read show up on later pages exactly once', async () => {
      const { rheo, clock } = fx();
      const events = await seedSpread(rheo, clock);
      const first = await rheo.query('p', { limit: 10 });
      clock.advance(1);
      const late = stored(await rheo.append('p', { payload: 'late', key: 'late' }));
      const rest = await pageThrough(rheo, 'p', { limit: 10, cursor: first.nextCursor! });
      expect([...first.events, ...rest.events]).toEqual([...events, late].sort(byPosition));
    });
  });
}
