import fc from 'fast-check';
import { describe as suite, expect, it } from 'vitest';
import { RheoError } from '../../src/core/errors.js';
import { MAX_JSON_DEPTH, MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS } from '../../src/core/limits.js';
import {
  assertDate,
  assertInteger,
  assertJson,
  assertJsonObject,
  assertName,
  assertPlainObject,
  assertString,
  describe,
  frozenJsonCopy,
  optionalInteger,
  readingJson,
  routePartition,
  type JsonBudget,
} from '../../src/core/validation.js';
import { thrown } from '../support/thrown.js';

/*
 * The messages of the argument checks: callers branch on `code`, but a
 * message must still say what was wrong (which option, what value, what
 * limit), and the boundaries of every check must sit exactly where documented.
 */

function invalid(fn: () => unknown): string {
  const error = thrown(fn);
  expect(error.code).toBe('invalid_argument');
  return error.message;
}

function budget(limit = Number.POSITIVE_INFINITY): JsonBudget & { overflows: number[] } {
  const overflows: number[] = [];
  return {
    bytes: 0,
    limit,
    overflows,
    onOverflow: (bytes) => {
      overflows.push(bytes);
      return new RheoError('event_too_large', `too large: ${bytes}`);
    },
  };
}

function nested(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = i % 2 === 0 ? [value] : { a: value };
  return value;
}

suite('describe', () => {
  it('quotes strings and cuts them after 60 characters', () => {
    expect(describe('abc')).toBe('"abc"');
    expect(describe('')).toBe('""');
    expect(describe('x'.repeat(60))).toBe(JSON.stringify('x'.repeat(60)));
    expect(describe('x'.repeat(61))).toBe(JSON.stringify(`${'x'.repeat(60)}…`));
  });

  it('names every other kind of value', () => {
    expect(describe(12n)).toBe('12n');
    expect(describe(() => 1)).toBe('a function');
    expect(describe(Symbol('s'))).toBe('a symbol');
    expect(describe(new Date(0))).toBe('Date(1970-01-01T00:00:00.000Z)');
    expect(describe(new Date(Number.NaN))).toBe('Date(invalid)');
    expect(describe([1, 2])).toBe('an array');
    expect(describe({ a: 1 })).toBe('an object');
    expect(describe(null)).toBe('null');
    expect(describe(undefined)).toBe('undefined');
    expect(describe(1.5)).toBe('1.5');
    expect(describe(true)).toBe('true');
  });
});

suite('assertName', () => {
  it('accepts every character of the class alone and the 200-character limit', () => {
    for (const name of ['A', 'Z', 'a', 'z', '0', '9', '.', '_', ':', '-', 'M', 'm', '5', 'x'.repeat(200)]) {
      expect(() => assertName('stream', name)).not.toThrow();
    }
  });

  it('rejects a bad character at either end or in the middle', () => {
    for (const name of [' a', 'a ', 'a b', '/', 'a/b', '@', '[', '`', '{', ' ', '', 'x'.repeat(201), 'a\n']) {
      expect(invalid(() => assertName('stream', name))).toContain('stream name must be 1-200 characters');
    }
  });

  it('names the kind, the allowed characters and the value given', () => {
    const message = invalid(() => assertName('group', 'a b'));
    expect(message).toBe('group name must be 1-200 characters of [A-Za-z0-9._:-], got "a b"');
    expect(invalid(() => assertName('stream', 42))).toMatch(/^stream name .* got 42$/);
    // A non-string whose text would match the pattern is still refused.
    expect(invalid(() => assertName('stream', ['abc']))).toMatch(/got an array$/);
  });
});

