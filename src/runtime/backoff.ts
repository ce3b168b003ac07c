import { assertPlainObject, optionalInteger } from '../core/validation.js';

/** Capped exponential backoff with jitter: attempt 1 waits about `initialMs`, each failure doubles it, up to `maxMs`. */
export interface BackoffOptions {
  /** First delay after a failure. */
  initialMs: number;
  /** Upper bound of any delay. */
  maxMs: number;
}

/**
 * The delay before retry number `failures` (1-based). Jitter takes off up to
 * 20% so that many workers recovering from the same outage do not retry in
 * lockstep; `random` is injectable for tests.
 */
export function backoffDelay(failures: number, options: BackoffOptions, random: () => number = Math.random): number {
  const exponent = Math.min(Math.max(failures - 1, 0), 30);
  const base = Math.min(options.maxMs, options.initialMs * 2 ** exponent);
  return Math.max(1, Math.round(base * (1 - 0.2 * random())));
}

/**
 * Validates a fetch backoff option and fills its defaults: `initialMs`
 * `min(pollMs, 100)`, `maxMs` 30 000 (never below `initialMs`).
 */
export function resolveFetchBackoff(value: unknown, pollMs: number): BackoffOptions | undefined {
  if (value === undefined) return undefined;
  assertPlainObject('fetchBackoff', value);
  const initialMs = optionalInteger('fetchBackoff.initialMs', value.initialMs, Math.min(pollMs, 100), { min: 1, max: 3600_000 });
  const maxMs = optionalInteger('fetchBackoff.maxMs', value.maxMs, Math.max(30_000, initialMs), { min: initialMs, max: 3600_000 });
  return { initialMs, maxMs };
}
