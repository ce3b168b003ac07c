import { describe, expect, it } from 'vitest';
import {
  MAX_LEASE_MS,
  MAX_LIMIT,
  MAX_PARTITIONS,
  MAX_REASON_LENGTH,
  MAX_RETENTION_AGE_MS,
  assertBatchSize,
  assertOptions,
  leaseRef,
  messageOf,
  normalizeEventIds,
  normalizePartitions,
  normalizeQuery,
  normalizeReason,
  normalizeReplay,
  normalizeRetention,
  normalizeStart,
  normalizeTrim,
  prepareAppend,
  settleOp,
} from '../../src/core/arguments.js';
import type { PreparedAppend } from '../../src/core/backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { MAX_CONFIGURABLE_BYTES } from '../../src/core/limits.js';
import { encodeQueryCursor } from '../../src/core/query-cursor.js';
import type { AppendInput, QueryOptions, SettleRequest } from '../../src/core/types.js';
import { createRheo } from '../../src/index.js';
import { thrown } from '../support/thrown.js';

/*
 * The facade's argument normalisation (core/arguments.ts): what each call
 * returns, where each limit sits, and that every refusal says which option was
 * wrong and why (callers branch on `code`; people read the message).
 */

/** The message of the `invalid_argument` that `fn` throws. */
function invalid(fn: () => unknown): string {
  const error = thrown(fn);
  expect(error.code).toBe('invalid_argument');
  return error.message;
}

const NOW = Date.UTC(2026, 0, 1);
const clock = new ManualClock(NOW);
const LIMITS = { stream: 'orders', maxEventBytes: 1024 * 1024 };

function prepare(input: unknown, limits = LIMITS): PreparedAppend {
  return prepareAppend(clock, input as AppendInput<unknown>, 'events[0]', limits);
}

function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}

const LEASE = { leaseId: 'lease-1', stream: 'orders', group: 'billing', event: { partition: 2, sequence: 7 } };
const REF = { stream: 'orders', group: 'billing', partition: 2, sequence: 7, leaseId: 'lease-1' };

function settle(request: unknown): ReturnType<typeof settleOp> {
  return settleOp(request as SettleRequest, 'settle[0]');
}

function query(options: unknown, defaultMaxBytes = 4096): ReturnType<typeof normalizeQuery> {
  return normalizeQuery('orders', options as QueryOptions, defaultMaxBytes);
}

function throwing(field: string, error: unknown, base: object = {}): object {
  // Copied by descriptor, so a getter already on `base` is not run.
  return Object.defineProperty(Object.defineProperties({}, Object.getOwnPropertyDescriptors(base)), field, {
    enumerable: true,
    get() {
      throw error;
    },
  });
}

