import { describe, expect, it } from 'vitest';
import type { AppendInput, FetchOptions, JsonValue, Lease, QueryOptions } from '../../src/core/types.js';
import { MAX_JSON_DEPTH } from '../../src/core/limits.js';
import type { Rheo } from '../../src/rheo.js';
import { appendN, expectCode, readAll, useFixture, type BackendFactory } from './fixture.js';

/** An array nested `depth` levels deep (the outermost array is level 1). */
function nested(depth: number): JsonValue {
  let value: JsonValue = [];
  for (let i = 1; i < depth; i++) value = [value];
  return value;
}

/** Strings PostgreSQL cannot store (U+0000) or would silently change (a lone surrogate becomes U+FFFD). */
const UNSTORABLE: Array<[string, string]> = [
  ['U+0000', 'a\u0000b'],
  ['a lone high surrogate', 'a\ud800'],
  ['a lone low surrogate', '\udc00b'],
];

/** Dates no backend can store the same way: outside the years 0001..9999. */
const OUT_OF_RANGE_DATES: Array<[string, Date]> = [
  ['year 10000', new Date(Date.UTC(10000, 0, 1))],
  ['the largest Date', new Date(8.64e15)],
  ['the smallest Date', new Date(-8.64e15)],
  ['year 0', new Date('0000-12-31T23:59:59.999Z')],
];

function throwingGetter(): JsonValue {
  return Object.defineProperty({ a: 1 }, 'b', {
    enumerable: true,
    get() {
      throw new Error('getter exploded');
    },
  }) as JsonValue;
}

function throwingProxy(): JsonValue {
  return new Proxy(
    { a: 1 },
    {
      ownKeys() {
        throw new Error('trap exploded');
      },
    },
  ) as unknown as JsonValue;
}

function revokedProxy(): JsonValue {
  const { proxy, revoke } = Proxy.revocable({ a: 1 }, {});
  revoke();
  return proxy as unknown as JsonValue;
}

const UNREADABLE: Array<[string, () => JsonValue]> = [
  ['a throwing getter', throwingGetter],
  ['a proxy whose trap throws', throwingProxy],
  ['a revoked proxy', revokedProxy],
];

async function nothingWritten(rheo: Rheo): Promise<void> {
  expect(await readAll(rheo, 's')).toEqual([]);
}

/**
 * docs/design.md#invariants and #targets: the same input gets the same answer on every
 * backend, bad input is `invalid_argument`, and a failed call writes nothing.
 * The facade refuses these before any backend sees them; before, memory
 * accepted what PostgreSQL refused, PostgreSQL changed what memory kept, and
 * some failed with untyped errors.
 */
