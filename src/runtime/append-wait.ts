import type { FetchRequest } from '../core/backend.js';
import type { JsonValue, Lease } from '../core/types.js';
import { optionalInteger } from '../core/validation.js';
import type { LeaseSource } from './sources.js';
import type { Timers } from './timers.js';

/**
 * The reason for aborting the loops' own waits. Without a reason, `abort()`
 * builds a DOMException with a stack trace, once or twice per fetch: about
 * 1% of a fast pipeline's time in profiles.
 */
export const CANCELLED = new Error('rheo wait cancelled');

/**
 * Never settles: the wake-up of a store without notifications, and what a
 * failed notification wait turns into. A fresh one each time: a shared one
 * would keep every waiter's reaction.
 */
function never(): Promise<boolean> {
  return new Promise<boolean>(() => undefined);
}

/** The store's `waitForAppend`, bound: resolves `true` on an append, `false` at the timeout or on abort. */
export type AppendWaitFn = (stream: string, timeoutMs: number, signal: AbortSignal) => Promise<boolean>;

/** At most this many `expect` times are kept (AppendListener). */
const MAX_EXPECTED = 1_000;

/**
 * One registered wait for an append, for a loop that lives as long as
 * `halt`: `listen()` with each fetch or read that may come back empty, right
 * after issuing it and in the same turn (a notification that arrives while it
 * is on its way must still find a waiter; it is read only after that turn),
 * `idle()` after one that did, `found()` after one that did not. A wait
 * still out when a fetch came back full serves the next idle wait.
 * It registers the store's wait on the loop's long-lived signal, so a wake
 * costs no fresh AbortController: two per wake put 0.05-0.15 ms between the
 * notification and the next fetch (traced, PostgreSQL and Redis).
 *
 * Idle polls back off while notifications are trusted. Each empty poll that
 * a timer ended (no notification came) doubles the next wait, from `pollMs`
 * up to `maxPollMs`; a notification, or anything found, starts it at
 * `pollMs` again. Polls are what an idle consumer costs: five a second at
 * the default `pollMs` used about as much of a core as the whole rest of an
 * idle process (docs/performance.md). What a poll finds without a
 * notification announcing it (an appender whose backend does not notify, a
 * notification connection down, a nacked delivery whose delay ran out, an
 * expired or released lease of another consumer) withdraws the trust: the
 * wait stays at `pollMs` until a notification arrives. `expect(at)` bounds
 * the next waits by a time the loop knows something becomes claimable (its
 * own delayed nacks). Without notifications the wait is `pollMs`, as before.
 */
export class AppendListener {
  readonly #wait: AppendWaitFn | null;
  readonly #stream: string;
  readonly #pollMs: number;
  readonly #maxPollMs: number;
  readonly #waitMs: number;
  readonly #timers: Timers;
  readonly #halt: AbortSignal;
  readonly #now: () => number;
  #listening: Promise<boolean> | null = null;
  /** The next idle wait while trusted. */
  #idleMs: number;
  /** Whether what becomes claimable is announced (see the class comment). */
  #trusted = true;
  /** How the last idle wait ended: by a notification, by its timer, or neither (an expected time, a halt, or something found since). */
  #ended: 'woken' | 'timer' | null = null;
  /** Times the loop expects something to become claimable at (`expect`), not yet passed. */
  #expected: number[] = [];
  /** Ends the idle wait under way, if any, on `halt` (one listener for the loop's life, not one per idle wait). */
  #onHalt: (() => void) | null = null;