describe('prepareAppend', () => {
  it('fills in the defaults', () => {
    const prepared = prepare({ payload: { n: 1 } });
    expect(prepared).toEqual({
      id: null,
      type: 'event',
      key: null,
      payload: { n: 1 },
      metadata: {},
      partition: null,
      timestamp: new Date(NOW),
      size: jsonBytes({ n: 1 }) + 2,
    });
    expect(Object.isFrozen(prepared.payload)).toBe(true);
    expect(Object.isFrozen(prepared.metadata)).toBe(true);
  });

  it('keeps every field given', () => {
    const timestamp = new Date('2025-06-01T00:00:00Z');
    const prepared = prepare({
      payload: 'p',
      type: 'order.created',
      key: 'customer-1',
      metadata: { source: 'web' },
      id: 'evt-1',
      partition: 3,
      timestamp,
    });
    expect(prepared).toEqual({
      id: 'evt-1',
      type: 'order.created',
      key: 'customer-1',
      payload: 'p',
      metadata: { source: 'web' },
      partition: 3,
      timestamp,
      size: jsonBytes('p') + jsonBytes({ source: 'web' }),
    });
    // The timestamp is copied: changing the caller's Date changes nothing stored.
    expect(prepared.timestamp).not.toBe(timestamp);
    timestamp.setTime(0);
    expect(prepared.timestamp.getTime()).toBe(Date.parse('2025-06-01T00:00:00Z'));
  });

  it('treats a null key as no key and accepts the empty key and 1024 characters', () => {
    expect(prepare({ payload: 1, key: null }).key).toBeNull();
    expect(prepare({ payload: 1, key: '' }).key).toBe('');
    expect(prepare({ payload: 1, key: 'k'.repeat(1024) }).key).toBe('k'.repeat(1024));
    expect(invalid(() => prepare({ payload: 1, key: 'k'.repeat(1025) }))).toMatch(
      /^events\[0\]\.key must be a string of 0-1024 characters, got "k+…"$/,
    );
  });

  it('requires a payload, naming it', () => {
    for (const input of [{}, { payload: undefined }, { type: 'x' }]) {
      expect(invalid(() => prepare(input))).toBe('events[0].payload is required and must be JSON (undefined is not JSON)');
    }
    expect(prepare({ payload: null }).payload).toBeNull();
  });

  it('names the input and the field that is wrong', () => {
    expect(invalid(() => prepare(null))).toBe('events[0] must be an object, got null');
    expect(invalid(() => prepare({ payload: { x: Number.NaN } }))).toBe('events[0].payload.x is NaN, which is not JSON');
    expect(invalid(() => prepare({ payload: 1, type: '' }))).toBe('events[0].type must be a string of 1-200 characters, got ""');
    expect(invalid(() => prepare({ payload: 1, type: null }))).toMatch(/^events\[0\]\.type must be a string/);
    expect(invalid(() => prepare({ payload: 1, key: 7 }))).toBe('events[0].key must be a string of 0-1024 characters, got 7');
    expect(invalid(() => prepare({ payload: 1, id: '' }))).toBe('events[0].id must be a string of 1-200 characters, got ""');
    expect(invalid(() => prepare({ payload: 1, id: null }))).toMatch(/^events\[0\]\.id must be a string/);
    expect(invalid(() => prepare({ payload: 1, partition: MAX_PARTITIONS + 1 }))).toBe(
      `events[0].partition must be an integer in 0..${MAX_PARTITIONS}, got ${MAX_PARTITIONS + 1}`,
    );
    expect(invalid(() => prepare({ payload: 1, partition: null }))).toMatch(/^events\[0\]\.partition must be an integer/);
    expect(invalid(() => prepare({ payload: 1, timestamp: '2026-01-01' }))).toBe(
      'events[0].timestamp must be a valid Date, got "2026-01-01"',
    );
    expect(invalid(() => prepare({ payload: 1, timestamp: null }))).toMatch(/^events\[0\]\.timestamp must be a valid Date/);
  });

  it('accepts partition 0 and the highest partition number', () => {
    expect(prepare({ payload: 1, partition: 0 }).partition).toBe(0);
    expect(prepare({ payload: 1, partition: MAX_PARTITIONS }).partition).toBe(MAX_PARTITIONS);
  });

  it('refuses metadata that is not an object, with or without lineage', () => {
    expect(invalid(() => prepare({ payload: 1, metadata: [] }))).toBe('events[0].metadata must be an object, got an array');
    expect(invalid(() => prepare({ payload: 1, metadata: 'ab', causedBy: { id: 'e1' } }))).toBe(
      'events[0].metadata must be an object, got "ab"',
    );
    expect(invalid(() => prepare({ payload: 1, metadata: null }))).toBe('events[0].metadata must be an object, got null');
  });

  it('refuses class instances as metadata with lineage as without (spreading would drop their prototype)', () => {
    class Tags {
      readonly a = 1;
    }
    for (const lineage of [{}, { causedBy: { id: 'e1' } }, { correlationId: 'c' }, { causationId: 'c' }]) {
      expect(invalid(() => prepare({ payload: 1, metadata: new Map([['a', 1]]), ...lineage }))).toBe(
        'events[0].metadata is a Map instance, not a plain JSON object',
      );
      expect(invalid(() => prepare({ payload: 1, metadata: new Date(0), ...lineage }))).toBe(
        'events[0].metadata is a Date instance, not a plain JSON object',
      );
      expect(invalid(() => prepare({ payload: 1, metadata: new Tags(), ...lineage }))).toBe(
        'events[0].metadata is a Tags instance, not a plain JSON object',
      );
      const bare = Object.assign(Object.create(null) as object, { a: 1 });
      expect(prepare({ payload: 1, metadata: bare, ...lineage }).metadata).toMatchObject({ a: 1 });
    }
  });

  it('checks lineage keys written straight into metadata', () => {
    expect(invalid(() => prepare({ payload: 1, metadata: { correlationId: 5 } }))).toBe(
      'events[0].metadata.correlationId must be a string of 1-200 characters, got 5',
    );
  });

  it('derives lineage from causedBy; metadata beats it and explicit fields beat both', () => {
    const cause = { id: 'e1', metadata: { correlationId: 'c0' } };
    expect(prepare({ payload: 1, causedBy: cause }).metadata).toEqual({ correlationId: 'c0', causationId: 'e1' });
    expect(prepare({ payload: 1, causedBy: cause, metadata: { causationId: 'm', extra: true } }).metadata).toEqual({
      correlationId: 'c0',
      causationId: 'm',
      extra: true,
    });
    expect(
      prepare({ payload: 1, causedBy: cause, metadata: { correlationId: 'm' }, correlationId: 'x', causationId: 'y' }).metadata,
    ).toEqual({ correlationId: 'x', causationId: 'y' });
    const explicitOnly = prepare({ payload: 1, correlationId: 'x' });
    expect(explicitOnly.metadata).toEqual({ correlationId: 'x' });
    expect(explicitOnly.size).toBe(jsonBytes(1) + jsonBytes({ correlationId: 'x' }));
    expect(Object.isFrozen(explicitOnly.metadata)).toBe(true);
  });

  it('counts payload and metadata against maxEventBytes, at the limit accepted', () => {
    const payload = 'x'.repeat(10); // 12 bytes of JSON, plus 2 for the empty metadata
    expect(prepare({ payload }, { stream: 'orders', maxEventBytes: 14 }).size).toBe(14);
    const error = thrown(() => prepare({ payload }, { stream: 'orders', maxEventBytes: 13 }));
    expect(error.code).toBe('event_too_large');
    expect(error.stream).toBe('orders');
    expect(error.message).toBe(
      'events[0] for stream "orders" is at least 14 bytes (payload plus metadata), over the limit of 13 bytes',
    );

    const withMetadata = { payload, metadata: { a: 1 } }; // 12 + 7
    expect(prepare(withMetadata, { stream: 'orders', maxEventBytes: 19 }).size).toBe(19);
    expect(thrown(() => prepare(withMetadata, { stream: 'orders', maxEventBytes: 18 })).message).toContain(
      'is at least 19 bytes',
    );
    const withLineage = { payload, correlationId: 'c' }; // 12 + 21
    expect(prepare(withLineage, { stream: 'orders', maxEventBytes: 33 }).size).toBe(33);
    expect(thrown(() => prepare(withLineage, { stream: 'orders', maxEventBytes: 32 })).code).toBe('event_too_large');
  });

  it('turns a getter that throws into invalid_argument naming the input', () => {
    const boom = new Error('boom');
    const error = thrown(() => prepare(throwing('payload', boom)));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toBe('events[0] could not be read: boom');
    expect(error.cause).toBe(boom);
  });
});

