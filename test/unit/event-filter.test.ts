import { describe, expect, it } from 'vitest';
import type { ReplayQuery } from '../../src/core/backend.js';
import { eventFilter, jsonContains } from '../../src/core/event-filter.js';
import type { JsonObject, JsonValue, RheoEvent } from '../../src/core/types.js';

function event(over: Partial<RheoEvent> = {}): RheoEvent {
  return {
    id: 'e-1',
    stream: 'orders',
    partition: 0,
    sequence: 1,
    type: 'placed',
    key: 'k-1',
    payload: { total: 10, items: ['a', 'b'] },
    metadata: { tenant: 't-1' },
    timestamp: new Date(1_000),
    ...over,
  };
}

const all: ReplayQuery = { types: null, key: null, wherePayload: undefined, whereMetadata: undefined, from: null, to: null };

describe('eventFilter', () => {
  it('matches every event with no criteria', () => {
    const match = eventFilter(all);
    expect(match(event())).toBe(true);
    expect(match(event({ key: null, timestamp: new Date(-8_000_000_000_000) }))).toBe(true);
    expect(match(event({ timestamp: new Date(8_000_000_000_000) }))).toBe(true);
  });

  it('keeps timestamps from `from` included up to `to` excluded', () => {
    const match = eventFilter({ ...all, from: new Date(1_000), to: new Date(2_000) });
    expect(match(event({ timestamp: new Date(999) }))).toBe(false);
    expect(match(event({ timestamp: new Date(1_000) }))).toBe(true);
    expect(match(event({ timestamp: new Date(1_999) }))).toBe(true);
    expect(match(event({ timestamp: new Date(2_000) }))).toBe(false);
    expect(eventFilter({ ...all, from: new Date(1_000) })(event({ timestamp: new Date(9_999_999) }))).toBe(true);
    expect(eventFilter({ ...all, to: new Date(2_000) })(event({ timestamp: new Date(-9_999_999) }))).toBe(true);
  });

  it('keeps only the listed types', () => {
    const match = eventFilter({ ...all, types: ['placed', 'paid'] });
    expect(match(event({ type: 'paid' }))).toBe(true);
    expect(match(event({ type: 'shipped' }))).toBe(false);
    expect(eventFilter({ ...all, types: [] })(event())).toBe(false);
  });

  it('keeps only the given key', () => {
    const match = eventFilter({ ...all, key: 'k-1' });
    expect(match(event())).toBe(true);
    expect(match(event({ key: 'k-2' }))).toBe(false);
    expect(match(event({ key: null }))).toBe(false);
  });

  it('keeps events whose payload and metadata contain the patterns', () => {
    const byPayload = eventFilter({ ...all, wherePayload: { items: ['b'] } });
    expect(byPayload(event())).toBe(true);
    expect(byPayload(event({ payload: { items: ['c'] } }))).toBe(false);
    const byMetadata = eventFilter({ ...all, whereMetadata: { tenant: 't-1' } });
    expect(byMetadata(event())).toBe(true);
    expect(byMetadata(event({ metadata: { tenant: 't-2' } }))).toBe(false);
    // A pattern of null is a pattern, not its absence.
    expect(eventFilter({ ...all, wherePayload: null })(event())).toBe(false);
    expect(eventFilter({ ...all, wherePayload: null })(event({ payload: null }))).toBe(true);
  });

  it('needs every criterion to match', () => {
    const match = eventFilter({ ...all, types: ['placed'], key: 'k-1', wherePayload: { total: 10 }, whereMetadata: { tenant: 't-1' }, from: new Date(0), to: new Date(5_000) });
    expect(match(event())).toBe(true);
    expect(match(event({ metadata: {} }))).toBe(false);
    expect(match(event({ payload: { total: 11 } }))).toBe(false);
  });
});

describe('jsonContains', () => {
  const contains = (value: JsonValue, pattern: JsonValue) => jsonContains(value, pattern);

  it('compares primitives by value', () => {
    expect(contains(1, 1)).toBe(true);
    expect(contains('a', 'a')).toBe(true);
    expect(contains(null, null)).toBe(true);
    expect(contains(1, '1')).toBe(false);
    expect(contains(false, null)).toBe(false);
    expect(contains({ a: 1 }, 1)).toBe(false);
  });

  it('lets a top-level array contain a primitive element, but not a nested one', () => {
    expect(contains([1, 'a', null], 'a')).toBe(true);
    expect(contains([1, 'a', null], null)).toBe(true);
    expect(contains([1, 'a'], 2)).toBe(false);
    expect(contains({ list: [1, 2] }, { list: 1 })).toBe(false);
    expect(contains([[1, 2]], [1])).toBe(false);
    expect(jsonContains([1, 2], 1, false)).toBe(false);
  });

  it('lets an array contain an array of some of its elements, in any order and with repeats', () => {
    expect(contains([1, 2, 3], [3, 1])).toBe(true);
    expect(contains([1, 2, 3], [1, 1])).toBe(true);
    expect(contains([1, 2, 3], [])).toBe(true);
    expect(contains([1, 2], [1, 4])).toBe(false);
    expect(contains([{ a: 1, b: 2 }, { c: 3 }], [{ a: 1 }])).toBe(true);
    expect(contains([[1, 2], [3]], [[2]])).toBe(true);
    expect(contains({ 0: 1 }, [1])).toBe(false);
    expect(contains('[1]', [1])).toBe(false);
  });

  it('lets an object contain an object with some of its keys, recursively', () => {
    expect(contains({ a: 1, b: { c: 2, d: 3 } }, { b: { c: 2 } })).toBe(true);
    expect(contains({ a: 1 }, {})).toBe(true);
    expect(contains({ a: 1 }, { a: 2 })).toBe(false);
    expect(contains({ a: 1 }, { b: 1 })).toBe(false);
    expect(contains({ a: { c: 2 } }, { a: { c: 2, d: 3 } })).toBe(false);
    expect(contains([{ a: 1 }], { a: 1 })).toBe(false);
    expect(contains(null, {})).toBe(false);
    expect(contains('a', {})).toBe(false);
    expect(contains({ a: null }, { a: null })).toBe(true);
    expect(contains({ a: 'x' }, { a: ['x'] })).toBe(false);
  });

  it('looks at own keys only', () => {
    const pattern = JSON.parse('{"__proto__": {}}') as JsonObject;
    expect(contains({}, pattern)).toBe(false);
    expect(contains({}, { constructor: {} })).toBe(false);
    expect(contains(JSON.parse('{"__proto__": {"a": 1}}') as JsonObject, pattern)).toBe(true);
  });
});
