import type { GroupStart, RetentionPolicy, TrimRequest } from '../backend.js';
import { invalidArgument } from '../errors.js';
import { assertDate, assertInteger, assertPlainObject, describe } from '../validation.js';
import { MAX_PARTITIONS } from './common.js';

/* Administration's arguments: where a group starts, retention policies and trim requests. */

export function normalizeStart(startAfter: unknown, startAt: unknown): GroupStart {
  if (startAfter !== undefined && startAt !== undefined) {
    throw invalidArgument('give either startAfter or startAt, not both');
  }
  if (startAt !== undefined) {
    assertDate('startAt', startAt);
    return { kind: 'at', at: new Date(startAt.getTime()) };
  }
  if (startAfter === undefined) return { kind: 'after', after: 0, perPartition: {} };
  if (typeof startAfter === 'number') {
    assertInteger('startAfter', startAfter);
    return { kind: 'after', after: startAfter, perPartition: {} };
  }
  assertPlainObject('startAfter', startAfter);
  const perPartition: Record<number, number> = {};
  for (const [k, v] of Object.entries(startAfter)) {
    const p = Number(k);
    assertInteger(`startAfter partition key ${JSON.stringify(k)}`, /^\d+$/.test(k) ? p : NaN, { max: MAX_PARTITIONS });
    assertInteger(`startAfter[${k}]`, v);
    perPartition[p] = v;
  }
  return { kind: 'after', after: 0, perPartition };
}

/** Longest retention age accepted: about 1,000 years, so `now - maxAgeMs` stays a valid date. */
export const MAX_RETENTION_AGE_MS = 1000 * 365 * 24 * 3600_000;

/**
 * A retention policy: `null` (keep everything) or an object with at least
 * one of `maxAgeMs` (>= 1) and `maxEvents` (>= 0); each may be null/absent.
 */
export function normalizeRetention(value: unknown): RetentionPolicy | null {
  if (value === null) return null;
  assertPlainObject('retention', value);
  for (const key of Object.keys(value)) {
    if (key !== 'maxAgeMs' && key !== 'maxEvents') {
      throw invalidArgument(`retention accepts maxAgeMs and maxEvents, got an unknown key ${JSON.stringify(key)}`);
    }
  }
  const maxAgeMs = value.maxAgeMs ?? null;
  const maxEvents = value.maxEvents ?? null;
  if (maxAgeMs !== null) assertInteger('retention.maxAgeMs', maxAgeMs, { min: 1, max: MAX_RETENTION_AGE_MS });
  if (maxEvents !== null) assertInteger('retention.maxEvents', maxEvents, { min: 0 });
  if (maxAgeMs === null && maxEvents === null) {
    throw invalidArgument('retention needs maxAgeMs or maxEvents (pass null to keep every event)');
  }
  return { maxAgeMs, maxEvents };
}

/** `rheo.trim` options into a backend request (without `limit`). */
export function normalizeTrim(options: unknown): Omit<TrimRequest, 'limit'> {
  if (options === undefined) return { before: null, keep: null, force: false };
  assertPlainObject('trim options', options);
  for (const key of Object.keys(options)) {
    if (key !== 'before' && key !== 'keep' && key !== 'force' && key !== 'signal' && key !== 'timeoutMs') {
      throw invalidArgument(`trim accepts before, keep, force, signal and timeoutMs, got an unknown key ${JSON.stringify(key)}`);
    }
  }
  let before: Date | null = null;
  if (options.before !== undefined) {
    assertDate('trim before', options.before);
    before = new Date(options.before.getTime());
  }
  let keep: number | null = null;
  if (options.keep !== undefined) {
    assertInteger('trim keep', options.keep);
    keep = options.keep;
  }
  if (options.force !== undefined && typeof options.force !== 'boolean') {
    throw invalidArgument(`trim force must be a boolean, got ${describe(options.force)}`);
  }
  return { before, keep, force: options.force === true };
}