describe('assertBatchSize', () => {
  const events = [{ size: 10 }, { size: 20 }] as PreparedAppend[];

  it('accepts a batch of exactly maxBatchBytes', () => {
    expect(() => assertBatchSize('orders', events, 30)).not.toThrow();
    expect(() => assertBatchSize('orders', [], 0)).not.toThrow();
  });

  it('refuses a larger batch with its size, count and the limit', () => {
    const error = thrown(() => assertBatchSize('orders', events, 29));
    expect(error.code).toBe('event_too_large');
    expect(error.stream).toBe('orders');
    expect(error.message).toBe(
      'appendBatch to stream "orders" is 30 bytes of payload and metadata in 2 events, over limits.maxBatchBytes of 29',
    );
  });
});

describe('assertOptions', () => {
  it('accepts no options or an object and names anything else', () => {
    expect(() => assertOptions('append options', undefined)).not.toThrow();
    expect(() => assertOptions('append options', {})).not.toThrow();
    expect(invalid(() => assertOptions('append options', null))).toBe('append options must be an object, got null');
    expect(invalid(() => assertOptions('append options', 3))).toBe('append options must be an object, got 3');
  });
});

describe('messageOf', () => {
  it("gives an Error's message and anything else's String()", () => {
    expect(messageOf(new Error('boom'))).toBe('boom');
    expect(messageOf('plain')).toBe('plain');
    expect(messageOf(42)).toBe('42');
    const numbered = new Error('x');
    (numbered as unknown as { message: unknown }).message = 7;
    expect(messageOf(numbered)).toBe('7');
  });

  it('describes a value that cannot even be read', () => {
    const unreadable = throwing('message', new Error('no'), new Error('hidden'));
    Object.setPrototypeOf(unreadable, Error.prototype);
    expect(messageOf(unreadable)).toBe('an unreadable value was thrown');
    expect(messageOf({ toString: () => { throw new Error('no'); } })).toBe('an unreadable value was thrown');
  });
});

describe('leaseRef', () => {
  it('reads the fencing fields of a lease', () => {
    expect(leaseRef(LEASE, 'ack')).toEqual(REF);
    expect(leaseRef({ ...LEASE, event: { partition: 0, sequence: 1 } }, 'ack')).toMatchObject({ partition: 0, sequence: 1 });
    expect(leaseRef({ ...LEASE, event: { partition: MAX_PARTITIONS, sequence: 1 } }, 'ack').partition).toBe(MAX_PARTITIONS);
    expect(leaseRef({ ...LEASE, leaseId: 'l'.repeat(200) }, 'ack').leaseId).toBe('l'.repeat(200));
  });

  it('names what was given instead of a lease', () => {
    expect(invalid(() => leaseRef(null, 'ack'))).toBe('ack expects a lease, got null');
    expect(invalid(() => leaseRef(undefined, 'ack'))).toBe('ack expects a lease, got undefined');
    expect(invalid(() => leaseRef('lease-1', 'ack'))).toBe('ack expects a lease, got "lease-1"');
  });

  it('lists the fields a lease needs when one is missing or of the wrong type', () => {
    const expected = 'ack expects a lease returned by fetch (leaseId, stream, group, event.partition, event.sequence)';
    const broken: unknown[] = [
      {},
      { ...LEASE, leaseId: undefined },
      { ...LEASE, leaseId: 1 },
      { ...LEASE, stream: undefined },
      { ...LEASE, group: undefined },
      { ...LEASE, event: undefined },
      { ...LEASE, event: null },
      { ...LEASE, event: 'e' },
      { ...LEASE, event: { sequence: 7 } },
      { ...LEASE, event: { partition: 2 } },
      { ...LEASE, event: { partition: '2', sequence: 7 } },
      { ...LEASE, event: { partition: 2, sequence: '7' } },
    ];
    for (const lease of broken) expect(invalid(() => leaseRef(lease, 'ack'))).toBe(expected);
  });

  it('checks each value read, naming it', () => {
    expect(invalid(() => leaseRef({ ...LEASE, stream: 'a b' }, 'ack'))).toMatch(/^stream name must be .* got "a b"$/);
    expect(invalid(() => leaseRef({ ...LEASE, group: '' }, 'ack'))).toMatch(/^group name must be .* got ""$/);
    expect(invalid(() => leaseRef({ ...LEASE, leaseId: '' }, 'ack'))).toBe('leaseId must be a string of 1-200 characters, got ""');
    expect(invalid(() => leaseRef({ ...LEASE, leaseId: 'l'.repeat(201) }, 'ack'))).toMatch(/^leaseId must be a string of 1-200/);
    expect(invalid(() => leaseRef({ ...LEASE, leaseId: 'a\u0000' }, 'ack'))).toMatch(/^leaseId contains U\+0000/);
    expect(invalid(() => leaseRef({ ...LEASE, leaseId: 'a\ud800' }, 'ack'))).toMatch(/^leaseId contains a lone surrogate/);
    expect(invalid(() => leaseRef({ ...LEASE, event: { partition: -1, sequence: 7 } }, 'ack'))).toBe(
      `lease event.partition must be an integer in 0..${MAX_PARTITIONS}, got -1`,
    );
    expect(invalid(() => leaseRef({ ...LEASE, event: { partition: MAX_PARTITIONS + 1, sequence: 7 } }, 'ack'))).toMatch(
      /^lease event\.partition must be an integer/,
    );
    expect(invalid(() => leaseRef({ ...LEASE, event: { partition: 2, sequence: 0 } }, 'ack'))).toBe(
      'lease event.sequence must be an integer >= 1, got 0',
    );
  });

  it('turns a getter that throws into invalid_argument with the cause', () => {
    const boom = new Error('boom');
    for (const lease of [throwing('leaseId', boom, LEASE), { ...LEASE, event: throwing('sequence', boom, LEASE.event) }]) {
      const error = thrown(() => leaseRef(lease, 'ack'));
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toBe('ack could not read the lease: boom');
      expect(error.cause).toBe(boom);
    }
  });

  it('reads each field once', () => {
    let reads = 0;
    const lease = {
      stream: 'orders',
      group: 'billing',
      event: { partition: 2, sequence: 7 },
      get leaseId() {
        reads++;
        return reads === 1 ? 'lease-1' : '';
      },
    };
    expect(leaseRef(lease, 'ack').leaseId).toBe('lease-1');
    expect(reads).toBe(1);
  });
});