  /**
   * `wait`: `null` without notifications (then `idle` is the poll alone);
   * `maxPollMs`: the longest idle wait while notifications are trusted;
   * `now`: the clock `expect` times are read on.
   */
  constructor(
    wait: AppendWaitFn | null,
    stream: string,
    pollMs: number,
    maxPollMs: number,
    timers: Timers,
    halt: AbortSignal,
    now: () => number = Date.now,
  ) {
    this.#wait = wait;
    this.#stream = stream;
    this.#pollMs = pollMs;
    this.#maxPollMs = Math.max(pollMs, maxPollMs);
    // The store's wait outlasts the longest idle wait and the fetch before it; the idle timer bounds it anyway.
    this.#waitMs = 2 * this.#maxPollMs;
    this.#idleMs = pollMs;
    this.#timers = timers;
    this.#halt = halt;
    this.#now = now;
    halt.addEventListener('abort', () => this.#onHalt?.(), { once: true });
  }

  /** Registers the store's wait unless one is out (or ended unseen by an idle wait). A failed wait leaves the rest to the poll timer. */
  listen(): void {
    if (this.#listening !== null || this.#wait === null) return;
    this.#listening = this.#wait(this.#stream, this.#waitMs, this.#halt).catch(() => never());
  }

  /** Something becomes claimable at `at` (on the `now` clock) without a notification: no idle wait runs past it. */
  expect(at: number): void {
    // Bounded: past it, further times are left to the polls (and a find they make withdraws the trust).
    if (this.#expected.length < MAX_EXPECTED) this.#expected.push(at);
  }

  /** The last fetch or read found something: the next idle wait starts at `pollMs`. */
  found(): void {
    // Found after a wait no notification ended: appends (or retries) are not all announced.
    if (this.#ended === 'timer') this.#trusted = false;
    this.#ended = null;
    this.#idleMs = this.#pollMs;
  }

  /** Waits the idle wait (see the class comment), or less when the registered wait ends (an append, or its own timeout) or `halt` aborts. */
  idle(): Promise<void> {
    this.listen();
    if (this.#halt.aborted) return Promise.resolve();
    return this.#idleFor(this.#nextWait());
  }

  /**
   * The idle wait and the fetch after it in one step, when the store can wait
   * inside itself (`block`, given the wait's length and `halt`): resolves
   * what that fetch found. When the store cannot (`block` resolves `null`),
   * waits the idle wait as `idle()` does and resolves `null`: the caller then
   * fetches. Either way the wait's length and what ended it count as
   * `idle()`'s do (an append, its timer, or neither).
   */
  async idleFetch<R>(block: (ms: number, signal: AbortSignal) => Promise<{ found: R; appended: boolean } | null>): Promise<R | null> {
    if (this.#halt.aborted) return null;
    const wait = this.#nextWait();
    const got = await block(wait.ms, this.#halt);
    if (got === null) {
      this.listen();
      await this.#idleFor(wait);
      return null;
    }
    this.#end(got.appended ? 'woken' : wait.expected || this.#halt.aborted ? null : 'timer');
    return got.found;
  }

  /** The next idle wait's length, and whether a time given to `expect` cut it (see the class comment). */
  #nextWait(): { ms: number; expected: boolean } {
    let ms = this.#pollMs;
    if (this.#wait !== null && this.#trusted) {
      // Another empty poll that no notification ended: wait longer.
      if (this.#ended === 'timer') this.#idleMs = Math.min(this.#idleMs * 2, this.#maxPollMs);
      ms = this.#idleMs;
    }
    let expected = false;
    if (this.#expected.length > 0) {
      const now = this.#now();
      const before = this.#expected.length;
      this.#expected = this.#expected.filter((at) => at > now);
      // One came due and the fetch just before found nothing yet: poll at the base pace around it.
      if (this.#expected.length < before) {
        this.#idleMs = this.#pollMs;
        ms = Math.min(ms, this.#pollMs);
      }
      const left = Math.min(...this.#expected) - now;
      if (left <= ms) {
        ms = left;
        expected = true;
      }
    }
    return { ms, expected };
  }

  /** How an idle wait ended: `null` for a halt or an expected time (neither says whether appends are announced). */
  #end(how: 'woken' | 'timer' | null): void {
    if (how === 'woken') {
      this.#trusted = true;
      this.#idleMs = this.#pollMs;
    }
    this.#ended = how;
  }

  #idleFor({ ms, expected }: { ms: number; expected: boolean }): Promise<void> {
    // The store's wait stays registered when this idle wait ends by its timer:
    // it serves the next one (a fresh wait per poll would pile up, each with a
    // listener on `halt`, for as long as the store's wait lasts).
    const woken = this.#listening;
    return new Promise<void>((resolve) => {
      let settled = false;
      const done = (how: 'woken' | 'timer' | null): void => {
        settled = true;
        timer.cancel();
        this.#onHalt = null;
        this.#end(how);
        resolve();
      };
      const timer = this.#timers.schedule(ms, () => done(expected ? null : 'timer'));
      this.#onHalt = () => done(null);
      void woken?.then((appended) => {
        // Ended already (its timer, a halt): the store's wait ending is left to the next idle wait, which sees it at once.
        if (settled) return;
        this.#listening = null;
        done(appended ? 'woken' : 'timer');
      });
    });
  }
}

/**
 * The competing loops' idle wait and the claim after it (the consumer's and
 * the producer's). With `blocking` (capability `blockingFetch`, and the
 * system's timers: a blocking wait is timed by the store, not by timers of
 * the caller's), the store gets the claim before the append lands and runs
 * it as the append does. `null` when the usual idle wait ran instead; the
 * caller claims then, with the room it has by then.
 */
export function idleClaim<T extends JsonValue>(
  appends: AppendListener,
  source: Pick<LeaseSource, 'claimAfterAppend'>,
  blocking: boolean,
  stream: string,
  group: string,
  request: FetchRequest,
): Promise<Lease<T>[] | null> {
  if (!blocking) return appends.idle().then(() => null);
  return appends.idleFetch(async (ms, signal) => {
    const got = await source.claimAfterAppend<T>(stream, group, request, ms, signal);
    return got && { found: got.leases, appended: got.appended };
  });
}

/**
 * `maxPollMs`: the longest idle wait while notifications are trusted
 * (runtime/append-wait.ts). Default five polls, at least `pollMs`.
 */
export function resolveMaxPollMs(value: unknown, pollMs: number): number {
  return optionalInteger('maxPollMs', value, Math.min(5 * pollMs, 3600_000), { min: pollMs, max: 3600_000 });
}
