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