describe('normalizeReason', () => {
  it('is null for no reason and the text of any other', () => {
    expect(normalizeReason(undefined)).toBeNull();
    expect(normalizeReason(null)).toBeNull();
    expect(normalizeReason('')).toBe('');
    expect(normalizeReason('bad input')).toBe('bad input');
    expect(normalizeReason(new Error('boom'))).toBe('boom');
    expect(normalizeReason(new TypeError(''))).toBe('TypeError');
    expect(normalizeReason(42)).toBe('42');
    expect(normalizeReason(false)).toBe('false');
    expect(normalizeReason({ toString: () => 'custom' })).toBe('custom');
  });

  it('describes a reason whose text cannot be had', () => {
    const numbered = new Error('x');
    (numbered as unknown as { message: unknown }).message = 7;
    expect(normalizeReason(numbered)).toBe('an object');
    expect(normalizeReason({ toString: () => { throw new Error('no'); } })).toBe('an object');
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(normalizeReason(circular)).toBe('an object');
    expect(normalizeReason({ big: 1n })).toBe('an object');
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    expect(normalizeReason(proxy)).toBe('an unreadable value');
  });

  it('stores a plain object or an array as its JSON text, never as "[object Object]"', () => {
    expect(normalizeReason({ why: 'x' })).toBe('{"why":"x"}');
    expect(normalizeReason({ why: 'x', codes: [1, 2], nested: { ok: false } })).toBe('{"why":"x","codes":[1,2],"nested":{"ok":false}}');
    expect(normalizeReason([1, 2])).toBe('[1,2]');
    expect(normalizeReason(Object.assign(Object.create(null) as object, { a: 1 }))).toBe('{"a":1}');
    // A value that says what it is keeps saying it: its own toString, or an Error's message.
    expect(normalizeReason(new Date(0))).toBe(String(new Date(0)));
    expect(normalizeReason(Object.assign(new Error('boom'), { why: 'x' }))).toBe('boom');
    // U+0000 inside the JSON is replaced like anywhere else; JSON escapes it first.
    expect(normalizeReason({ why: 'a\u0000b' })).toBe('{"why":"a\\u0000b"}');
  });

  it('replaces U+0000 and lone surrogates with U+FFFD', () => {
    expect(normalizeReason('a\u0000b')).toBe('a\ufffdb');
    expect(normalizeReason('a\ud800b\udc00')).toBe('a\ufffdb\ufffd');
    expect(normalizeReason('🦀')).toBe('🦀');
    expect(normalizeReason(new Error('x\u0000'))).toBe('x\ufffd');
  });

  it(`cuts a reason at ${MAX_REASON_LENGTH} code units`, () => {
    const exact = 'a'.repeat(MAX_REASON_LENGTH);
    expect(normalizeReason(exact)).toBe(exact);
    expect(normalizeReason(`${exact}b`)).toBe(exact);
    expect(normalizeReason(new Error(`${exact}bcd`))).toBe(exact);
  });

  it('never cuts inside a surrogate pair', () => {
    const head = 'a'.repeat(MAX_REASON_LENGTH - 1);
    // The last code unit kept would be a high surrogate: the pair goes whole.
    for (const pair of ['\ud800\udc00', '\ud83e\udd80', '\udbff\udfff']) {
      expect(normalizeReason(`${head}${pair}b`)).toBe(head);
    }
    // The pair ends exactly at the limit: it stays.
    const before = 'a'.repeat(MAX_REASON_LENGTH - 2);
    for (const pair of ['\ud800\udc00', '\udbff\udfff']) {
      expect(normalizeReason(`${before}${pair}b`)).toBe(`${before}${pair}`);
    }
    // A lone high surrogate as the last unit of a reason exactly at the limit is replaced, not cut.
    expect(normalizeReason(`${head}\ud800`)).toBe(`${head}\ufffd`);
    // Units just outside the high-surrogate range are kept.
    expect(normalizeReason(`${head}\ud7ffb`)).toBe(`${head}\ud7ff`);
    expect(normalizeReason(`${head}\ufffdb`)).toBe(`${head}\ufffd`);
  });
});