suite('assertInteger and optionalInteger', () => {
  it('accepts both ends of the range', () => {
    expect(() => assertInteger('n', 0)).not.toThrow();
    expect(() => assertInteger('n', Number.MAX_SAFE_INTEGER)).not.toThrow();
    expect(() => assertInteger('n', 3, { min: 3, max: 5 })).not.toThrow();
    expect(() => assertInteger('n', 5, { min: 3, max: 5 })).not.toThrow();
  });

  it('says ">= min" when there is no upper bound', () => {
    expect(invalid(() => assertInteger('limit', -1))).toBe('limit must be an integer >= 0, got -1');
    expect(invalid(() => assertInteger('sequence', 0, { min: 1 }))).toBe('sequence must be an integer >= 1, got 0');
    expect(invalid(() => assertInteger('limit', 1.5))).toBe('limit must be an integer >= 0, got 1.5');
    expect(invalid(() => assertInteger('limit', '7'))).toBe('limit must be an integer >= 0, got "7"');
  });

  it('says "in min..max" when there is one', () => {
    expect(invalid(() => assertInteger('limit', 2, { min: 3, max: 5 }))).toBe('limit must be an integer in 3..5, got 2');
    expect(invalid(() => assertInteger('limit', 6, { min: 3, max: 5 }))).toBe('limit must be an integer in 3..5, got 6');
    expect(invalid(() => assertInteger('limit', 11, { max: 10 }))).toBe('limit must be an integer in 0..10, got 11');
  });

  it('optionalInteger falls back only for undefined and checks anything else', () => {
    expect(optionalInteger('limit', undefined, 7)).toBe(7);
    expect(optionalInteger('limit', 0, 7)).toBe(0);
    expect(optionalInteger('limit', 3, 7, { min: 1, max: 5 })).toBe(3);
    expect(invalid(() => optionalInteger('limit', null, 7))).toBe('limit must be an integer >= 0, got null');
    expect(invalid(() => optionalInteger('limit', 6, 7, { min: 1, max: 5 }))).toBe(
      'limit must be an integer in 1..5, got 6',
    );
  });
});

suite('assertString', () => {
  it('accepts both ends of the length range', () => {
    expect(() => assertString('type', 'a')).not.toThrow();
    expect(() => assertString('type', 'a'.repeat(200))).not.toThrow();
    expect(() => assertString('key', '', { min: 0, max: 3 })).not.toThrow();
    expect(() => assertString('key', 'abc', { min: 0, max: 3 })).not.toThrow();
  });

  it('names the option, the length range and the value given', () => {
    expect(invalid(() => assertString('type', ''))).toBe('type must be a string of 1-200 characters, got ""');
    expect(invalid(() => assertString('type', 'a'.repeat(201)))).toMatch(/^type must be a string of 1-200 characters, got "a+…"$/);
    expect(invalid(() => assertString('key', 'abcd', { min: 0, max: 3 }))).toBe(
      'key must be a string of 0-3 characters, got "abcd"',
    );
    expect(invalid(() => assertString('type', 5))).toBe('type must be a string of 1-200 characters, got 5');
  });

  it('refuses U+0000 and lone surrogates, naming the option', () => {
    expect(invalid(() => assertString('type', 'a\u0000'))).toBe('type contains U+0000, which cannot be stored');
    expect(invalid(() => assertString('type', 'a\ud800'))).toBe('type contains a lone surrogate (not valid UTF-16)');
    expect(() => assertString('type', '\ud83e\udd80')).not.toThrow();
  });
});

suite('assertDate', () => {
  it('accepts the first and the last millisecond of years 0001..9999', () => {
    expect(() => assertDate('from', new Date(MIN_TIMESTAMP_MS))).not.toThrow();
    expect(() => assertDate('from', new Date(MAX_TIMESTAMP_MS))).not.toThrow();
  });

  it('refuses a millisecond outside, naming the range and the date', () => {
    expect(invalid(() => assertDate('from', new Date(MIN_TIMESTAMP_MS - 1)))).toBe(
      'from must lie in the years 0001..9999 (UTC), got Date(0000-12-31T23:59:59.999Z)',
    );
    expect(invalid(() => assertDate('to', new Date(MAX_TIMESTAMP_MS + 1)))).toBe(
      'to must lie in the years 0001..9999 (UTC), got Date(+010000-01-01T00:00:00.000Z)',
    );
  });

  it('refuses non-dates and invalid dates, naming the option', () => {
    expect(invalid(() => assertDate('from', new Date(Number.NaN)))).toBe('from must be a valid Date, got Date(invalid)');
    expect(invalid(() => assertDate('from', 0))).toBe('from must be a valid Date, got 0');
  });
});

suite('assertPlainObject', () => {
  it('names the option and what was given instead', () => {
    expect(invalid(() => assertPlainObject('options', null))).toBe('options must be an object, got null');
    expect(invalid(() => assertPlainObject('options', []))).toBe('options must be an object, got an array');
    expect(invalid(() => assertPlainObject('options', 'x'))).toBe('options must be an object, got "x"');
    expect(() => assertPlainObject('options', {})).not.toThrow();
  });
});

