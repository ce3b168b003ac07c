import { describe, expect, it } from 'vitest';
import { RheoError } from '../../src/core/errors.js';
import type { AppendInput, FetchOptions, JsonValue, Lease } from '../../src/core/types.js';
import { appendN, expectCode, readAll, useFixture, type BackendFactory } from './fixture.js';

class Money {
  constructor(readonly cents: number) {}
}

function cyclic(): JsonValue {
  const o: Record<string, unknown> = { a: 1 };
  o.self = o;
  return o as JsonValue;
}

/** Payloads that are not JSON and must be refused before anything is written. */
export const NON_JSON_PAYLOADS: Array<[string, () => unknown]> = [
  ['a function', () => () => 1],
  ['a nested function', () => ({ f: () => 1 })],
  ['a BigInt', () => 10n],
  ['a nested BigInt', () => ({ n: [1, 2n] })],
  ['a cycle', cyclic],
  ['undefined at the top level', () => undefined],
  ['NaN', () => Number.NaN],
  ['Infinity', () => ({ x: Number.POSITIVE_INFINITY })],
  ['a symbol', () => ({ s: Symbol('x') })],
  ['a Date', () => ({ at: new Date(0) })],
  ['a Map', () => new Map([[1, 2]])],
  ['a class instance', () => new Money(5)],
  ['a lone surrogate', () => ({ s: 'a\ud800b' })],
  ['a lone surrogate in a key', () => ({ ['\udc00']: 1 })],
  ['U+0000', () => 'nul\u0000byte'],
];

