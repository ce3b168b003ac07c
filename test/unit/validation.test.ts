import { describe, expect, it } from 'vitest';
import { RheoError } from '../../src/core/errors.js';
import {
  assertDate,
  assertInteger,
  assertJson,
  assertJsonObject,
  assertName,
  routePartition,
} from '../../src/core/validation.js';
import { partitionForKey } from '../../src/core/partitioner.js';

function codeOf(fn: () => void): string | null {
  try {
    fn();
    return null;
  } catch (error) {
    expect(error).toBeInstanceOf(RheoError);
    return (error as RheoError).code;
  }
}

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}

describe('assertJson', () => {
  const cycle: Record<string, unknown> = {};
  cycle.me = cycle;
  const arrayCycle: unknown[] = [];
  arrayCycle.push([arrayCycle]);

  const bad: Array<[string, unknown]> = [
    ['a function', () => 1],
    ['a nested function', { a: { b: () => 1 } }],
    ['a BigInt', 1n],
    ['a BigInt in an array', [1, 2n]],
    ['an object cycle', cycle],
    ['an array cycle', arrayCycle],
    ['undefined at the top level', undefined],
    ['undefined in an object', { a: undefined }],
    ['undefined in an array', [undefined]],
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
    ['-Infinity in an object', { x: Number.NEGATIVE_INFINITY }],
    ['a symbol', Symbol('s')],
    ['a class instance', new Point(1, 2)],
    ['a Date', new Date(0)],
    ['a Map', new Map()],
    ['a Set', new Set([1])],
    ['a RegExp', /x/],
    ['a typed array', new Uint8Array(2)],
    ['a boxed string', Object('s') as unknown],
    ['a lone high surrogate', 'a\ud800'],
    ['a lone low surrogate', '\udc00b'],
    ['a lone surrogate in a key', { ['k\ud800']: 1 }],
    ['U+0000 in a string', 'a\u0000b'],
    ['U+0000 in a key', { ['\u0000']: 1 }],
  ];

  for (const [what, value] of bad) {
    it(`rejects ${what} with invalid_argument`, () => {
      expect(codeOf(() => assertJson('payload', value))).toBe('invalid_argument');
    });
  }

  const good: Array<[string, unknown]> = [
    ['null', null],
    ['booleans', [true, false]],
    ['numbers', [0, -1.5, 1e300, Number.MAX_SAFE_INTEGER]],
    ['strings with astral characters', '🦀 ключ'],
    ['a paired surrogate', '\ud83e\udd80'],
    ['nested objects and arrays', { a: [1, { b: [null, 'c'] }], d: {} }],
    ['a null-prototype object', Object.assign(Object.create(null) as object, { a: 1 })],
    ['a shared (non-cyclic) reference', (() => { const s = { x: 1 }; return { a: s, b: s, c: [s, s] }; })()],
  ];

  for (const [what, value] of good) {
    it(`accepts ${what}`, () => {
      expect(codeOf(() => assertJson('payload', value))).toBeNull();
    });
  }

  it('names the offending path in the message', () => {
    try {
      assertJson('payload', { order: { lines: [1, () => 2] } });
      expect.unreachable();
    } catch (error) {
      expect((error as RheoError).message).toContain('payload.order.lines[1]');
    }
  });
});

describe('assertJsonObject', () => {
  it('accepts plain objects only', () => {
    expect(codeOf(() => assertJsonObject('metadata', { a: 1 }))).toBeNull();
    for (const value of [[], 'x', 1, null, new Point(1, 2)]) {
      expect(codeOf(() => assertJsonObject('metadata', value))).toBe('invalid_argument');
    }
  });
});

describe('assertName', () => {
  it('accepts 1-200 characters of [A-Za-z0-9._:-]', () => {
    for (const name of ['a', 'Orders.v2:eu-west_1', '0', 'a'.repeat(200)]) {
      expect(codeOf(() => assertName('stream', name))).toBeNull();
    }
  });

  it('rejects everything else with invalid_argument', () => {
    for (const name of ['', ' ', 'a b', 'a/b', 'a\nb', 'é', '🦀', 'a'.repeat(201), 1, null, undefined, {}]) {
      expect(codeOf(() => assertName('group', name))).toBe('invalid_argument');
    }
  });
});

describe('assertInteger and assertDate', () => {
  it('rejects non-integers, unsafe integers and out-of-range values', () => {
    for (const value of [1.5, -1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, '1', null]) {
      expect(codeOf(() => assertInteger('limit', value))).toBe('invalid_argument');
    }
    expect(codeOf(() => assertInteger('limit', 0, { min: 1 }))).toBe('invalid_argument');
    expect(codeOf(() => assertInteger('limit', 11, { max: 10 }))).toBe('invalid_argument');
    expect(codeOf(() => assertInteger('limit', 10, { min: 1, max: 10 }))).toBeNull();
  });

  it('rejects invalid dates and non-dates', () => {
    expect(codeOf(() => assertDate('from', new Date(Number.NaN)))).toBe('invalid_argument');
    expect(codeOf(() => assertDate('from', '2026-01-01'))).toBe('invalid_argument');
    expect(codeOf(() => assertDate('from', 0))).toBe('invalid_argument');
    expect(codeOf(() => assertDate('from', new Date(0)))).toBeNull();
  });
});

describe('routePartition', () => {
  it('an explicit partition wins over the key', () => {
    expect(routePartition('s', 4, 3, 'abc')).toBe(3);
  });

  it('a key routes by murmur2, no key to 0', () => {
    expect(routePartition('s', 4, null, 'abc')).toBe(partitionForKey('abc', 4));
    expect(routePartition('s', 4, null, null)).toBe(0);
  });

  it('an explicit partition out of range is invalid_partition naming the stream', () => {
    expect(codeOf(() => routePartition('orders', 4, 4, null))).toBe('invalid_partition');
    try {
      routePartition('orders', 4, -1, null);
      expect.unreachable();
    } catch (error) {
      expect((error as RheoError).code).toBe('invalid_partition');
      expect((error as RheoError).message).toContain('"orders"');
    }
  });
});