suite('assertJson messages', () => {
  it('names the path and the problem', () => {
    expect(invalid(() => assertJson('payload', { x: Number.NaN }))).toBe('payload.x is NaN, which is not JSON');
    expect(invalid(() => assertJson('payload', [Number.POSITIVE_INFINITY]))).toBe('payload[0] is Infinity, which is not JSON');
    expect(invalid(() => assertJson('payload', { a: undefined }))).toBe('payload.a is undefined, which is not JSON');
    expect(invalid(() => assertJson('payload', { f: () => 1 }))).toBe('payload.f is a function, which is not JSON');
    expect(invalid(() => assertJson('payload', [1n]))).toBe('payload[0] is a bigint, which is not JSON');
    expect(invalid(() => assertJson('payload', Symbol('s')))).toBe('payload is a symbol, which is not JSON');
    expect(invalid(() => assertJson('payload', { s: 'a\u0000' }))).toBe('payload.s contains U+0000, which cannot be stored');
    expect(invalid(() => assertJson('payload', ['\udc00']))).toBe('payload[0] contains a lone surrogate (not valid UTF-16)');
  });

  it('looks past the valid members and elements to the first bad one', () => {
    expect(invalid(() => assertJson('payload', { ok: 1, also: 'x', bad: Number.NaN }))).toBe('payload.bad is NaN, which is not JSON');
    expect(invalid(() => assertJson('payload', [1, { a: null, b: undefined }]))).toBe('payload[1].b is undefined, which is not JSON');
    expect(invalid(() => assertJson('payload', { ok: 1, ['\u0000']: 2 }))).toMatch(/^payload key .* contains U\+0000/);
  });

  it('names a key that cannot be stored', () => {
    expect(invalid(() => assertJson('metadata', { ['a\u0000']: 1 }))).toBe(
      'metadata key "a\\u0000" contains U+0000, which cannot be stored',
    );
  });

  it('names cycles and class instances', () => {
    const cycle: Record<string, unknown> = { list: [] };
    (cycle.list as unknown[]).push(cycle);
    expect(invalid(() => assertJson('payload', cycle))).toBe('payload.list[0] contains a cycle');
    expect(invalid(() => assertJson('payload', { when: new Date(0) }))).toBe(
      'payload.when is a Date instance, not a plain JSON object',
    );
    // No constructor to name: the message says "object".
    const orphan = Object.create(Object.create(null) as object) as object;
    expect(invalid(() => assertJson('payload', { o: orphan }))).toBe('payload.o is a object instance, not a plain JSON object');
  });

  it('accepts scalars, null and the same array or object reached twice', () => {
    const shared = [1, 2];
    const obj = { x: shared };
    for (const value of [true, false, 0, 'x', null, { a: shared, b: shared }, [obj, obj], [shared, [shared]]]) {
      expect(() => assertJson('payload', value)).not.toThrow();
    }
  });

  it(`accepts nesting to depth ${MAX_JSON_DEPTH} and refuses one level more`, () => {
    expect(() => assertJson('payload', nested(MAX_JSON_DEPTH))).not.toThrow();
    expect(invalid(() => assertJson('payload', nested(MAX_JSON_DEPTH + 1)))).toMatch(
      new RegExp(`^payload[.\\[\\]a0]+ is nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects$`),
    );
    expect(invalid(() => assertJsonObject('metadata', { a: nested(MAX_JSON_DEPTH) }))).toMatch(/^metadata\.a.* is nested deeper/);
  });
});

suite('readingJson', () => {
  it('turns what a getter throws into invalid_argument naming the option, with the cause', () => {
    const boom = new Error('boom');
    const value = {
      get x(): number {
        throw boom;
      },
    };
    const error = thrown(() => assertJson('payload', value));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe('payload could not be read: boom');
    expect(error.cause).toBe(boom);
  });

  it('writes a thrown non-Error with String()', () => {
    const error = thrown(() =>
      readingJson('metadata', () => {
        throw 'nope' as unknown as Error;
      }),
    );
    expect(error.message).toBe('metadata could not be read: nope');
    expect(error.cause).toBe('nope');
  });

  it('passes a RheoError through unchanged and returns the walk result', () => {
    const original = new RheoError('timeout', 'took too long');
    expect(
      thrown(() =>
        readingJson('payload', () => {
          throw original;
        }),
      ),
    ).toBe(original);
    expect(readingJson('payload', () => 42)).toBe(42);
  });
});

