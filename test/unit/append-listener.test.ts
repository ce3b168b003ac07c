import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { AppendListener, type AppendWaitFn } from '../../src/runtime/append-wait.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { isSettled, turns } from '../support/turns.js';

/*
 * The idle wait of the consumers' loops on its own: a scripted store wait
 * (resolved by hand, or at its timeout on the manual timers) and manual
 * time, so each wait's length and what ended it can be read exactly.
 */

const POLL_MS = 100;

class Store {
  /** Whether a wait resolves `false` at its timeout (only where a test is about that). */
  constructor(readonly timesOut = false) {}
  readonly clock = new ManualClock(1_000_000);
  readonly timers = new ManualTimers(this.clock);
  readonly timeouts: number[] = [];
  #wakes: Array<(appended: boolean) => void> = [];
  /** Resolves when woken, or at its timeout (on the manual timers) with `timesOut`. */
  readonly wait: AppendWaitFn = (_stream, timeoutMs, signal) => {
    this.timeouts.push(timeoutMs);
    return new Promise<boolean>((resolve) => {
      const timer = this.timesOut ? this.timers.schedule(timeoutMs, () => resolve(false)) : { cancel: () => undefined };
      const onAbort = (): void => resolve(false);
      signal.addEventListener('abort', onAbort, { once: true });
      this.#wakes.push((appended) => {
        timer.cancel();
        signal.removeEventListener('abort', onAbort);
        resolve(appended);
      });
    });
  };

  notify(): void {
    for (const wake of this.#wakes.splice(0)) wake(true);
  }
}

function listener(store: Store, halt = new AbortController(), maxPollMs = 8 * POLL_MS, wait: AppendWaitFn | null = store.wait): AppendListener {
  return new AppendListener(wait, 's', POLL_MS, maxPollMs, store.timers, halt.signal, () => store.clock.now());
}

/** How long `idle()` waits (advancing the manual time 1 ms at a time), at most `limit`. */
async function waited(store: Store, appends: AppendListener, limit = 10_000): Promise<number> {
  let done = false;
  void appends.idle().then(() => (done = true));
  await turns();
  let ms = 0;
  while (!done && ms < limit) {
    store.timers.advance(1);
    ms++;
    await turns();
  }
  return ms;
}

