import type { ManualClock } from '../../../src/core/clock.js';
import type { ScheduledTimer, Timers } from '../../../src/runtime/timers.js';

interface Pending {
  at: number;
  seq: number;
  callback: () => void;
  cancelled: boolean;
  keepAlive: boolean;
}

/**
 * A `Timers` driven by a `ManualClock`: nothing fires until the test calls
 * `advance`, which moves the clock to each due timer in turn and fires it.
 * Sharing the clock with the backend keeps lease expiry and the producer's
 * renewal timer on one timeline.
 */
export class ManualTimers implements Timers {
  readonly clock: ManualClock;
  #pending: Pending[] = [];
  #seq = 0;

  constructor(clock: ManualClock) {
    this.clock = clock;
  }

  schedule(ms: number, callback: () => void, options: { keepAlive?: boolean } = {}): ScheduledTimer {
    const entry: Pending = {
      at: this.clock.now() + Math.max(0, ms),
      seq: this.#seq++,
      callback,
      cancelled: false,
      keepAlive: options.keepAlive !== false,
    };
    this.#pending.push(entry);
    return {
      cancel: () => {
        entry.cancelled = true;
      },
    };
  }

  /** Delays (from now) of the live timers, soonest first. */
  pendingDelays(filter: { keepAlive?: boolean } = {}): number[] {
    const now = this.clock.now();
    return this.#live()
      .filter((p) => filter.keepAlive === undefined || p.keepAlive === filter.keepAlive)
      .map((p) => p.at - now);
  }

  /** Moves the clock forward by `ms`, firing every timer that falls due on the way, in order. */
  advance(ms: number): void {
    const end = this.clock.now() + ms;
    for (;;) {
      const next = this.#live().find((p) => p.at <= end);
      if (!next) break;
      if (next.at > this.clock.now()) this.clock.set(next.at);
      next.cancelled = true;
      next.callback();
    }
    this.clock.set(Math.max(end, this.clock.now()));
  }

  /** Fires the timers already due at the current clock time. */
  runDue(): void {
    this.advance(0);
  }

  #live(): Pending[] {
    this.#pending = this.#pending.filter((p) => !p.cancelled);
    return [...this.#pending].sort((a, b) => a.at - b.at || a.seq - b.seq);
  }
}
