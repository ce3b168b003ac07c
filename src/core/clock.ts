import { invalidArgument } from './errors.js';

/**
 * The one time source rheo reads. Inject a `ManualClock` in tests so lease
 * expiry is driven by `advance()`, never by sleeping on the wall clock.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = Object.freeze({ now: () => Date.now() });

export class ManualClock implements Clock {
  #nowMs: number;

  constructor(start: number | Date = Date.UTC(2026, 0, 1)) {
    this.#nowMs = typeof start === 'number' ? start : start.getTime();
  }

  now(): number {
    return this.#nowMs;
  }

  advance(ms: number): number {
    if (!Number.isFinite(ms) || ms < 0) throw invalidArgument(`ManualClock.advance expects a finite ms >= 0, got ${ms}`);
    this.#nowMs += ms;
    return this.#nowMs;
  }

  set(at: number | Date): void {
    this.#nowMs = typeof at === 'number' ? at : at.getTime();
  }
}
