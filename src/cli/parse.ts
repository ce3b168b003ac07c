import { InvalidArgumentError } from 'commander';

/** commander argParser for a non-negative integer flag. */
export function parseCount(value: string): number {
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new InvalidArgumentError('expected a non-negative integer');
  }
  return Number(value);
}

/** commander argParser for a repeatable partition number. */
export function collectPartition(value: string, previous: number[] = []): number[] {
  return [...previous, parseCount(value)];
}

/** commander argParser for a point in time: ISO 8601 (`2026-11-30T12:00:00Z`) or epoch milliseconds. */
export function parseTime(value: string): Date {
  const date = /^\d+$/.test(value) ? new Date(Number(value)) : new Date(value);
  if (Number.isNaN(date.getTime())) throw new InvalidArgumentError('expected an ISO 8601 time or epoch milliseconds');
  return date;
}

/** commander argParser for a JSON value. */
export function parseJson(value: string): unknown {
  try {
    return JSON.parse(value) as unknown;
  } catch {
    throw new InvalidArgumentError('expected JSON');
  }
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** commander argParser for a duration: milliseconds (`90000`) or a number with a unit (`500ms`, `30s`, `15m`, `12h`, `7d`, `2w`). */
export function parseDuration(value: string): number {
  const match = /^(\d+)(ms|s|m|h|d|w)?$/.exec(value.trim());
  const ms = match ? Number(match[1]) * (DURATION_UNITS[match[2] ?? 'ms'] ?? 1) : NaN;
  if (!Number.isSafeInteger(ms) || ms < 1) {
    throw new InvalidArgumentError('expected a positive duration: milliseconds, or a number with ms, s, m, h, d or w (e.g. 7d)');
  }
  return ms;
}

/** A duration in the largest whole unit, for display (`7d`, `90s`). */
export function formatDuration(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    const size = DURATION_UNITS[unit]!;
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
