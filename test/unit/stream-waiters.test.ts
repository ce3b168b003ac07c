import { spawnSync } from 'node:child_process';
import { getEventListeners } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { StreamWaiters } from '../../src/core/stream-waiters.js';

/** Settled state of a promise, without waiting for it. */
async function state(p: Promise<boolean>): Promise<boolean | 'pending'> {
  return Promise.race([p, new Promise<'pending'>((resolve) => setImmediate(() => resolve('pending')))]);
}

describe('StreamWaiters', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('wakes the waits of one stream with true and leaves the others out', async () => {
    const waiters = new StreamWaiters();
    const a1 = waiters.wait('a', 1_000);
    const a2 = waiters.wait('a', 1_000);
    const b = waiters.wait('b', 1_000);
    waiters.wake('a');
    expect(await a1).toBe(true);
    expect(await a2).toBe(true);
    expect(waiters.has('a')).toBe(false);
    expect(waiters.has('b')).toBe(true);
    expect(waiters.size).toBe(1);
    waiters.wake('b');
    expect(await b).toBe(true);
    expect(waiters.size).toBe(0);
  });

  it('serves every wait with one timer, and ends each at its own deadline', async () => {
    const waiters = new StreamWaiters();
    const late = waiters.wait('s', 1_000);
    const many = Array.from({ length: 50 }, (_, i) => waiters.wait(`s${i}`, 2_000));
    expect(vi.getTimerCount()).toBe(1);
    // An earlier deadline than the timer's: the timer moves to it.
    const early = waiters.wait('t', 100);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(await early).toBe(false);
    expect(await state(late)).toBe('pending');
    await vi.advanceTimersByTimeAsync(900);
    expect(await late).toBe(false);
    expect(await state(many[0]!)).toBe('pending');
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await Promise.all(many)).toEqual(many.map(() => false));
    expect(waiters.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a woken wait leaves the timer to the waits after it, which still end on time', async () => {
    const waiters = new StreamWaiters();
    const first = waiters.wait('s', 100);
    waiters.wake('s');
    expect(await first).toBe(true);
    const second = waiters.wait('s', 300);
    await vi.advanceTimersByTimeAsync(100);
    expect(await state(second)).toBe('pending');
    await vi.advanceTimersByTimeAsync(200);
    expect(await second).toBe(false);
  });

  it('listens once per signal, and its abort ends every wait that brought it', async () => {
    const waiters = new StreamWaiters();
    const halt = new AbortController();
    const waits = Array.from({ length: 20 }, (_, i) => waiters.wait(i % 2 === 0 ? 'a' : 'b', 1_000, halt.signal));
    const other = waiters.wait('a', 1_000);
    expect(getEventListeners(halt.signal, 'abort')).toHaveLength(1);
    waiters.wake('b');
    expect(await waits[1]!).toBe(true);
    halt.abort();
    expect(await Promise.all(waits.filter((_, i) => i % 2 === 0))).toEqual(Array.from({ length: 10 }, () => false));
    expect(await state(other)).toBe('pending');
    expect(waiters.size).toBe(1);
    expect(await waiters.wait('a', 1_000, halt.signal)).toBe(false);
  });

  it('close ends every wait with false, and later waits and wakes too', async () => {
    const waiters = new StreamWaiters();
    const a = waiters.wait('a', 1_000);
    waiters.close();
    waiters.wake('a');
    expect(await a).toBe(false);
    expect(await waiters.wait('a', 1_000)).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('wakeAll wakes every stream', async () => {
    const waiters = new StreamWaiters();
    const waits = [waiters.wait('a', 1_000), waiters.wait('b', 1_000)];
    waiters.wakeAll();
    expect(await Promise.all(waits)).toEqual([true, true]);
  });
});

describe('StreamWaiters and the process', () => {
  it('does not keep the process alive once no wait is out, though its timer is still set', () => {
    const module = fileURLToPath(new URL('../../src/core/stream-waiters.ts', import.meta.url));
    const code = `
      const { StreamWaiters } = await import(${JSON.stringify(module)});
      const waiters = new StreamWaiters();
      const wait = waiters.wait('s', 120000);
      waiters.wake('s');
      console.log(await wait);
    `;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8', timeout: 60_000 });
    expect(child.error).toBeUndefined();
    expect(child.stdout.trim()).toBe('true');
    expect(child.status).toBe(0);
  });
});