export function registerErrorTests(makeBackend: BackendFactory): void {
  describe('bad input', () => {
    const fx = useFixture(makeBackend);

    for (const [what, make] of NON_JSON_PAYLOADS) {
      it(`append of ${what} is invalid_argument and writes nothing`, async () => {
        const { rheo } = fx();
        await rheo.createStream('s');
        await expectCode(rheo.append('s', { payload: make() as JsonValue }), 'invalid_argument');
        await expectCode(rheo.append('s', { payload: 1, metadata: { m: make() as JsonValue } }), 'invalid_argument');
        expect(await readAll(rheo, 's')).toEqual([]);
      });
    }

    it('append without a payload is invalid_argument', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await expectCode(rheo.append('s', {} as AppendInput), 'invalid_argument');
      await expectCode(rheo.append('s', null as unknown as AppendInput), 'invalid_argument');
      expect(await readAll(rheo, 's')).toEqual([]);
    });

    it('append with a bad type, key, id, metadata, partition or timestamp is invalid_argument', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      const bad: unknown[] = [
        { payload: 1, type: '' },
        { payload: 1, type: 7 },
        { payload: 1, key: 42 },
        { payload: 1, id: '' },
        { payload: 1, metadata: [1, 2] },
        { payload: 1, metadata: 'm' },
        { payload: 1, partition: -1 },
        { payload: 1, partition: 0.5 },
        { payload: 1, timestamp: new Date(Number.NaN) },
        { payload: 1, timestamp: '2026-01-01' },
      ];
      for (const input of bad) await expectCode(rheo.append('s', input as AppendInput), 'invalid_argument');
      expect(await readAll(rheo, 's')).toEqual([]);
    });

    it('appendBatch with one bad item writes none of them', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const inputs = [{ payload: 1 }, { payload: 2 }, { payload: (() => 3) as unknown as JsonValue }, { payload: 4 }];
      await expectCode(rheo.appendBatch('s', inputs), 'invalid_argument');
      expect(await readAll(rheo, 's')).toEqual([]);
    });

    it('appendBatch with one out-of-range partition writes none of them', async () => {
      const { rheo } = fx();
      await rheo.createStream('s', { partitions: 2 });
      await appendN(rheo, 's', 1);
      await expectCode(
        rheo.appendBatch('s', [{ payload: 1 }, { payload: 2, partition: 1 }, { payload: 3, partition: 2 }]),
        'invalid_partition',
      );
      expect((await readAll(rheo, 's')).map((e) => [e.partition, e.sequence])).toEqual([[0, 1]]);
      expect((await rheo.append('s', { payload: 'next' })).sequence).toBe(2);
    });

    it('appendBatch of something other than an array is invalid_argument', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await expectCode(rheo.appendBatch('s', { payload: 1 } as unknown as AppendInput[]), 'invalid_argument');
      expect(await readAll(rheo, 's')).toEqual([]);
    });

    it('rejects non-integer or out-of-range fetch options and leases nothing', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      const bad: unknown[] = [
        { limit: 0 },
        { limit: -1 },
        { limit: 1.5 },
        { limit: '3' },
        { limit: 10_001 },
        { leaseMs: 0 },
        { leaseMs: -5 },
        { leaseMs: 2.5 },
        { partitions: [] },
        { partitions: [-1] },
        { partitions: [0.5] },
        { partitions: 0 },
        { consumerId: '' },
        { consumerId: 5 },
      ];
      for (const options of bad) await expectCode(rheo.fetch('s', 'g', options as FetchOptions), 'invalid_argument');
      await expectCode(rheo.fetch('s', 'g', 'x' as unknown as FetchOptions), 'invalid_argument');
      const info = await rheo.groupInfo('s', 'g');
      expect([info.inflight, info.lag.lag]).toEqual([0, 3]);
    });

    it('rejects bad read options', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await expectCode(rheo.read('s', { limit: 0 }), 'invalid_argument');
      await expectCode(rheo.read('s', { after: -1 }), 'invalid_argument');
      await expectCode(rheo.read('s', { partition: -1 }), 'invalid_argument');
      await expectCode(rheo.read('s', { partition: 1.5 }), 'invalid_argument');
    });

    it('rejects bad settle and renew arguments and changes nothing', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      const [lease] = (await rheo.fetch('s', 'g')) as [Lease];
      await expectCode(rheo.nack(lease, 'r', { delayMs: -1 }), 'invalid_argument');
      await expectCode(rheo.nack(lease, 'r', { delayMs: 1.5 }), 'invalid_argument');
      await expectCode(rheo.renew(lease, { leaseMs: 0 }), 'invalid_argument');
      await expectCode(rheo.ack(null as unknown as Lease), 'invalid_argument');
      await expectCode(rheo.ack({ leaseId: 'x' } as unknown as Lease), 'invalid_argument');
      await expectCode(rheo.ack({ ...lease, stream: 'bad name' }), 'invalid_argument');
      const info = await rheo.groupInfo('s', 'g');
      expect([info.inflight, info.deadLetters]).toEqual([1, 0]);
      await rheo.ack(lease);
    });

    it('ackMany reports a malformed lease as invalid_argument and still settles the others', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      const [lease] = (await rheo.fetch('s', 'g')) as [Lease];
      const results = await rheo.ackMany([{ leaseId: '' } as unknown as Lease, lease]);
      expect(results.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual(['invalid_argument', 'ok']);
    });

    it('rejects bad names on every call that takes one', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const calls: Array<() => Promise<unknown>> = [
        () => rheo.append('bad name', { payload: 1 }),
        () => rheo.read('bad/name'),
        () => rheo.query(''),
        () => rheo.listGroups('x'.repeat(201)),
        () => rheo.fetch('s', 'bad name'),
        () => rheo.lag('s', 'bad name'),
        () => rheo.groupInfo('s', ''),
        () => rheo.deadLetters('s', 'é'),
        () => rheo.redrive('s', 'a b'),
        () => rheo.replay('s', 'a b', { fromSequence: 1 }),
        () => rheo.resetGroup('s', 'a b', { confirm: true }),
      ];
      for (const call of calls) await expectCode(call(), 'invalid_argument');
    });

    it('rejects bad dead-letter and redrive options', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await expectCode(rheo.deadLetters('s', 'g', { limit: 0 }), 'invalid_argument');
      await expectCode(rheo.deadLetters('s', 'g', { after: '' }), 'invalid_argument');
      await expectCode(rheo.redrive('s', 'g', { eventIds: [] }), 'invalid_argument');
      await expectCode(rheo.redrive('s', 'g', { eventIds: [7 as unknown as string] }), 'invalid_argument');
    });
  });

  describe('errors', () => {
    const fx = useFixture(makeBackend);

    it('are RheoError instances carrying code, stream and group', async () => {
      const { rheo } = fx();
      await rheo.createStream('orders');
      const error = await expectCode(rheo.fetch('orders', 'billing'), 'group_not_found');
      expect(error).toBeInstanceOf(Error);
      expect(error).toBeInstanceOf(RheoError);
      expect(error.name).toBe('RheoError');
      expect(error.stream).toBe('orders');
      expect(error.group).toBe('billing');
      expect(error.message).toContain('orders');
      expect(error.message).toContain('billing');
    });

    it('stale_lease carries the stream and group', async () => {
      const { rheo } = fx();
      await rheo.createStream('orders');
      await rheo.createGroup('orders', 'billing');
      await appendN(rheo, 'orders', 1);
      const [lease] = await rheo.fetch('orders', 'billing');
      await rheo.ack(lease!);
      const error = await expectCode(rheo.ack(lease!), 'stale_lease');
      expect([error.stream, error.group]).toEqual(['orders', 'billing']);
    });

    it('calls on a closed instance fail with code closed, and close is idempotent', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.close();
      await rheo.close();
      expect(rheo.closed).toBe(true);
      await expectCode(rheo.append('s', { payload: 1 }), 'closed');
      await expectCode(rheo.listStreams(), 'closed');
    });
  });
}
