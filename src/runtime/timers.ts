/**
 * The timer source of the streams adapter. Injected so tests can drive the
 * producer's renewal, poll and backoff timers (and the sinks' batch timers)
 * by hand instead of sleeping on the wall clock.
 */
export interface Timers {
  /**
   * Runs `callback` once after `ms`. `keepAlive: false` marks a housekeeping
   * timer that must not keep the process alive (`unref`).
   */
  schedule(ms: number, callback: () => void, options?: { keepAlive?: boolean }): ScheduledTimer;
}

export interface ScheduledTimer {
  /** Idempotent; a cancelled timer never fires. */
  cancel(): void;
}

/** Real timers (`setTimeout`). */
export const systemTimers: Timers = Object.freeze({
  schedule(ms: number, callback: () => void, options: { keepAlive?: boolean } = {}): ScheduledTimer {
    const handle = setTimeout(callback, Math.max(0, ms));
    if (options.keepAlive === false) handle.unref();
    return { cancel: () => clearTimeout(handle) };
  },
});

/** Resolves after `ms` on `timers`, or at once when `signal` aborts. Never rejects. */
export function sleep(timers: Timers, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      timer.cancel();
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = timers.schedule(ms, done);
    signal?.addEventListener('abort', done, { once: true });
  });
}