describe('settleOp', () => {
  it('builds one op shape for every kind', () => {
    expect(settle({ kind: 'ack', lease: LEASE })).toEqual({ ...REF, kind: 'ack', reason: null, delayMs: 0 });
    expect(settle({ kind: 'release', lease: LEASE })).toEqual({ ...REF, kind: 'release', reason: null, delayMs: 0 });
    expect(settle({ kind: 'reject', lease: LEASE, reason: 'bad' })).toEqual({ ...REF, kind: 'reject', reason: 'bad', delayMs: 0 });
    expect(settle({ kind: 'reject', lease: LEASE })).toEqual({ ...REF, kind: 'reject', reason: null, delayMs: 0 });
    expect(settle({ kind: 'nack', lease: LEASE, reason: new Error('later'), delayMs: 500 })).toEqual({
      ...REF,
      kind: 'nack',
      reason: 'later',
      delayMs: 500,
    });
    expect(settle({ kind: 'nack', lease: LEASE })).toEqual({ ...REF, kind: 'nack', reason: null, delayMs: 0 });
  });

  it('ignores reason and delayMs where the kind has none, without reading them', () => {
    const boom = new Error('must not be read');
    expect(settle(throwing('reason', boom, throwing('delayMs', boom, { kind: 'ack', lease: LEASE })))).toEqual({
      ...REF,
      kind: 'ack',
      reason: null,
      delayMs: 0,
    });
    expect(settle(throwing('delayMs', boom, { kind: 'reject', lease: LEASE, reason: 'r' }))).toMatchObject({
      reason: 'r',
      delayMs: 0,
    });
    expect(settle({ kind: 'release', lease: LEASE, reason: 'r', delayMs: 5 })).toMatchObject({ reason: null, delayMs: 0 });
    expect(settle({ kind: 'reject', lease: LEASE, reason: 'r', delayMs: 5 })).toMatchObject({ reason: 'r', delayMs: 0 });
  });

  it(`accepts a nack delay of up to ${MAX_LEASE_MS} ms and names a bad one`, () => {
    expect(settle({ kind: 'nack', lease: LEASE, delayMs: MAX_LEASE_MS })).toMatchObject({ delayMs: MAX_LEASE_MS });
    expect(invalid(() => settle({ kind: 'nack', lease: LEASE, delayMs: MAX_LEASE_MS + 1 }))).toBe(
      `delayMs must be an integer in 0..${MAX_LEASE_MS}, got ${MAX_LEASE_MS + 1}`,
    );
    expect(invalid(() => settle({ kind: 'nack', lease: LEASE, delayMs: -1 }))).toMatch(/^delayMs must be an integer/);
  });

  it('names what was given instead of a settle request', () => {
    expect(invalid(() => settle(null))).toBe('settle[0] expects a settle request, got null');
    expect(invalid(() => settle('ack'))).toBe('settle[0] expects a settle request, got "ack"');
    expect(invalid(() => settle(undefined))).toBe('settle[0] expects a settle request, got undefined');
  });

  it('names an unknown kind', () => {
    expect(invalid(() => settle({ kind: 'commit', lease: LEASE }))).toBe(
      'settle[0]: kind must be ack, nack, reject or release, got "commit"',
    );
    expect(invalid(() => settle({ lease: LEASE }))).toBe('settle[0]: kind must be ack, nack, reject or release, got undefined');
  });

  it('checks the lease under the same name', () => {
    expect(invalid(() => settle({ kind: 'ack', lease: null }))).toBe('settle[0] expects a lease, got null');
  });

  it('turns a getter that throws into invalid_argument with the cause', () => {
    const boom = new Error('boom');
    for (const request of [
      throwing('kind', boom, { lease: LEASE }),
      throwing('reason', boom, { kind: 'reject', lease: LEASE }),
      throwing('delayMs', boom, { kind: 'nack', lease: LEASE }),
      throwing('reason', boom, { kind: 'nack', lease: LEASE }),
    ]) {
      const error = thrown(() => settle(request));
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toBe('settle[0] could not read the settle request: boom');
      expect(error.cause).toBe(boom);
    }
  });
});

describe('normalizePartitions', () => {
  it('is null when not given, else sorted numerically without duplicates', () => {
    expect(normalizePartitions(undefined)).toBeNull();
    expect(normalizePartitions([10, 2, 1, 2, 0])).toEqual([0, 1, 2, 10]);
    expect(normalizePartitions([MAX_PARTITIONS])).toEqual([MAX_PARTITIONS]);
  });

  it('names an empty list, a non-list and a bad partition', () => {
    expect(invalid(() => normalizePartitions([]))).toBe('partitions must be a non-empty array of partition numbers, got an array');
    expect(invalid(() => normalizePartitions(3))).toBe('partitions must be a non-empty array of partition numbers, got 3');
    expect(invalid(() => normalizePartitions(null))).toMatch(/^partitions must be a non-empty array/);
    expect(invalid(() => normalizePartitions([1, MAX_PARTITIONS + 1]))).toBe(
      `partitions[] must be an integer in 0..${MAX_PARTITIONS}, got ${MAX_PARTITIONS + 1}`,
    );
  });
});

