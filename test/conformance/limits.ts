import { describe, expect, it } from 'vitest';
import type { RheoLimits } from '../../src/core/limits.js';
import type { Lease, RheoEvent } from '../../src/core/types.js';
import { createRheo, type Rheo, type RheoDefaults } from '../../src/rheo.js';
import { expectCode, pos, readAll, useFixture, type BackendFactory, type Fixture } from './fixture.js';

/**
 * A payload whose event is exactly `bytes` bytes by the size rule: a JSON
 * string of `bytes - 4` characters (2 quotes) plus the default metadata `{}`.
 */
function sized(bytes: number): string {
  return 'x'.repeat(bytes - 4);
}

/** A second facade over the fixture's backend with other limits (not closed: the fixture closes the backend). */
function limited(fx: Fixture, limits: Partial<RheoLimits>, defaults: Partial<RheoDefaults> = {}): Rheo {
  return createRheo({ backend: fx.backend, clock: fx.clock, limits, defaults });
}

/** The size rule's bytes of an event as returned (payload and metadata written compactly; plain numbers only here). */
function sizeOf(event: RheoEvent): number {
  return Buffer.byteLength(JSON.stringify(event.payload)) + Buffer.byteLength(JSON.stringify(event.metadata));
}

function totalBytes(leases: Lease[]): number {
  return leases.reduce((n, l) => n + sizeOf(l.event), 0);
}

/**
 * Size limits and byte budgets (docs/design.md#invariants: every event has a maximum size,
 * checked at append; every fetch is bounded by bytes as well as by count).
 * Budgets are proven with small configured limits: the rule is the same for
 * 100 bytes as for 100 MB.
 */
