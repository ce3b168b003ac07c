import type { Transform } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import { createKeyOrderedTransform } from '../../src/transforms/key-ordered-transform.js';
import { createMapTransform } from '../../src/transforms/map-transform.js';
import { deferred, settleQueued } from '../support/deferred.js';
import { fakeLease } from '../support/fake-settler.js';
import { thrown } from '../support/thrown.js';

type Tick = { n: number };
type MapFn = (lease: Lease<Tick>, context: { signal: AbortSignal }) => unknown;

/** What the map and key-ordered transforms share: their options, a throw without a producer, and the signal of a destroy. */
const stages: Array<{ name: string; create: (options: Record<string, unknown>) => Transform & { concurrency: number }; destroyed: string }> = [
  { name: 'createMapTransform', create: (options) => createMapTransform(options as never), destroyed: 'map transform destroyed' },
  { name: 'createKeyOrderedTransform', create: (options) => createKeyOrderedTransform(options as never), destroyed: 'key-ordered transform destroyed' },
];

for (const { name, create, destroyed } of stages) {
  describe(`${name}: what the mapping stages share`, () => {
    it('refuses options without a map function, an unknown key, a bad failure policy and a concurrency out of 1..10000', () => {
      const map: MapFn = () => 1;
      // A function is not an options object, even one that carries a `map`.
      const fn = Object.assign(() => 1, { map });
      for (const options of [null, 3, {}, { map: 'x' }, fn]) {
        const error = thrown(() => create(options as never));
        expect(error.code).toBe('invalid_argument');
        expect(error.message).toMatch(new RegExp(`^${name} expects`));
      }
      for (const concurrency of [0, 10_001, 1.5]) expect(thrown(() => create({ map, concurrency })).code).toBe('invalid_argument');
      expect(thrown(() => create({ map, concurrency: 0 })).message).toMatch(/^concurrency must be an integer/);
      expect(thrown(() => create({ map, onFailure: 'drop' })).message).toMatch(new RegExp(`^${name}: onFailure must be`));
      expect(thrown(() => create({ map, concurency: 2 })).message).toMatch(new RegExp(`^${name} options: unknown option "concurency"`));
      expect(create({ map }).concurrency).toBe(1);
      expect(create({ map, concurrency: 10_000 }).concurrency).toBe(10_000);
    });

    it('without a producer, a throw fails the stream with the error thrown and nothing is emitted after it', async () => {
      const boom = new Error('bad payload');
      const map: MapFn = (lease) => {
        if (lease.event.sequence === 1) throw boom;
        return 2;
      };
      const stage = create({ map, concurrency: 2 });
      const out: unknown[] = [];
      const handlerErrors: unknown[] = [];
      stage.on('data', (m) => out.push(m));
      stage.on('handler-error', (info) => handlerErrors.push(info));
      const failed = new Promise((resolve) => stage.on('error', resolve));
      stage.write(fakeLease(1));
      stage.write(fakeLease(2));
      expect(await failed).toBe(boom);
      expect(out).toEqual([]);
      expect(handlerErrors).toEqual([]);
    });

    it('without a producer, a thrown non-error fails the stream as an Error', async () => {
      const map: MapFn = () => {
        throw 'not an error object';
      };
      const stage = create({ map });
      const failed = new Promise<unknown>((resolve) => stage.on('error', resolve));
      stage.write(fakeLease(1));
      const error = await failed;
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toBe('not an error object');
    });

    it('a destroy aborts the signal of the maps in flight, with the error or its own', async () => {
      const signals: AbortSignal[] = [];
      const map: MapFn = (_lease, { signal }) => {
        signals.push(signal);
        return deferred().promise;
      };
      const plain = create({ map });
      plain.write(fakeLease(1));
      await settleQueued();
      plain.destroy();
      expect(signals[0]!.aborted).toBe(true);
      expect((signals[0]!.reason as Error).message).toBe(destroyed);

      const other = create({ map });
      other.on('error', () => undefined);
      other.write(fakeLease(2));
      await settleQueued();
      const boom = new Error('downstream gone');
      other.destroy(boom);
      expect(signals[1]!.reason).toBe(boom);
    });
  });
}