describe('normalizeStart', () => {
  it('starts after 0 when nothing is given', () => {
    expect(normalizeStart(undefined, undefined)).toEqual({ kind: 'after', after: 0, perPartition: {} });
  });

  it('takes startAt as a copied Date', () => {
    const at = new Date('2026-02-03T04:05:06Z');
    const start = normalizeStart(undefined, at);
    expect(start).toEqual({ kind: 'at', at });
    expect((start as { at: Date }).at).not.toBe(at);
    expect(invalid(() => normalizeStart(undefined, 'yesterday'))).toBe('startAt must be a valid Date, got "yesterday"');
    expect(invalid(() => normalizeStart(undefined, null))).toBe('startAt must be a valid Date, got null');
  });

  it('refuses both, naming them', () => {
    expect(invalid(() => normalizeStart(0, new Date()))).toBe('give either startAfter or startAt, not both');
  });

  it('takes a sequence for every partition', () => {
    expect(normalizeStart(0, undefined)).toEqual({ kind: 'after', after: 0, perPartition: {} });
    expect(normalizeStart(42, undefined)).toEqual({ kind: 'after', after: 42, perPartition: {} });
    expect(invalid(() => normalizeStart(-1, undefined))).toBe('startAfter must be an integer >= 0, got -1');
    expect(invalid(() => normalizeStart(1.5, undefined))).toBe('startAfter must be an integer >= 0, got 1.5');
  });

  it('takes a sequence per partition', () => {
    expect(normalizeStart({ 0: 5, 3: 0, [MAX_PARTITIONS]: 9, 12: 1 }, undefined)).toEqual({
      kind: 'after',
      after: 0,
      perPartition: { 0: 5, 3: 0, 12: 1, [MAX_PARTITIONS]: 9 },
    });
    expect(normalizeStart({}, undefined)).toEqual({ kind: 'after', after: 0, perPartition: {} });
  });

  it('refuses a key that is not a plain partition number, naming it', () => {
    for (const key of ['x', '', ' 1', '1 ', '1e1', '0x1', '-1', '1.0', String(MAX_PARTITIONS + 1)]) {
      expect(invalid(() => normalizeStart({ [key]: 1 }, undefined))).toMatch(
        new RegExp(`^startAfter partition key ${escape(JSON.stringify(key))} must be an integer in 0\\.\\.${MAX_PARTITIONS}, got `),
      );
    }
  });

  it('refuses a bad sequence or a non-object, naming it', () => {
    expect(invalid(() => normalizeStart({ 2: -1 }, undefined))).toBe('startAfter[2] must be an integer >= 0, got -1');
    expect(invalid(() => normalizeStart({ 2: '5' }, undefined))).toBe('startAfter[2] must be an integer >= 0, got "5"');
    expect(invalid(() => normalizeStart('5', undefined))).toBe('startAfter must be an object, got "5"');
    expect(invalid(() => normalizeStart(null, undefined))).toBe('startAfter must be an object, got null');
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe('normalizeEventIds', () => {
  it('keeps the first of each id, in order', () => {
    expect(normalizeEventIds(['b', 'a', 'b'])).toEqual(['b', 'a']);
  });

  it(`accepts up to ${MAX_LIMIT} ids`, () => {
    const ids = Array.from({ length: MAX_LIMIT }, (_, i) => `e${i}`);
    expect(normalizeEventIds(ids)).toHaveLength(MAX_LIMIT);
    expect(invalid(() => normalizeEventIds([...ids, 'one-more']))).toBe(
      `eventIds must be a non-empty array of at most ${MAX_LIMIT} ids, got an array`,
    );
  });

  it('names an empty list, a non-list and a bad id', () => {
    expect(invalid(() => normalizeEventIds([]))).toBe(`eventIds must be a non-empty array of at most ${MAX_LIMIT} ids, got an array`);
    expect(invalid(() => normalizeEventIds('e1'))).toBe(`eventIds must be a non-empty array of at most ${MAX_LIMIT} ids, got "e1"`);
    expect(invalid(() => normalizeEventIds(['e1', '']))).toBe('eventIds[] must be a string of 1-200 characters, got ""');
  });
});

describe('normalizeReplay', () => {
  const from = new Date('2026-01-02T00:00:00Z');

  it('takes exactly one kind, ignoring undefined fields', () => {
    expect(normalizeReplay('orders', { fromSequence: 5, from: undefined })).toEqual({ kind: 'fromSequence', fromSequence: 5 });
    expect(normalizeReplay('orders', { from, fromSequence: undefined, query: undefined })).toEqual({ kind: 'from', from });
    expect(normalizeReplay('orders', { eventIds: ['a', 'a'], fromSequence: undefined, from: undefined })).toEqual({
      kind: 'eventIds',
      eventIds: ['a'],
    });
    expect(
      normalizeReplay('orders', { query: { type: 't' }, fromSequence: undefined, from: undefined, eventIds: undefined }),
    ).toEqual({
      kind: 'query',
      query: { types: ['t'], key: null, wherePayload: undefined, whereMetadata: undefined, from: null, to: null },
    });
  });

  it('copies the from Date', () => {
    const replay = normalizeReplay('orders', { from }) as { from: Date };
    expect(replay.from).not.toBe(from);
    expect(replay.from.getTime()).toBe(from.getTime());
  });

  it('names the kinds when none or several are given', () => {
    const message = 'replay spec must have exactly one of fromSequence, from, eventIds, query';
    for (const spec of [
      {},
      { fromSequence: undefined },
      { fromSequence: 1, from },
      { fromSequence: 1, limit: 5 },
      { limit: 5 },
      // An unknown key with every kind present but undefined: still no kind.
      { limit: 5, fromSequence: undefined, from: undefined, eventIds: undefined, query: undefined },
      { limit: 5, query: undefined },
    ]) {
      expect(invalid(() => normalizeReplay('orders', spec))).toBe(message);
    }
    expect(invalid(() => normalizeReplay('orders', 'all'))).toBe('replay spec must be an object, got "all"');
  });

  it('checks the value of the kind given, naming it', () => {
    expect(invalid(() => normalizeReplay('orders', { fromSequence: 0 }))).toBe('fromSequence must be an integer >= 1, got 0');
    expect(invalid(() => normalizeReplay('orders', { fromSequence: null }))).toMatch(/^fromSequence must be an integer/);
    expect(invalid(() => normalizeReplay('orders', { from: 'today' }))).toBe('from must be a valid Date, got "today"');
    expect(invalid(() => normalizeReplay('orders', { eventIds: [] }))).toMatch(/^eventIds must be a non-empty array/);
    expect(invalid(() => normalizeReplay('orders', { query: 'x' }))).toBe('replay query must be an object, got "x"');
  });

  it('keeps only the filters of a replay query', () => {
    const to = new Date('2026-03-01T00:00:00Z');
    expect(
      normalizeReplay('orders', {
        query: { type: ['a', 'b'], key: 'k', where: { payload: { x: 1 }, metadata: { m: 'n' } }, correlationId: 'c', from, to },
      }),
    ).toEqual({
      kind: 'query',
      query: { types: ['a', 'b'], key: 'k', wherePayload: { x: 1 }, whereMetadata: { m: 'n', correlationId: 'c' }, from, to },
    });
  });

  it('refuses paging, order and partition in a replay query, listing what it accepts', () => {
    for (const key of ['limit', 'cursor', 'order', 'partition', 'afterSequence']) {
      expect(invalid(() => normalizeReplay('orders', { query: { type: 't', [key]: 1 } }))).toBe(
        `replay query accepts type, key, where, correlationId, from, to, got ${JSON.stringify(key)} (scope a replay with its partitions option)`,
      );
    }
  });
});

describe('normalizeQuery', () => {
  it('fills in the defaults', () => {
    expect(query({})).toEqual({
      types: null,
      key: null,
      wherePayload: undefined,
      whereMetadata: undefined,
      from: null,
      to: null,
      afterSequence: null,
      untilSequence: null,
      partition: null,
      order: 'asc',
      limit: 100,
      maxBytes: 4096,
      cursor: null,
    });
    expect(query({ cursor: null }).cursor).toBeNull();
  });

  it('keeps every option given', () => {
    const from = new Date('2026-01-01T00:00:00Z');
    const to = new Date('2026-02-01T00:00:00Z');
    const position = { timestampMs: 1000, partition: 1, sequence: 2 };
    expect(
      query({
        type: 'order.created',
        key: '',
        where: { payload: [1], metadata: { a: 'b' } },
        from,
        to,
        afterSequence: 0,
        untilSequence: 9,
        partition: MAX_PARTITIONS,
        order: 'desc',
        limit: 1000,
        maxBytes: MAX_CONFIGURABLE_BYTES,
        cursor: encodeQueryCursor(position),
      }),
    ).toEqual({
      types: ['order.created'],
      key: '',
      wherePayload: [1],
      whereMetadata: { a: 'b' },
      from,
      to,
      afterSequence: 0,
      untilSequence: 9,
      partition: MAX_PARTITIONS,
      order: 'desc',
      limit: 1000,
      maxBytes: MAX_CONFIGURABLE_BYTES,
      cursor: position,
    });
    expect(query({ order: 'asc', limit: 1, maxBytes: 1, afterSequence: 3, untilSequence: 0, partition: 0 })).toMatchObject({
      order: 'asc',
      limit: 1,
      maxBytes: 1,
      afterSequence: 3,
      untilSequence: 0,
      partition: 0,
    });
  });

  it('takes one type or a list without duplicates', () => {
    expect(query({ type: 'abc' }).types).toEqual(['abc']);
    expect(query({ type: ['b', 'a', 'b'] }).types).toEqual(['b', 'a']);
    expect(invalid(() => query({ type: [] }))).toBe('query type must be a string or a non-empty array of strings');
    expect(invalid(() => query({ type: ['a', ''] }))).toBe('query type must be a string of 1-200 characters, got ""');
    expect(invalid(() => query({ type: 5 }))).toBe('query type must be a string of 1-200 characters, got 5');
  });

  it('adds correlationId to the metadata pattern', () => {
    expect(query({ correlationId: 'c' }).whereMetadata).toEqual({ correlationId: 'c' });
    expect(query({ correlationId: 'c', where: { metadata: { a: 1 } } }).whereMetadata).toEqual({ a: 1, correlationId: 'c' });
    expect(invalid(() => query({ correlationId: '' }))).toMatch(/^query correlationId must be a string/);
  });

  it('names a bad where', () => {
    expect(invalid(() => query({ where: [] }))).toBe('query where must be an object, got an array');
    expect(invalid(() => query({ where: { payload: 1, type: 'x' } }))).toBe('query where accepts payload and metadata, got "type"');
    expect(invalid(() => query({ where: { payload: { x: Number.NaN } } }))).toBe('query where.payload.x is NaN, which is not JSON');
    expect(invalid(() => query({ where: { metadata: 'm' } }))).toBe('query where.metadata must be an object, got "m"');
    expect(invalid(() => query({ where: { metadata: { f: () => 1 } } }))).toBe(
      'query where.metadata.f is a function, which is not JSON',
    );
    expect(query({ where: { payload: null } }).wherePayload).toBeNull();
    expect(query({ where: {} })).toMatchObject({ wherePayload: undefined, whereMetadata: undefined });
  });

  it('names each bad option and its range', () => {
    const cases: Array<[unknown, string]> = [
      [{ key: 'k'.repeat(1025) }, 'query key must be a string of 0-1024 characters, got "'],
      [{ key: null }, 'query key must be a string of 0-1024 characters, got null'],
      [{ from: 'x' }, 'query from must be a valid Date, got "x"'],
      [{ to: 1 }, 'query to must be a valid Date, got 1'],
      [{ afterSequence: -1 }, 'afterSequence must be an integer >= 0, got -1'],
      [{ afterSequence: null }, 'afterSequence must be an integer >= 0, got null'],
      [{ untilSequence: 1.5 }, 'untilSequence must be an integer >= 0, got 1.5'],
      [{ partition: MAX_PARTITIONS + 1 }, `partition must be an integer in 0..${MAX_PARTITIONS}, got ${MAX_PARTITIONS + 1}`],
      [{ order: 'up' }, `query order must be 'asc' or 'desc', got "up"`],
      [{ order: null }, `query order must be 'asc' or 'desc', got null`],
      [{ limit: 0 }, 'limit must be an integer in 1..1000, got 0'],
      [{ limit: 1001 }, 'limit must be an integer in 1..1000, got 1001'],
      [{ maxBytes: 0 }, `maxBytes must be an integer in 1..${MAX_CONFIGURABLE_BYTES}, got 0`],
      [{ maxBytes: MAX_CONFIGURABLE_BYTES + 1 }, `maxBytes must be an integer in 1..${MAX_CONFIGURABLE_BYTES}, got`],
      [{ cursor: '' }, 'query cursor must be a string of 1-500 characters, got ""'],
      [{ cursor: 'c'.repeat(501) }, 'query cursor must be a string of 1-500 characters, got "'],
      [{ cursor: 'not-a-cursor' }, 'query cursor for stream "orders" is malformed'],
    ];
    for (const [options, message] of cases) {
      expect([options, invalid(() => query(options))]).toEqual([options, expect.stringContaining(message)]);
    }
  });

  it('turns a getter that throws into invalid_argument', () => {
    const boom = new Error('boom');
    const error = thrown(() => query(throwing('limit', boom)));
    expect(error.message).toBe('query options could not be read: boom');
    expect(error.cause).toBe(boom);
  });
});

describe('normalizeRetention', () => {
  it('null keeps everything; either bound or both may be set', () => {
    expect(normalizeRetention(null)).toBeNull();
    expect(normalizeRetention({ maxAgeMs: 1 })).toEqual({ maxAgeMs: 1, maxEvents: null });
    expect(normalizeRetention({ maxEvents: 0 })).toEqual({ maxAgeMs: null, maxEvents: 0 });
    expect(normalizeRetention({ maxAgeMs: null, maxEvents: 5 })).toEqual({ maxAgeMs: null, maxEvents: 5 });
    expect(normalizeRetention({ maxAgeMs: MAX_RETENTION_AGE_MS, maxEvents: 10 })).toEqual({
      maxAgeMs: MAX_RETENTION_AGE_MS,
      maxEvents: 10,
    });
  });

  it('names a bound out of range', () => {
    expect(invalid(() => normalizeRetention({ maxAgeMs: 0 }))).toBe(
      `retention.maxAgeMs must be an integer in 1..${MAX_RETENTION_AGE_MS}, got 0`,
    );
    expect(invalid(() => normalizeRetention({ maxAgeMs: MAX_RETENTION_AGE_MS + 1 }))).toMatch(/^retention\.maxAgeMs must be/);
    expect(invalid(() => normalizeRetention({ maxEvents: -1 }))).toBe('retention.maxEvents must be an integer >= 0, got -1');
    expect(invalid(() => normalizeRetention({ maxEvents: '5' }))).toBe('retention.maxEvents must be an integer >= 0, got "5"');
  });

  it('needs at least one bound', () => {
    for (const value of [{}, { maxAgeMs: null }, { maxAgeMs: undefined, maxEvents: null }]) {
      expect(invalid(() => normalizeRetention(value))).toBe('retention needs maxAgeMs or maxEvents (pass null to keep every event)');
    }
  });

  it('names an unknown key and a non-object', () => {
    expect(invalid(() => normalizeRetention({ maxAgeMs: 1, maxBytes: 5 }))).toBe(
      'retention accepts maxAgeMs and maxEvents, got an unknown key "maxBytes"',
    );
    expect(invalid(() => normalizeRetention(undefined))).toBe('retention must be an object, got undefined');
    expect(invalid(() => normalizeRetention(5))).toBe('retention must be an object, got 5');
  });
});

describe('normalizeTrim', () => {
  it('without options trims nothing and does not force', () => {
    expect(normalizeTrim(undefined)).toEqual({ before: null, keep: null, force: false });
    expect(normalizeTrim({})).toEqual({ before: null, keep: null, force: false });
  });

  it('takes before (copied), keep and force', () => {
    const before = new Date('2026-01-01T00:00:00Z');
    const trim = normalizeTrim({ before, keep: 0, force: true });
    expect(trim).toEqual({ before, keep: 0, force: true });
    expect(trim.before).not.toBe(before);
    expect(normalizeTrim({ keep: 12, force: false })).toEqual({ before: null, keep: 12, force: false });
  });

  it('accepts signal and timeoutMs, which the facade reads', () => {
    expect(normalizeTrim({ signal: new AbortController().signal, timeoutMs: 100 })).toEqual({
      before: null,
      keep: null,
      force: false,
    });
  });

  it('names an unknown key, a non-object and each bad option', () => {
    expect(invalid(() => normalizeTrim({ keep: 1, maxAgeMs: 5 }))).toBe(
      'trim accepts before, keep, force, signal and timeoutMs, got an unknown key "maxAgeMs"',
    );
    expect(invalid(() => normalizeTrim(null))).toBe('trim options must be an object, got null');
    expect(invalid(() => normalizeTrim({ before: 'x' }))).toBe('trim before must be a valid Date, got "x"');
    expect(invalid(() => normalizeTrim({ before: null }))).toBe('trim before must be a valid Date, got null');
    expect(invalid(() => normalizeTrim({ keep: -1 }))).toBe('trim keep must be an integer >= 0, got -1');
    expect(invalid(() => normalizeTrim({ keep: null }))).toBe('trim keep must be an integer >= 0, got null');
    expect(invalid(() => normalizeTrim({ force: 'yes' }))).toBe('trim force must be a boolean, got "yes"');
    expect(invalid(() => normalizeTrim({ force: null }))).toBe('trim force must be a boolean, got null');
  });
});

describe('a structured settle reason, end to end', () => {
  it('is stored and listed as JSON by reject, and by a nack at the last attempt', async () => {
    const rheo = createRheo({ clock: new ManualClock() });
    try {
      await rheo.createStream('reasons');
      await rheo.createGroup('reasons', 'g', { maxAttempts: 1 });
      await rheo.appendBatch('reasons', [{ id: 'a', payload: 1 }, { id: 'b', payload: 2 }]);
      const [first, second] = await rheo.fetch('reasons', 'g', { limit: 2 });
      // The typed signature asks for a string; JavaScript callers and `as` casts pass objects anyway.
      await rheo.reject(first!, { why: 'x' } as unknown as string);
      await rheo.nack(second!, { why: 'y', codes: [1] } as unknown as string);
      const letters = await rheo.deadLetters('reasons', 'g');
      expect(letters.map((letter) => [letter.event.id, letter.reason])).toEqual([
        ['a', '{"why":"x"}'],
        ['b', '{"why":"y","codes":[1]}'],
      ]);
    } finally {
      await rheo.close();
    }
  });
});