export function registerInputParityTests(makeBackend: BackendFactory): void {
  describe('input parity', () => {
    const fx = useFixture(makeBackend);

    it('a "__proto__" key in payload and metadata stays an own data property, never a prototype', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const body = () => JSON.parse('{"__proto__":{"isAdmin":true},"a":1}') as Record<string, JsonValue>;
      const appended = await rheo.append('s', { payload: body(), metadata: body() });
      const [read] = await readAll(rheo, 's');
      const [lease] = await rheo.fetch('s', 'g');
      const queried = await rheo.query('s', { where: { payload: JSON.parse('{"__proto__":{"isAdmin":true}}') as JsonValue } });
      expect(queried.events.map((e) => e.sequence)).toEqual([1]);
      for (const event of [appended, read!, lease!.event, queried.events[0]!]) {
        for (const value of [event.payload, event.metadata] as Array<Record<string, JsonValue>>) {
          expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
          expect(Object.hasOwn(value, '__proto__')).toBe(true);
          expect(Object.getOwnPropertyDescriptor(value, '__proto__')?.value).toEqual({ isAdmin: true });
          expect((value as { isAdmin?: unknown }).isAdmin).toBeUndefined();
          expect(value.a).toBe(1);
        }
      }
    });

    for (const [what, bad] of UNSTORABLE) {
      it(`${what} in type, key, id, consumerId, query type/key or eventIds is invalid_argument`, async () => {
        const { rheo } = fx();
        await rheo.createStream('s');
        await rheo.createGroup('s', 'g');
        for (const input of [{ payload: 1, type: bad }, { payload: 1, key: bad }, { payload: 1, id: bad }]) {
          await expectCode(rheo.append('s', input as AppendInput), 'invalid_argument');
          await expectCode(rheo.appendBatch('s', [{ payload: 0 }, input as AppendInput]), 'invalid_argument');
        }
        await nothingWritten(rheo);
        await appendN(rheo, 's', 1);
        await expectCode(rheo.fetch('s', 'g', { consumerId: bad } as FetchOptions), 'invalid_argument');
        expect((await rheo.groupInfo('s', 'g')).inflight).toBe(0);
        for (const query of [{ type: bad }, { type: ['ok', bad] }, { key: bad }] as QueryOptions[]) {
          await expectCode(rheo.query('s', query), 'invalid_argument');
        }
        await expectCode(rheo.replay('s', 'g', { eventIds: [bad] }), 'invalid_argument');
        await expectCode(rheo.redrive('s', 'g', { eventIds: [bad] }), 'invalid_argument');
      });
    }

    for (const [what, date] of OUT_OF_RANGE_DATES) {
      it(`a timestamp of ${what} is invalid_argument wherever a Date is taken, and writes nothing`, async () => {
        const { rheo } = fx();
        await rheo.createStream('s');
        await expectCode(rheo.append('s', { payload: 1, timestamp: date }), 'invalid_argument');
        await expectCode(rheo.appendBatch('s', [{ payload: 1 }, { payload: 2, timestamp: date }]), 'invalid_argument');
        await nothingWritten(rheo);
        await expectCode(rheo.createGroup('s', 'g', { startAt: date }), 'invalid_argument');
        expect(await rheo.listGroups('s')).toEqual([]);
        await rheo.createGroup('s', 'g');
        await expectCode(rheo.query('s', { from: date }), 'invalid_argument');
        await expectCode(rheo.query('s', { to: date }), 'invalid_argument');
        await expectCode(rheo.replay('s', 'g', { from: date }), 'invalid_argument');
        await expectCode(rheo.resetGroup('s', 'g', { confirm: true, startAt: date }), 'invalid_argument');
      });
    }

    it('the first and last millisecond of years 0001..9999 are accepted and stored exactly', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const first = new Date('0001-01-01T00:00:00.000Z');
      const last = new Date('9999-12-31T23:59:59.999Z');
      await rheo.appendBatch('s', [{ payload: 1, timestamp: first }, { payload: 2, timestamp: last }]);
      expect((await readAll(rheo, 's')).map((e) => e.timestamp.toISOString())).toEqual([first.toISOString(), last.toISOString()]);
      expect((await rheo.query('s', { from: first, to: last })).events.map((e) => e.payload)).toEqual([1]);
    });

    it(`payload, metadata and query patterns nest at most ${MAX_JSON_DEPTH} levels`, async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const tooDeep = nested(MAX_JSON_DEPTH + 1);
      await expectCode(rheo.append('s', { payload: tooDeep }), 'invalid_argument');
      await expectCode(rheo.append('s', { payload: 1, metadata: { m: nested(MAX_JSON_DEPTH) } }), 'invalid_argument');
      await expectCode(rheo.append('s', { payload: nested(100_000) }), 'invalid_argument');
      await expectCode(rheo.query('s', { where: { payload: tooDeep } }), 'invalid_argument');
      await nothingWritten(rheo);
      await rheo.append('s', { payload: nested(MAX_JSON_DEPTH), metadata: { m: nested(MAX_JSON_DEPTH - 1) } });
      expect((await rheo.query('s', { where: { payload: nested(MAX_JSON_DEPTH) } })).events).toHaveLength(1);
    });

    for (const [what, make] of UNREADABLE) {
      it(`${what} in a payload, metadata, an input or a query is invalid_argument and writes nothing`, async () => {
        const { rheo } = fx();
        await rheo.createStream('s');
        await expectCode(rheo.append('s', { payload: make() }), 'invalid_argument');
        await expectCode(rheo.append('s', { payload: { nested: [make()] } }), 'invalid_argument');
        await expectCode(rheo.append('s', { payload: 1, metadata: { m: make() } }), 'invalid_argument');
        await expectCode(rheo.appendBatch('s', [{ payload: 1 }, { payload: make() }]), 'invalid_argument');
        await expectCode(rheo.query('s', { where: { payload: make() } }), 'invalid_argument');
        await nothingWritten(rheo);
      });
    }

    it('an append input or query options object with a throwing getter is invalid_argument', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const input = Object.defineProperty({ payload: 1 }, 'type', {
        enumerable: true,
        get() {
          throw new Error('no type for you');
        },
      }) as AppendInput;
      await expectCode(rheo.append('s', input), 'invalid_argument');
      const options = Object.defineProperty({}, 'limit', {
        enumerable: true,
        get() {
          throw new Error('no limit for you');
        },
      }) as QueryOptions;
      await expectCode(rheo.query('s', options), 'invalid_argument');
      await nothingWritten(rheo);
    });

    it('a nack or reject reason is stored as given where it can be, else made storable; it never fails the settle', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g', { maxAttempts: 1 });
      await appendN(rheo, 's', 6);
      const leases = (await rheo.fetch('s', 'g', { limit: 6 })) as Lease[];
      const long = `${'r'.repeat(3999)}\u{1F600}tail`;
      await rheo.reject(leases[0]!, 'nul\u0000here');
      await rheo.reject(leases[1]!, 'lone\ud800surrogate');
      await rheo.nack(leases[2]!, long);
      await rheo.nack(leases[3]!, 42 as unknown as string);
      await rheo.reject(leases[4]!, new Error('from an error') as unknown as string);
      await rheo.reject(leases[5]!, 'plain ünïcödé ✓ \u{1F600}');
      const reasons = (await rheo.deadLetters('s', 'g')).map((d) => d.reason);
      expect(reasons).toEqual([
        'nul\ufffdhere',
        'lone\ufffdsurrogate',
        // Cut at 4000 code units, but not inside the emoji's surrogate pair.
        'r'.repeat(3999),
        '42',
        'from an error',
        'plain ünïcödé ✓ \u{1F600}',
      ]);
    });
  });
}