suite('frozenJsonCopy', () => {
  it('returns a deep, frozen copy', () => {
    const input = { a: [1, { b: 'c' }], d: null, e: true };
    const copy = frozenJsonCopy('payload', input) as { a: [number, { b: string }] };
    expect(copy).toEqual(input);
    expect(copy).not.toBe(input);
    expect(copy.a).not.toBe(input.a);
    expect(Object.isFrozen(copy)).toBe(true);
    expect(Object.isFrozen(copy.a)).toBe(true);
    expect(Object.isFrozen(copy.a[1])).toBe(true);
    input.a.push(2);
    expect(copy.a).toHaveLength(2);
  });

  it('copies scalars and null as they are', () => {
    for (const value of [null, true, false, 0, -1.5, '', 'x']) expect(frozenJsonCopy('payload', value)).toBe(value);
  });

  it('counts the bytes of the compact JSON', () => {
    const values: unknown[] = [
      null,
      true,
      false,
      12.5,
      'héllo "q"',
      [],
      [1],
      [1, 2, 3],
      {},
      { a: 1 },
      { a: 1, bb: [true, null], c: { d: 'e' } },
      [{}, [], [[]]],
    ];
    for (const value of values) {
      const b = budget();
      frozenJsonCopy('payload', value, b);
      expect([value, b.bytes]).toEqual([value, Buffer.byteLength(JSON.stringify(value), 'utf8')]);
    }
  });

  it('adds to the bytes already in the budget', () => {
    const b = budget();
    b.bytes = 10;
    frozenJsonCopy('payload', [1], b);
    expect(b.bytes).toBe(13);
  });

  it('stops once the size passes the limit, not when it reaches it', () => {
    const value = { a: [1, 2], b: 'xyz' };
    const size = JSON.stringify(value).length;
    const exact = budget(size);
    expect(frozenJsonCopy('payload', value, exact)).toEqual(value);
    expect(exact.overflows).toEqual([]);

    const under = budget(size - 1);
    expect(thrown(() => frozenJsonCopy('payload', value, under)).code).toBe('event_too_large');
    expect(under.overflows).toEqual([size]);

    const scalar = budget(4);
    expect(thrown(() => frozenJsonCopy('payload', 'abcd', scalar)).message).toBe('too large: 6');
  });

  it('keeps a "__proto__" key as data', () => {
    const input = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}') as Record<string, unknown>;
    const copy = frozenJsonCopy('payload', input) as Record<string, unknown>;
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(['__proto__', 'a']);
    expect(Object.getOwnPropertyDescriptor(copy, '__proto__')?.value).toEqual({ polluted: true });
    expect((copy as { polluted?: unknown }).polluted).toBeUndefined();
    expect(JSON.stringify(copy)).toBe('{"__proto__":{"polluted":true},"a":1}');
  });

  it('accepts the same array or object reached twice', () => {
    const shared = [1];
    const obj = { s: shared };
    expect(frozenJsonCopy('payload', { a: shared, b: shared, c: [obj, obj] })).toEqual({
      a: [1],
      b: [1],
      c: [{ s: [1] }, { s: [1] }],
    });
  });

  it('refuses what assertJson refuses, with the same messages', () => {
    const cycle: unknown[] = [];
    cycle.push({ back: cycle });
    expect(invalid(() => frozenJsonCopy('payload', cycle))).toBe('payload[0].back contains a cycle');
    expect(invalid(() => frozenJsonCopy('payload', { x: [Number.NaN] }))).toBe('payload.x[0] is NaN, which is not JSON');
    expect(invalid(() => frozenJsonCopy('payload', { m: new Map() }))).toBe(
      'payload.m is a Map instance, not a plain JSON object',
    );
    const orphan = Object.create(Object.create(null) as object) as object;
    expect(invalid(() => frozenJsonCopy('payload', [orphan]))).toBe('payload[0] is a object instance, not a plain JSON object');
    expect(invalid(() => frozenJsonCopy('payload', { ['\ud800']: 1 }))).toBe(
      'payload key "\\ud800" contains a lone surrogate (not valid UTF-16)',
    );
    expect(() => frozenJsonCopy('payload', nested(MAX_JSON_DEPTH))).not.toThrow();
    expect(invalid(() => frozenJsonCopy('payload', nested(MAX_JSON_DEPTH + 1)))).toMatch(
      new RegExp(`is nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects$`),
    );
    expect(() => frozenJsonCopy('payload', Object.assign(Object.create(null) as object, { a: 1 }))).not.toThrow();
  });

  it('sizes every well-formed string as JSON.stringify writes it, short or long', () => {
    // Short strings and keys are scanned in one pass, longer ones by native calls: both must agree.
    const pieces = ['a', ' ', '~', '"', '\\', '\b', '\t', '\n', '\f', '\r', '\u0001', '\u001f', '\u007f', '\u0080', 'é', '\u07ff', '\u0800', '€', '\ud7ff', '\ue000', '\uffff', '🦀', '\ud800\udc00', '\udbff\udfff'];
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...pieces), { maxLength: 80 }), (parts) => {
        const s = parts.join('');
        const b = budget();
        frozenJsonCopy('payload', { [s]: s }, b);
        expect([s, b.bytes]).toEqual([s, Buffer.byteLength(JSON.stringify({ [s]: s }), 'utf8')]);
      }),
      { numRuns: 400 },
    );
    for (const length of [63, 64, 65]) {
      const s = 'é'.repeat(length);
      const b = budget();
      frozenJsonCopy('payload', s, b);
      expect([length, b.bytes]).toEqual([length, 2 * length + 2]);
    }
  });

  it('refuses U+0000 and every lone surrogate, short or long', () => {
    const pad = (s: string, length: number): string => s + 'x'.repeat(Math.max(0, length - s.length));
    for (const length of [0, 64, 65]) {
      for (const [bad, problem] of [
        ['a\u0000', 'contains U+0000, which cannot be stored'],
        ['\ud800', 'contains a lone surrogate (not valid UTF-16)'],
        ['\udbff', 'contains a lone surrogate (not valid UTF-16)'],
        ['\udc00', 'contains a lone surrogate (not valid UTF-16)'],
        ['\udfff', 'contains a lone surrogate (not valid UTF-16)'],
        ['\ud800\ud800\udc00', 'contains a lone surrogate (not valid UTF-16)'],
        ['x\udbff', 'contains a lone surrogate (not valid UTF-16)'],
        ['\udc00\udc00', 'contains a lone surrogate (not valid UTF-16)'],
        ['\ud800\ue000', 'contains a lone surrogate (not valid UTF-16)'],
        ['\udbff\ud7ff', 'contains a lone surrogate (not valid UTF-16)'],
      ] as const) {
        expect(invalid(() => frozenJsonCopy('payload', pad(bad, length)))).toBe(`payload ${problem}`);
        expect(invalid(() => frozenJsonCopy('payload', { [pad(bad, length)]: 1 }))).toMatch(new RegExp(`^payload key ".*" ${problem.replace(/[()+]/g, '\\$&')}$`));
      }
    }
  });

  it('refuses a cycle however deep it closes, and only a cycle', () => {
    const root: Record<string, unknown> = { a: { b: [{ c: {} }] } };
    ((root.a as { b: Array<{ c: Record<string, unknown> }> }).b[0]!.c).back = root.a;
    expect(invalid(() => frozenJsonCopy('payload', root))).toBe('payload.a.b[0].c.back contains a cycle');
    const self: unknown[] = [];
    self.push(self);
    expect(invalid(() => frozenJsonCopy('payload', self))).toBe('payload[0] contains a cycle');
    const leaf = { x: 1 };
    expect(frozenJsonCopy('payload', [[leaf], [[leaf]], leaf])).toEqual([[{ x: 1 }], [[{ x: 1 }]], { x: 1 }]);
  });

  it('turns a throwing getter into invalid_argument', () => {
    const value = {
      get x(): number {
        throw new Error('getter failed');
      },
    };
    expect(invalid(() => frozenJsonCopy('metadata', value))).toBe('metadata could not be read: getter failed');
  });
});

suite('routePartition bounds', () => {
  it('accepts partitions 0 and partitions - 1 and refuses -1 and partitions', () => {
    expect(routePartition('s', 4, 0, 'abc')).toBe(0);
    expect(routePartition('s', 4, 3, null)).toBe(3);
    expect(thrown(() => routePartition('s', 4, -1, null)).code).toBe('invalid_partition');
    expect(thrown(() => routePartition('s', 4, 4, null)).message).toContain('partition 4 is out of range');
  });
});
