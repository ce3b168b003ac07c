import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { memoryBackend } from '../../src/backends/memory/memory-backend.js';
import { ManualClock } from '../../src/core/clock.js';
import type { Backend } from '../../src/core/backend.js';
import { createRheo, type Rheo } from '../../src/rheo.js';

/*
 * What only the memory backend has: its in-process append wakeups
 * (`waitForAppend`, which the producers use instead of polling) and its own
 * closed state. The conformance suite covers the rest through the facade.
 */

async function withStream(): Promise<{ backend: Backend; rheo: Rheo }> {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const rheo = createRheo({ backend: memoryBackend({ clock }), clock });
  await rheo.createStream('s');
  return { backend: rheo.backend, rheo };
}

describe('memory backend', () => {
  it('declares itself in-process: not durable, not distributed, with notifications', () => {
    expect(memoryBackend().capabilities).toMatchObject({ durable: false, distributed: false, notifications: true, transactions: false });
  });

  it('waitForAppend resolves true on an append to its stream, false on timeout, abort, or an unknown stream', async () => {
    const { backend, rheo } = await withStream();
    const append = (): Promise<unknown> => rheo.append('s', { payload: 1 });
    const woken = backend.waitForAppend!('s', 3_600_000);
    await append();
    await expect(woken).resolves.toBe(true);
    await expect(backend.waitForAppend!('s', 1)).resolves.toBe(false);
    await expect(backend.waitForAppend!('nope', 3_600_000)).resolves.toBe(false);

    const stop = new AbortController();
    const aborted = backend.waitForAppend!('s', 3_600_000, stop.signal);
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(1);
    stop.abort();
    await expect(aborted).resolves.toBe(false);
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
    await expect(backend.waitForAppend!('s', 3_600_000, stop.signal)).resolves.toBe(false);

    // Waits that bring one signal share one listener on it: however many came and went, one is left.
    const later = new AbortController();
    for (let i = 0; i < 5; i++) {
      const next = backend.waitForAppend!('s', 3_600_000, later.signal);
      await append();
      await expect(next).resolves.toBe(true);
    }
    expect(getEventListeners(later.signal, 'abort')).toHaveLength(1);
    const last = backend.waitForAppend!('s', 3_600_000, later.signal);
    later.abort();
    await expect(last).resolves.toBe(false);
  });

  it('deleting the stream wakes its waiters; close answers false to them and refuses every later call as closed', async () => {
    const { backend } = await withStream();
    const onDelete = backend.waitForAppend!('s', 3_600_000);
    await backend.deleteStream!('s');
    await expect(onDelete).resolves.toBe(true);

    const { backend: open } = await withStream();
    const pending = open.waitForAppend!('s', 1);
    await open.close();
    await open.close(); // idempotent
    await expect(pending).resolves.toBe(false);
    await expect(open.waitForAppend!('s', 3_600_000)).resolves.toBe(false);
    await expect(open.listStreams()).rejects.toMatchObject({ code: 'closed', message: 'the memory backend is closed' });
    await expect(open.migrate()).rejects.toMatchObject({ code: 'closed' });
  });

  it('an append whose every event already existed wakes no waiter', async () => {
    const { backend, rheo } = await withStream();
    await rheo.append('s', { id: 'e1', payload: 1 });
    const waiting = backend.waitForAppend!('s', 20); // the timeout is what is under test
    const again = await rheo.append('s', { id: 'e1', payload: 1 });
    expect(again.existed).toBe(true);
    await expect(waiting).resolves.toBe(false);
  });

  it('a settle or renewal of a lease whose group, partition or delivery is gone is stale_lease, naming the delivery', async () => {
    const { backend, rheo } = await withStream();
    await rheo.createGroup('s', 'g');
    await rheo.append('s', { payload: 1 });
    const [lease] = await rheo.fetch('s', 'g');
    const ref = { stream: 's', group: 'g', partition: 0, sequence: 1, leaseId: lease!.leaseId };
    const strays = [
      { ...ref, stream: 'nope' },
      { ...ref, group: 'nope' },
      { ...ref, partition: 3 },
      { ...ref, sequence: 9 },
      { ...ref, leaseId: 'someone-else' },
    ];
    const settled = await backend.settle(strays.map((r) => ({ ...r, kind: 'ack' as const })));
    const renewed = await backend.renew(strays, 1000);
    for (const [i, result] of [...settled, ...renewed].entries()) {
      const r = strays[i % strays.length]!;
      expect(result).toMatchObject({
        ok: false,
        error: { code: 'stale_lease', message: expect.stringContaining(`delivery ${r.partition}/${r.sequence} is not leased under this lease id`) },
      });
    }
    // The real lease is untouched.
    expect(await backend.settle([{ ...ref, kind: 'ack' }])).toEqual([{ ok: true }]);
  });
});
