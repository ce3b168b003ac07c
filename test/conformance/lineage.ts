import { describe, expect, it } from 'vitest';
import type { AppendInput } from '../../src/core/types.js';
import { createRheo } from '../../src/rheo.js';
import { expectCode, readAll, stored, useFixture, type BackendFactory } from './fixture.js';

export function registerLineageTests(makeBackend: BackendFactory): void {
  describe('lineage: correlation and causation ids', () => {
    const fx = useFixture(makeBackend);

    it('causedBy sets causationId to the cause and carries the correlation from the root on', async () => {
      const { rheo } = fx();
      await rheo.createStream('flow', { partitions: 2 });
      const root = stored(await rheo.append('flow', { type: 'order.placed', payload: 1, metadata: { source: 'web' } }));
      expect(root.metadata).toEqual({ source: 'web' });
      const child = stored(await rheo.append('flow', { type: 'payment.taken', payload: 2, causedBy: root, metadata: { step: 2 } }));
      expect(child.metadata).toEqual({ correlationId: root.id, causationId: root.id, step: 2 });
      const grandchild = stored(await rheo.append('flow', { payload: 3, key: 'k', causedBy: child }));
      expect(grandchild.metadata).toEqual({ correlationId: root.id, causationId: child.id });
      // The stored events read back with the same metadata.
      expect(await readAll(rheo, 'flow')).toEqual(expect.arrayContaining([root, child, grandchild]));
    });

    it('causedBy accepts a bare { id, metadata } and an id alone', async () => {
      const { rheo } = fx();
      await rheo.createStream('flow');
      const a = await rheo.append('flow', { payload: 1, causedBy: { id: 'cmd-1', metadata: { correlationId: 'req-9' } } });
      expect(a.metadata).toEqual({ correlationId: 'req-9', causationId: 'cmd-1' });
      const b = await rheo.append('flow', { payload: 2, causedBy: { id: 'cmd-2' } });
      expect(b.metadata).toEqual({ correlationId: 'cmd-2', causationId: 'cmd-2' });
    });

    it('explicit correlationId/causationId win over metadata keys, which win over what causedBy derives', async () => {
      const { rheo } = fx();
      await rheo.createStream('flow');
      const cause = { id: 'c1', metadata: { correlationId: 'from-cause' } };
      const fromMetadata = await rheo.append('flow', { payload: 1, causedBy: cause, metadata: { correlationId: 'from-metadata' } });
      expect(fromMetadata.metadata).toEqual({ correlationId: 'from-metadata', causationId: 'c1' });
      const explicit = await rheo.append('flow', {
        payload: 2,
        causedBy: cause,
        correlationId: 'explicit',
        causationId: 'explicit-cause',
        metadata: { correlationId: 'from-metadata', other: true },
      });
      expect(explicit.metadata).toEqual({ correlationId: 'explicit', causationId: 'explicit-cause', other: true });
      const plain = await rheo.append('flow', { payload: 3, correlationId: 'only' });
      expect(plain.metadata).toEqual({ correlationId: 'only' });
    });

    it('a bad lineage id is invalid_argument and writes nothing, in append and appendBatch alike', async () => {
      const { rheo } = fx();
      await rheo.createStream('flow');
      const bad: unknown[] = ['', '\u0000x', 'a\ud800b', 'x'.repeat(201), 42, null, {}];
      const inputs: AppendInput[] = [];
      for (const id of bad) {
        inputs.push({ payload: 1, correlationId: id as string });
        inputs.push({ payload: 1, causationId: id as string });
        inputs.push({ payload: 1, metadata: { correlationId: id as string } });
        inputs.push({ payload: 1, metadata: { causationId: id as string } });
        inputs.push({ payload: 1, causedBy: { id: id as string } });
        if (id !== null) inputs.push({ payload: 1, causedBy: { id: 'ok', metadata: { correlationId: id as string } } });
      }
      inputs.push({ payload: 1, causedBy: 'evt-1' as never });
      inputs.push({ payload: 1, causedBy: { id: 'ok', metadata: 'nope' } as never });
      for (const input of inputs) {
        await expectCode(rheo.append('flow', input), 'invalid_argument');
        await expectCode(rheo.appendBatch('flow', [{ payload: 'good' }, input]), 'invalid_argument');
      }
      expect(await readAll(rheo, 'flow')).toEqual([]);
    });

    it('lineage keys count toward the event size limit', async () => {
      const { rheo } = fx();
      await rheo.createStream('flow');
      // {"correlationId":"<id>"} is 20 bytes plus the id: with a 1-byte payload the event is exactly at the limit.
      const id = 'c'.repeat(200);
      const limited = createRheo({ backend: fx().backend, clock: fx().clock, limits: { maxEventBytes: 1 + 20 + 200 } });
      expect((await limited.append('flow', { payload: 1, correlationId: id })).metadata).toEqual({ correlationId: id });
      await expectCode(limited.append('flow', { payload: 12, correlationId: id }), 'event_too_large');
    });

    it('query({ correlationId }) returns one flow across partitions, combined with other filters', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('flow', { partitions: 3 });
      const root = stored(await rheo.append('flow', { type: 'start', partition: 0, payload: 0 }));
      const other = stored(await rheo.append('flow', { type: 'start', partition: 1, payload: 0 }));
      const flow = [root];
      let cause = root;
      for (let i = 1; i <= 5; i++) {
        clock.advance(1);
        cause = stored(await rheo.append('flow', { type: i % 2 ? 'step' : 'check', partition: i % 3, payload: i, causedBy: cause }));
        flow.push(cause);
        await rheo.append('flow', { type: 'step', partition: i % 3, payload: -i, causedBy: other });
      }
      // The root carries no correlationId of its own: the flow is its descendants, plus the root by id.
      const descendants = await rheo.query('flow', { correlationId: root.id });
      expect(descendants.events).toEqual(flow.slice(1));
      expect((await rheo.query('flow', { correlationId: root.id, type: 'check' })).events).toEqual(flow.filter((e) => e.type === 'check'));
      expect((await rheo.query('flow', { correlationId: root.id, where: { metadata: { causationId: flow[2]!.id } } })).events).toEqual([flow[3]]);
      expect((await rheo.query('flow', { correlationId: root.id, where: { metadata: { correlationId: root.id } } })).events).toEqual(flow.slice(1));
      expect((await rheo.query('flow', { correlationId: 'nobody' })).events).toEqual([]);
      const paged = [];
      for await (const e of rheo.queryAll('flow', { correlationId: root.id, limit: 2 })) paged.push(e);
      expect(paged).toEqual(flow.slice(1));
    });

    it('a bad or conflicting correlationId in a query is invalid_argument', async () => {
      const { rheo } = fx();
      await rheo.createStream('flow');
      for (const bad of ['', '\u0000', '\udc00', 7, null]) {
        await expectCode(rheo.query('flow', { correlationId: bad as string }), 'invalid_argument');
      }
      await expectCode(rheo.query('flow', { correlationId: 'a', where: { metadata: { correlationId: 'b' } } }), 'invalid_argument');
    });
  });
}