describe('AppendListener', () => {
  it('doubles the idle wait after each empty poll a timer ended, up to maxPollMs; a find starts it again', async () => {
    const store = new Store();
    const appends = listener(store);
    const waits: number[] = [];
    for (let i = 0; i < 6; i++) waits.push(await waited(store, appends));
    expect(waits).toEqual([100, 200, 400, 800, 800, 800]);
    // An append, announced: the fetch after it finds it, and the waits start at pollMs.
    void appends.idle();
    await turns();
    store.notify();
    await turns();
    appends.found();
    expect(await waited(store, appends)).toBe(100);
    expect(await waited(store, appends)).toBe(200);
  });

  it('registers the store wait for twice maxPollMs, once, and keeps it across the polls its timer outlasts', async () => {
    const store = new Store(true);
    const appends = listener(store);
    appends.listen();
    appends.listen();
    expect(store.timeouts).toEqual([1_600]);
    // 100 + 200 + 400 + 800 = 1,500 ms of idle waits on the one registered wait.
    expect([await waited(store, appends), await waited(store, appends), await waited(store, appends), await waited(store, appends)]).toEqual([
      100, 200, 400, 800,
    ]);
    expect(store.timeouts).toEqual([1_600]);
    // Its timeout (at 1,600 ms) ends the next wait after 100 ms, and a fresh one is registered.
    expect(await waited(store, appends)).toBe(100);
    appends.listen();
    expect(store.timeouts).toEqual([1_600, 1_600]);
  });

  it('a notification ends the wait at once and starts the next at pollMs', async () => {
    const store = new Store();
    const appends = listener(store);
    await waited(store, appends);
    await waited(store, appends);
    const idle = appends.idle();
    await turns();
    store.notify();
    expect(await isSettled(idle)).toBe(true);
    expect(await waited(store, appends)).toBe(100);
    expect(await waited(store, appends)).toBe(200);
  });

  it('a find after a timer-ended wait keeps the waits at pollMs until a notification', async () => {
    const store = new Store();
    const appends = listener(store);
    await waited(store, appends);
    appends.found();
    expect([await waited(store, appends), await waited(store, appends), await waited(store, appends)]).toEqual([100, 100, 100]);
    // After a wait a notification ended, a find is announced: trusted again.
    void appends.idle();
    await turns();
    store.notify();
    await turns();
    appends.found();
    expect([await waited(store, appends), await waited(store, appends)]).toEqual([100, 200]);
  });

  it('a notification that lands while the fetch after a timer-ended wait is out ends the next wait at once, trusted again', async () => {
    const store = new Store();
    const appends = listener(store);
    expect(await waited(store, appends)).toBe(100);
    // The poll's fetch is out; an append is notified meanwhile, and the fetch finds it.
    store.notify();
    await turns();
    appends.found();
    expect(await waited(store, appends)).toBe(0);
    expect([await waited(store, appends), await waited(store, appends)]).toEqual([100, 200]);
  });

  it('a failed store wait leaves the wait to its timer', async () => {
    const store = new Store();
    const appends = listener(store, new AbortController(), 8 * POLL_MS, () => Promise.reject(new Error('connection lost')));
    expect(await waited(store, appends)).toBe(100);
    expect(await waited(store, appends)).toBe(200);
  });

  it('without notifications every wait is pollMs', async () => {
    const store = new Store();
    const appends = listener(store, new AbortController(), 8 * POLL_MS, null);
    expect([await waited(store, appends), await waited(store, appends), await waited(store, appends)]).toEqual([100, 100, 100]);
  });

  it('an expected time bounds the waits, the earliest first; once it came, a find is no surprise', async () => {
    const store = new Store();
    const appends = listener(store);
    expect([await waited(store, appends), await waited(store, appends), await waited(store, appends)]).toEqual([100, 200, 400]);
    const now = store.clock.now();
    appends.expect(now + 2_000);
    appends.expect(now + 500);
    // 800 would be next: the expected time at 500 comes first.
    expect(await waited(store, appends)).toBe(500);
    // What came due was found: still trusted, so the waits back off from pollMs.
    appends.found();
    expect([await waited(store, appends), await waited(store, appends), await waited(store, appends)]).toEqual([100, 200, 400]);
    // 700 ms in of the 1,500 left: the next expected time cuts the 800.
    expect(await waited(store, appends)).toBe(800);
    expect(await waited(store, appends)).toBe(100);
  });

  it('an expected time exactly at the wait ends it as expected, not as a surprise', async () => {
    const store = new Store();
    const appends = listener(store);
    appends.expect(store.clock.now() + POLL_MS);
    expect(await waited(store, appends)).toBe(100);
    appends.found();
    expect([await waited(store, appends), await waited(store, appends)]).toEqual([100, 200]);
  });

  it('an expected time that passed with nothing found puts the next wait back at pollMs', async () => {
    const store = new Store();
    const appends = listener(store);
    expect([await waited(store, appends), await waited(store, appends)]).toEqual([100, 200]);
    appends.expect(store.clock.now() + 50);
    expect(await waited(store, appends)).toBe(50);
    expect([await waited(store, appends), await waited(store, appends)]).toEqual([100, 200]);
  });

  it('keeps at most 1,000 expected times', async () => {
    const store = new Store();
    const appends = listener(store);
    const now = store.clock.now();
    for (let i = 0; i < 1_000; i++) appends.expect(now + 1_000_000 + i);
    appends.expect(now + 30);
    expect(await waited(store, appends)).toBe(100);
  });

  it('resolves at once when halted, with one listener of its own on the halt signal however many idle waits it ran', async () => {
    const store = new Store();
    const halt = new AbortController();
    const appends = listener(store, halt);
    expect(getEventListeners(halt.signal, 'abort')).toHaveLength(1);
    for (let i = 0; i < 3; i++) await waited(store, appends);
    expect(getEventListeners(halt.signal, 'abort')).toHaveLength(2); // its own, and the store wait still out
    const idle = appends.idle();
    await turns();
    halt.abort();
    expect(await isSettled(idle)).toBe(true);
    expect(await isSettled(appends.idle())).toBe(true);
  });

  describe('idleFetch (a store that waits for the append itself)', () => {
    /** A blocking store: records each wait's length and answers as told. */
    function blocking(answers: Array<{ found: string; appended: boolean } | null>) {
      const asked: number[] = [];
      const block = (ms: number): Promise<{ found: string; appended: boolean } | null> => {
        asked.push(ms);
        return Promise.resolve(answers.shift() ?? null);
      };
      return { asked, block };
    }

    it('gives the store the length of the idle wait, backing off while its waits end empty, from pollMs again after an append', async () => {
      const store = new Store();
      const appends = listener(store);
      const { asked, block } = blocking([
        { found: '', appended: false },
        { found: '', appended: false },
        { found: '', appended: false },
        { found: 'e1', appended: true },
        { found: '', appended: false },
      ]);
      const found: Array<string | null> = [];
      for (let i = 0; i < 5; i++) {
        const got = await appends.idleFetch(block);
        found.push(got);
        if (got) appends.found();
      }
      expect(asked).toEqual([100, 200, 400, 800, 100]);
      expect(found).toEqual(['', '', '', 'e1', '']);
      // Neither the store's own wait nor a timer was used.
      expect(store.timeouts).toEqual([]);
    });

    it('a find at the timeout of a wait (no append announced it) keeps the next waits at pollMs', async () => {
      const store = new Store();
      const appends = listener(store);
      const { asked, block } = blocking([
        { found: '', appended: false },
        { found: 'retry', appended: false },
        { found: '', appended: false },
        { found: '', appended: false },
      ]);
      for (let i = 0; i < 4; i++) if (await appends.idleFetch(block)) appends.found();
      expect(asked).toEqual([100, 200, 100, 100]);
    });

    it('an expected time cuts the wait it gives the store, and ending there is no surprise', async () => {
      const store = new Store();
      const appends = listener(store);
      const { asked, block } = blocking([
        { found: '', appended: false },
        { found: 'due', appended: false },
        { found: '', appended: false },
      ]);
      await appends.idleFetch(block);
      appends.expect(store.clock.now() + 150);
      if (await appends.idleFetch(block)) appends.found();
      await appends.idleFetch(block);
      expect(asked).toEqual([100, 150, 100]);
    });

    it('when the store cannot wait, waits the usual idle wait on its timers and resolves null', async () => {
      const store = new Store();
      const appends = listener(store);
      const { asked, block } = blocking([null]);
      let got: string | null | undefined;
      void appends.idleFetch(block).then((r) => (got = r));
      await turns();
      expect(asked).toEqual([100]);
      // The store's wait is registered, and the wait runs on the timers.
      expect(store.timeouts).toEqual([1_600]);
      store.timers.advance(99);
      await turns();
      expect(got).toBeUndefined();
      store.timers.advance(1);
      await turns();
      expect(got).toBeNull();
      // That wait ended by its timer: the next one is longer.
      expect(await waited(store, appends)).toBe(200);
    });

    it('does not ask the store once halted, and a wait the halt ended leaves the pace as it was', async () => {
      const store = new Store();
      const halt = new AbortController();
      const appends = listener(store, halt);
      await appends.idleFetch(blocking([{ found: '', appended: false }]).block);
      const ended = blocking([]);
      const inFlight = appends.idleFetch(async (ms, signal) => {
        ended.asked.push(ms);
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        return { found: 'given back', appended: false };
      });
      await turns();
      halt.abort();
      expect(await inFlight).toBe('given back');
      expect(ended.asked).toEqual([200]);
      const after = blocking([{ found: '', appended: false }]);
      expect(await appends.idleFetch(after.block)).toBeNull();
      expect(after.asked).toEqual([]);
    });
  });
});
