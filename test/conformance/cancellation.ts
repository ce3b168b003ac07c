import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import type { Rheo } from '../../src/rheo.js';
import { appendN, expectCode, pos, readAll, useFixture, type BackendFactory } from './fixture.js';

/** Every facade call shape, each given `{ signal }` in its last options argument. */
type Shape = [name: string, call: (rheo: Rheo, signal: AbortSignal, lease: Lease) => Promise<unknown>];

const SHAPES: Shape[] = [
  ['migrate', (r, signal) => r.migrate({ signal })],
  ['ping', (r, signal) => r.ping({ signal })],
  ['createStream', (r, signal) => r.createStream('other', { partitions: 2, signal })],
  ['listStreams', (r, signal) => r.listStreams({ signal })],
  ['createGroup', (r, signal) => r.createGroup('s', 'other', { signal })],
  ['listGroups', (r, signal) => r.listGroups('s', { signal })],
  ['groupInfo', (r, signal) => r.groupInfo('s', 'g', { signal })],
  ['append', (r, signal) => r.append('s', { payload: 'x' }, { signal })],
  ['appendBatch', (r, signal) => r.appendBatch('s', [{ payload: 'x' }, { payload: 'y' }], { signal })],
  ['read', (r, signal) => r.read('s', { signal })],
  ['query', (r, signal) => r.query('s', { signal })],
  [
    'queryAll',
    async (r, signal) => {
      for await (const event of r.queryAll('s', { signal })) void event;
    },
  ],
  ['fetch', (r, signal) => r.fetch('s', 'g', { limit: 10, signal })],
  ['renew', (r, signal, lease) => r.renew(lease, { leaseMs: 90_000, signal })],
  ['renewMany', (r, signal, lease) => r.renewMany([lease], { leaseMs: 90_000, signal })],
  ['ack', (r, signal, lease) => r.ack(lease, { signal })],
  ['nack', (r, signal, lease) => r.nack(lease, 'later', { delayMs: 10, signal })],
  ['reject', (r, signal, lease) => r.reject(lease, 'bad', { signal })],
  ['release', (r, signal, lease) => r.release(lease, { signal })],
  ['ackMany', (r, signal, lease) => r.ackMany([lease], { signal })],
  ['nackMany', (r, signal, lease) => r.nackMany([lease], 'later', { signal })],
  ['rejectMany', (r, signal, lease) => r.rejectMany([lease], 'bad', { signal })],
  ['releaseMany', (r, signal, lease) => r.releaseMany([lease], { signal })],
  ['settleMany', (r, signal, lease) => r.settleMany([{ kind: 'ack', lease }], { signal })],
  ['lag', (r, signal) => r.lag('s', 'g', { signal })],
  ['replay', (r, signal) => r.replay('s', 'g', { fromSequence: 1 }, { signal })],
  ['replay by query', (r, signal) => r.replay('s', 'g', { query: { type: 't' } }, { signal })],
  ['resetGroup', (r, signal) => r.resetGroup('s', 'g', { confirm: true, signal })],
  ['deadLetters', (r, signal) => r.deadLetters('s', 'g', { signal })],
  ['redrive', (r, signal) => r.redrive('s', 'g', { signal })],
];

/** Everything any call above could change. */
async function everything(rheo: Rheo, backend: { storageStats(s: string, g: string): Promise<unknown> }): Promise<unknown> {
  return {
    streams: await rheo.listStreams(),
    groups: await rheo.listGroups('s'),
    info: await rheo.groupInfo('s', 'g'),
    storage: await backend.storageStats('s', 'g'),
    events: (await readAll(rheo, 's')).map(pos),
    dead: (await rheo.deadLetters('s', 'g')).map((d) => pos(d.event)),
  };
}

export function registerCancellationTests(makeBackend: BackendFactory): void {
  describe('cancellation', () => {
    const fx = useFixture(makeBackend);

    /** Stream `s` with three events (one acked, one dead, one leased by the returned lease). */
    async function scene(): Promise<Lease> {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3, { type: 't' });
      const [acked, dead, held] = await rheo.fetch('s', 'g', { limit: 3, leaseMs: 60_000 });
      await rheo.ack(acked!);
      await rheo.reject(dead!, 'bad');
      return held!;
    }

    it.each(SHAPES)('%s with an aborted signal rejects with its reason and sends nothing', async (_name, call) => {
      const { rheo, backend } = fx();
      const lease = await scene();
      const before = await everything(rheo, backend);
      const reason = new Error('caller gave up');
      await expect(call(rheo, AbortSignal.abort(reason), lease)).rejects.toBe(reason);
      expect(await everything(rheo, backend)).toEqual(before);
      // The lease was not renewed, settled or released: it still settles under its id.
      await rheo.ack(lease);
    });

    it('an abort without a reason rejects with an AbortError', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const controller = new AbortController();
      controller.abort();
      await expect(rheo.append('s', { payload: 1 }, { signal: controller.signal })).rejects.toMatchObject({ name: 'AbortError' });
      expect(await rheo.read('s')).toEqual([]);
    });

    it('a call that finished is not affected by a later abort or by its timeout', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const controller = new AbortController();
      const event = await rheo.append('s', { payload: 1 }, { signal: controller.signal, timeoutMs: 60_000 });
      controller.abort(new Error('too late'));
      expect((await rheo.read('s')).map((e) => e.id)).toEqual([event.id]);
    });

    it('refuses a signal that is not an AbortSignal and a bad timeoutMs, sending nothing', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      const bad = [{ signal: 'stop' }, { signal: null }, { timeoutMs: 0 }, { timeoutMs: 1.5 }, { timeoutMs: 2 ** 31 }, { timeoutMs: '5' }];
      for (const options of bad) {
        await expectCode(rheo.append('s', { payload: 1 }, options as never), 'invalid_argument');
        await expectCode(rheo.read('s', options as never), 'invalid_argument');
        await expectCode(rheo.listStreams(options as never), 'invalid_argument');
      }
      await expectCode(rheo.append('s', { payload: 1 }, 'fast' as never), 'invalid_argument');
      expect(await rheo.read('s')).toEqual([]);
    });

    it('queryAll: an abort between pages ends the iteration with the reason before the next page is read', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await appendN(rheo, 's', 5);
      const controller = new AbortController();
      const seen: number[] = [];
      const reason = new Error('enough');
      const iterate = async (): Promise<void> => {
        for await (const event of rheo.queryAll('s', { limit: 2, signal: controller.signal })) {
          seen.push(event.sequence);
          if (seen.length === 2) controller.abort(reason);
        }
      };
      await expect(iterate()).rejects.toBe(reason);
      expect(seen).toEqual([1, 2]);
    });
  });
}