export function registerLimitTests(makeBackend: BackendFactory): void {
  describe('size limits', () => {
    const fx = useFixture(makeBackend);

    it('the size rule counts payload plus metadata JSON in UTF-8 bytes, numbers as plain decimals', async () => {
      const f = fx();
      await f.rheo.createStream('s');
      const rheo = limited(f, { maxEventBytes: 40 });
      // {"a":"é"} is 10 bytes (é is 2 in UTF-8), {"m":[1,true,null]} 19: 29 in all.
      await rheo.append('s', { payload: { a: 'é' }, metadata: { m: [1, true, null] } });
      // "\n" is written as two characters, "\u0001" as six: 2 + 2 + 6 quotes included = 10, + {} = 12.
      const exact = limited(f, { maxEventBytes: 12 });
      await exact.append('s', { payload: '\n\u0001' });
      await expectCode(limited(f, { maxEventBytes: 11 }).append('s', { payload: '\n\u0001' }), 'event_too_large');
      // 1e21 is stored and returned as 22 digits by PostgreSQL: it counts 22, + {} = 24.
      await limited(f, { maxEventBytes: 24 }).append('s', { payload: 1e21 });
      await expectCode(limited(f, { maxEventBytes: 23 }).append('s', { payload: 1e21 }), 'event_too_large');
      // 1.5e-7 is 0.00000015: 10 bytes.
      await expectCode(limited(f, { maxEventBytes: 11 }).append('s', { payload: 1.5e-7 }), 'event_too_large');
      await limited(f, { maxEventBytes: 12 }).append('s', { payload: 1.5e-7 });
      expect((await readAll(f.rheo, 's')).map((e) => e.payload)).toEqual([{ a: 'é' }, '\n\u0001', 1e21, 1.5e-7]);
    });

    it('an event over maxEventBytes is event_too_large, names stream, size and limit, and writes nothing', async () => {
      const f = fx();
      await f.rheo.createStream('orders');
      const rheo = limited(f, { maxEventBytes: 100 });
      await rheo.append('orders', { payload: sized(100) });
      const error = await expectCode(rheo.append('orders', { payload: sized(101) }), 'event_too_large');
      expect(error.stream).toBe('orders');
      expect(error.message).toContain('"orders"');
      expect(error.message).toContain('101 bytes');
      expect(error.message).toContain('limit of 100 bytes');
      // Metadata counts too.
      await expectCode(rheo.append('orders', { payload: sized(90), metadata: { pad: 'y'.repeat(10) } }), 'event_too_large');
      expect((await readAll(f.rheo, 'orders')).map((e) => e.sequence)).toEqual([1]);
    });

    it('one oversized event fails the whole appendBatch, which writes nothing', async () => {
      const f = fx();
      await f.rheo.createStream('s', { partitions: 2 });
      const rheo = limited(f, { maxEventBytes: 100 });
      const inputs = [{ payload: sized(50) }, { payload: sized(50), partition: 1 }, { payload: sized(500) }, { payload: sized(50) }];
      await expectCode(rheo.appendBatch('s', inputs), 'event_too_large');
      expect(await readAll(f.rheo, 's')).toEqual([]);
    });

    it('an appendBatch over maxBatchBytes is event_too_large and writes nothing', async () => {
      const f = fx();
      await f.rheo.createStream('s');
      const rheo = limited(f, { maxEventBytes: 100, maxBatchBytes: 300 });
      await rheo.appendBatch('s', [{ payload: sized(100) }, { payload: sized(100) }, { payload: sized(100) }]);
      const error = await expectCode(
        rheo.appendBatch('s', [{ payload: sized(100) }, { payload: sized(100) }, { payload: sized(100) }, { payload: sized(4) }]),
        'event_too_large',
      );
      expect(error.message).toContain('maxBatchBytes');
      expect(await readAll(f.rheo, 's')).toHaveLength(3);
    });

    it('the default limit is 1 MiB per event', async () => {
      const f = fx();
      await f.rheo.createStream('s');
      expect(f.rheo.limits.maxEventBytes).toBe(1024 * 1024);
      expect(f.rheo.defaults.maxFetchBytes).toBe(16 * 1024 * 1024);
      await expectCode(f.rheo.append('s', { payload: sized(1024 * 1024 + 1) }), 'event_too_large');
      await f.rheo.append('s', { payload: sized(1024 * 1024) });
      expect(await readAll(f.rheo, 's')).toHaveLength(1);
    });

    it('limits and byte budgets must be positive integers', () => {
      const f = fx();
      for (const bad of [0, -1, 1.5, '10', 512 * 1024 * 1024]) {
        expect(() => limited(f, { maxEventBytes: bad as number })).toThrow(/maxEventBytes/);
        expect(() => limited(f, {}, { maxFetchBytes: bad as number })).toThrow(/maxFetchBytes/);
      }
    });
  });

  describe('byte budgets', () => {
    const fx = useFixture(makeBackend);

    it('fetch stops before the event that would pass maxBytes; the rest stays claimable', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', Array.from({ length: 10 }, () => ({ payload: sized(100) })));
      const first = await rheo.fetch('s', 'g', { limit: 10, maxBytes: 350 });
      expect(first.map(pos)).toEqual(['0:1', '0:2', '0:3']);
      expect(totalBytes(first)).toBe(300);
      const second = await rheo.fetch('s', 'g', { limit: 10, maxBytes: 400 });
      expect(second.map(pos)).toEqual(['0:4', '0:5', '0:6', '0:7']);
      const rest = await rheo.fetch('s', 'g', { limit: 10 });
      expect(rest.map(pos)).toEqual(['0:8', '0:9', '0:10']);
    });

    it('fetch always claims one event, even one larger than maxBytes', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', [{ payload: sized(500) }, { payload: sized(10) }]);
      expect((await rheo.fetch('s', 'g', { limit: 10, maxBytes: 100 })).map(pos)).toEqual(['0:1']);
      expect((await rheo.fetch('s', 'g', { limit: 10, maxBytes: 100 })).map(pos)).toEqual(['0:2']);
    });

    it('fetch across partitions stops at the first event over budget in round-robin order', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', Array.from({ length: 4 }, () => ({ payload: sized(100), partition: 0 })));
      await rheo.appendBatch('s', Array.from({ length: 4 }, () => ({ payload: sized(200), partition: 1 })));
      // Round 1: 0:1 (100) 1:1 (200); round 2: 0:2 (100), then 1:2 would make 600 > 450.
      const first = await rheo.fetch('s', 'g', { limit: 10, maxBytes: 450 });
      expect(first.map(pos)).toEqual(['0:1', '1:1', '0:2']);
      // The next fetch starts at partition 1: 1:2 (200), 0:3 (100), then 1:3 would make 500.
      const second = await rheo.fetch('s', 'g', { limit: 10, maxBytes: 450 });
      expect(second.map(pos)).toEqual(['1:2', '0:3']);
    });

    it('reclaimed and nacked deliveries count against the budget like fresh ones', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', Array.from({ length: 6 }, () => ({ payload: sized(100) })));
      const leased = await rheo.fetch('s', 'g', { limit: 4, leaseMs: 1000 });
      await rheo.nack(leased[1]!);
      clock.advance(1000);
      // 1, 2 (nacked), 3, 4 (expired) are claimable again, then 5 and 6 fresh: 250 bytes fit two.
      const again = await rheo.fetch('s', 'g', { limit: 10, maxBytes: 250 });
      expect(again.map((l) => [pos(l), l.attempt])).toEqual([
        ['0:1', 2],
        ['0:2', 2],
      ]);
      const next = await rheo.fetch('s', 'g', { limit: 10, maxBytes: 350 });
      expect(next.map((l) => [pos(l), l.attempt])).toEqual([
        ['0:3', 2],
        ['0:4', 2],
        ['0:5', 1],
      ]);
    });

    it('a budget that stops the walk does not dead-letter spent deliveries it never reached', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g', { maxAttempts: 1 });
      await rheo.append('s', { payload: sized(500), partition: 0 });
      await rheo.appendBatch('s', [{ payload: sized(10), partition: 1 }, { payload: sized(10), partition: 1 }]);
      const [one, two] = await rheo.fetch('s', 'g', { partitions: [1], limit: 2, leaseMs: 10 });
      expect([one, two].map((l) => l && pos(l))).toEqual(['1:1', '1:2']);
      // 1:1 is given back (claimable at attempt 1 again); 1:2 expires and is
      // spent: its next claim would pass maxAttempts.
      await rheo.release(one!);
      clock.advance(10);
      // The walk claims 1:1 and stops at 0:1 (the budget is spent); 1:2 comes
      // after both, so this fetch must not dead-letter it.
      const leases = await rheo.fetch('s', 'g', { limit: 10, maxBytes: 100 });
      expect(leases.map(pos)).toEqual(['1:1']);
      expect(await rheo.deadLetters('s', 'g')).toEqual([]);
      // The next walk without a budget reaches it.
      await rheo.ack(leases[0]!);
      expect((await rheo.fetch('s', 'g', { limit: 10 })).map(pos)).toEqual(['0:1']);
      expect((await rheo.deadLetters('s', 'g')).map((d) => [pos(d.event), d.reason])).toEqual([['1:2', 'max attempts exceeded']]);
    });

    it('spent deliveries a walk dead-letters cost nothing against the budget', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g', { maxAttempts: 1 });
      await rheo.append('s', { payload: sized(100), partition: 0 });
      await rheo.appendBatch('s', [{ payload: sized(500), partition: 1 }, { payload: sized(100), partition: 1 }]);
      expect((await rheo.fetch('s', 'g', { partitions: [1], limit: 1, leaseMs: 10 })).map(pos)).toEqual(['1:1']);
      clock.advance(10); // 1:1 is spent: its next claim would pass maxAttempts
      // Whichever partition the walk starts at, 1:1 is dead-lettered on the way and 0:1 and 1:2 both fit 200 bytes.
      const leases = await rheo.fetch('s', 'g', { limit: 10, maxBytes: 200 });
      expect(leases.map(pos).sort()).toEqual(['0:1', '1:2']);
      expect((await rheo.deadLetters('s', 'g')).map((d) => pos(d.event))).toEqual(['1:1']);
    });

    it('read stops at maxBytes (at least one event); paging by sequence still sees everything', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.appendBatch('s', Array.from({ length: 7 }, (_, i) => ({ payload: sized(100 + i) })));
      const page = await rheo.read('s', { limit: 100, maxBytes: 250 });
      expect(page.map((e) => e.sequence)).toEqual([1, 2]);
      // A page that lands exactly on the budget takes the last one in (100 + 101 bytes).
      expect((await rheo.read('s', { limit: 100, maxBytes: 201 })).map((e) => e.sequence)).toEqual([1, 2]);
      expect((await rheo.read('s', { after: 2, limit: 100, maxBytes: 1 })).map((e) => e.sequence)).toEqual([3]);
      const seen: number[] = [];
      for (let after = 0; ; ) {
        const events = await rheo.read('s', { after, limit: 100, maxBytes: 320 });
        if (events.length === 0) break;
        expect(events.reduce((n, e) => n + sizeOf(e), 0) <= 320 || events.length === 1).toBe(true);
        seen.push(...events.map((e) => e.sequence));
        after = events[events.length - 1]!.sequence;
      }
      expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7]);
    });

    it('query stops at maxBytes and still returns a cursor, so paging sees everything', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.appendBatch('s', Array.from({ length: 9 }, (_, i) => ({ payload: sized(100), partition: i % 2 })));
      const first = await rheo.query('s', { limit: 100, maxBytes: 250 });
      expect(first.events).toHaveLength(2);
      expect((await rheo.query('s', { limit: 100, maxBytes: 200 })).events).toHaveLength(2);
      expect(first.nextCursor).not.toBeNull();
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let pages = 0; pages < 20; pages++) {
        const page = await rheo.query('s', { limit: 100, maxBytes: 250, cursor });
        seen.push(...page.events.map(pos));
        if (page.nextCursor === null) break;
        cursor = page.nextCursor;
      }
      expect(seen).toHaveLength(9);
      expect(new Set(seen).size).toBe(9);
      // A page that fits whole ends without a cursor, as before.
      expect((await rheo.query('s', { limit: 100 })).nextCursor).toBeNull();
    });

    it('deadLetters stops at maxBytes (at least one); paging by id still sees every dead letter', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', Array.from({ length: 5 }, () => ({ payload: sized(100) })));
      await rheo.rejectMany(await rheo.fetch('s', 'g', { limit: 5 }));
      const first = await rheo.deadLetters('s', 'g', { limit: 100, maxBytes: 250 });
      expect(first.map((d) => d.event.sequence)).toEqual([1, 2]);
      // A page that lands exactly on the budget takes the last one in.
      expect((await rheo.deadLetters('s', 'g', { limit: 100, maxBytes: 200 })).map((d) => d.event.sequence)).toEqual([1, 2]);
      expect((await rheo.deadLetters('s', 'g', { after: first[1]!.id, maxBytes: 1 })).map((d) => d.event.sequence)).toEqual([3]);
      const seen: number[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await rheo.deadLetters('s', 'g', { limit: 100, maxBytes: 250, after });
        if (page.length === 0) break;
        seen.push(...page.map((d) => d.event.sequence));
        after = page[page.length - 1]!.id;
      }
      expect(seen).toEqual([1, 2, 3, 4, 5]);
    });

    it('rejects a maxBytes that is not a positive integer', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      for (const bad of [0, -1, 2.5, '100', 1e12]) {
        await expectCode(rheo.fetch('s', 'g', { maxBytes: bad as number }), 'invalid_argument');
        await expectCode(rheo.read('s', { maxBytes: bad as number }), 'invalid_argument');
        await expectCode(rheo.query('s', { maxBytes: bad as number }), 'invalid_argument');
        await expectCode(rheo.deadLetters('s', 'g', { maxBytes: bad as number }), 'invalid_argument');
      }
    });
  });
}
