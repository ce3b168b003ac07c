import { RheoError } from './errors.js';

/**
 * Size limits of one rheo instance. Every backend enforces the same numbers
 * because the facade checks them (sizes by the rule in json-size.ts) before a
 * backend sees the call, and passes byte budgets down with every read.
 */
export interface RheoLimits {
  /**
   * Largest event accepted by `append`/`appendBatch`: payload plus metadata,
   * in bytes by the size rule. Default 1 MiB (Kafka's default message size;
   * Pub/Sub allows 10 MB).
   */
  maxEventBytes: number;
  /** Largest `appendBatch`, summed over its events. Default 64 MiB. */
  maxBatchBytes: number;
}

export const DEFAULT_MAX_EVENT_BYTES = 1024 * 1024;
export const DEFAULT_MAX_BATCH_BYTES = 64 * 1024 * 1024;
/** Default byte budget of one `fetch`, `read` or `query` (`defaults.maxFetchBytes`). */
export const DEFAULT_MAX_FETCH_BYTES = 16 * 1024 * 1024;
/**
 * Ceiling for every configurable byte limit. A fetch's leases come back from
 * PostgreSQL as one JSON text, and V8 cannot hold a string longer than
 * 2^29 - 24 characters (~512 MiB): 256 MiB leaves room for the 1.5x that
 * PostgreSQL's spacing adds and for the per-lease fields.
 */
export const MAX_CONFIGURABLE_BYTES = 256 * 1024 * 1024;

/**
 * Deepest nesting of arrays and objects accepted in a payload, metadata or a
 * query pattern (the top-level value is depth 1). Deeper values would reach
 * the recursion limits of the validators, of `JSON.stringify` and of
 * PostgreSQL's JSON parser at different depths on different backends.
 */
export const MAX_JSON_DEPTH = 100;

/**
 * Timestamps every backend can store: years 0001 to 9999 (PostgreSQL's
 * timestamptz and a JavaScript Date both hold them; ISO 8601 writes them
 * without a sign).
 */
/** 0001-01-01T00:00:00.000Z */
export const MIN_TIMESTAMP_MS = -62_135_596_800_000;
/** 9999-12-31T23:59:59.999Z */
export const MAX_TIMESTAMP_MS = 253_402_300_799_999;

/** `atLeast`: the size was counted only until it passed the limit. */
export function eventTooLarge(stream: string, what: string, bytes: number, limit: number, atLeast = false): RheoError {
  const size = `${atLeast ? 'at least ' : ''}${bytes} bytes`;
  return new RheoError(
    'event_too_large',
    `${what} for stream "${stream}" is ${size} (payload plus metadata), over the limit of ${limit} bytes`,
    { stream },
  );
}
