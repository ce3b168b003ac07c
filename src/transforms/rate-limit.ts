import { assertKnownKeys, optionKeys } from '../core/option-keys.js';
import { Transform } from 'node:stream';
import { systemClock, type Clock } from '../core/clock.js';
import { invalidArgument } from '../core/errors.js';
import { assertInteger } from '../core/validation.js';
import { systemTimers, type ScheduledTimer, type Timers } from '../runtime/timers.js';
import { releaseHeld, type LeaseReleaser } from './release-held.js';

export interface RateLimitOptions {
  /** At most this many items pass... */
  limit: number;
  /** ...in any window of this many milliseconds. */
  intervalMs: number;
  clock?: Clock;
  timers?: Timers;
  /** When given, the lease of an item still waiting for its turn is released if the stream is destroyed. */
  producer?: LeaseReleaser;
}

/** Every option `createRateLimit` takes; any other key is refused. */
const OPTION_KEYS = optionKeys<RateLimitOptions>()('limit', 'intervalMs', 'clock', 'timers', 'producer');

/**
 * Lets at most `limit` items through per sliding `intervalMs`; the rest wait
 * (holding the write callback, so upstream feels the backpressure). Items pass
 * unchanged and in order. Use it in front of a sink that calls a rate-limited
 * API; leases waiting here still count against the producer's `maxDemand`
 * (given a `producer`, the waiting one is released on destroy).
 */
export function createRateLimit<C = unknown>(options: RateLimitOptions): RateLimit<C> {
  return new RateLimit<C>(options);
}

export class RateLimit<C = unknown> extends Transform {
  readonly limit: number;
  readonly intervalMs: number;
  readonly #clock: Clock;
  readonly #timers: Timers;
  /** Pass times of the last `limit` items, oldest first. */
  readonly #passedAt: number[] = [];
  #timer: ScheduledTimer | null = null;
  /** The item waiting for its turn (the write callback is held until it passes). */
  #waiting: C | null = null;
  readonly #producer: LeaseReleaser | undefined;

  constructor(options: RateLimitOptions) {
    assertKnownKeys('createRateLimit options', options, OPTION_KEYS);
    if (options === null || typeof options !== 'object') {
      throw invalidArgument('createRateLimit expects { limit, intervalMs }');
    }
    // Both are required: a missing one used to become NaN, and every item then waited forever.
    const { limit, intervalMs } = options;
    assertInteger('limit', limit, { min: 1, max: 1_000_000 });
    assertInteger('intervalMs', intervalMs, { min: 1, max: 86_400_000 });
    super({ objectMode: true });
    this.limit = limit;
    this.intervalMs = intervalMs;
    this.#clock = options.clock ?? systemClock;
    this.#timers = options.timers ?? systemTimers;
    this.#producer = options.producer;
  }

  override _transform(item: C, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    const admit = (): void => {
      this.#timer = null;
      // Stryker disable next-line ConditionalExpression: equivalent: _destroy cancels the only timer that calls admit after the write, and no write follows a destroy
      if (this.destroyed) return;
      const now = this.#clock.now();
      // The oldest pass leaves the window; with no pass recorded there is none to drop.
      while ((this.#passedAt[0] ?? Number.POSITIVE_INFINITY) <= now - this.intervalMs) this.#passedAt.shift();
      if (this.#passedAt.length < this.limit) {
        this.#waiting = null;
        this.#passedAt.push(now);
        this.push(item);
        callback();
        return;
      }
      this.#waiting = item;
      this.#timer = this.#timers.schedule(this.#passedAt[0]! + this.intervalMs - now, admit);
    };
    admit();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#timer?.cancel();
    this.#timer = null;
    const waiting = this.#waiting;
    this.#waiting = null;
    if (!this.#producer || waiting === null) return callback(error);
    releaseHeld(this.#producer, [waiting], this).then(() => callback(error));
  }
}
