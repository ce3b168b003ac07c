import { assertKnownKeys, optionKeys } from '../core/option-keys.js';
import type { Backend } from '../core/backend.js';
import { MAX_LEASE_MS, MAX_LIMIT, assertOptions } from '../core/arguments/common.js';
import { systemClock, type Clock } from '../core/clock.js';
import { invalidArgument } from '../core/errors.js';
import {
  DEFAULT_MAX_BATCH_BYTES,
  DEFAULT_MAX_EVENT_BYTES,
  DEFAULT_MAX_FETCH_BYTES,
  MAX_CONFIGURABLE_BYTES,
  type RheoLimits,
} from '../core/limits.js';
import type { Logger } from '../core/logger.js';
import { describe, optionalInteger } from '../core/validation.js';
import { DEFAULT_TRIM_BATCH } from '../retention/trim-batches.js';
import type { RheoDefaults } from '../runtime/sources.js';

/** The instance defaults every producer and consumer resolves its options against (declared by the runtime). */
export type { RheoDefaults } from '../runtime/sources.js';

export interface RheoOptions {
  /** Defaults to a fresh in-memory backend using `clock`. */
  backend?: Backend;
  defaults?: Partial<RheoDefaults>;
  /** Time source for the default memory backend and for rheo's own timers. */
  clock?: Clock;
  /** Event and batch size limits (core/limits.ts); defaults 1 MiB per event, 64 MiB per batch. */
  limits?: Partial<RheoLimits>;
  /**
   * A pino-compatible logger (`debug/info/warn/error(fields, message)`) for
   * what happens outside any call's answer: fetch failures and their
   * backoff, renewal failures, lost leases, failed settles, handler
   * failures, consumer stops, dropped and reopened connections, applied
   * migrations. Default: silent.
   */
  logger?: Logger;
  /**
   * OpenTelemetry spans and metrics (docs/observability.md) when
   * `@opentelemetry/api` is installed; providers registered with the API are
   * used. `false` keeps this instance from loading or reporting anything.
   * Default `true`.
   */
  telemetry?: boolean;
  /** The background trimmer (docs/semantics.md, "Background trimming"). */
  retention?: Partial<RetentionTrimmerOptions>;
}

export interface RetentionTrimmerOptions {
  /** Run the background trimmer at all. Default true. */
  enabled: boolean;
  /** Time between passes over the streams that have retention. Default 60 s. */
  intervalMs: number;
  /** Events deleted per backend call (one short transaction on PostgreSQL). Default 10,000. */
  batchSize: number;
}

const RHEO_OPTION_KEYS = optionKeys<RheoOptions>()('backend', 'defaults', 'clock', 'limits', 'logger', 'telemetry', 'retention');
const DEFAULTS_KEYS = optionKeys<RheoDefaults>()('leaseMs', 'maxAttempts', 'maxDemand', 'pollMs', 'maxFetchBytes');
const RETENTION_KEYS = optionKeys<RetentionTrimmerOptions>()('enabled', 'intervalMs', 'batchSize');

/** `createRheo` options checked and filled with defaults; the backend and logger are resolved by `Rheo`. */
export interface ResolvedOptions {
  clock: Clock;
  defaults: Readonly<RheoDefaults>;
  limits: Readonly<RheoLimits>;
  trimmer: RetentionTrimmerOptions;
  telemetry: boolean;
}

/** Checks `createRheo` options in the order their messages are documented and tested; throws before anything is made. */
export function resolveOptions(options: RheoOptions): ResolvedOptions {
  if (options === null || typeof options !== 'object') throw invalidArgument('createRheo options must be an object');
  assertKnownKeys('createRheo options', options, RHEO_OPTION_KEYS);
  const clock = options.clock ?? systemClock;
  const d = options.defaults ?? {};
  assertKnownKeys('defaults', d, DEFAULTS_KEYS);
  const defaults = Object.freeze({
    leaseMs: optionalInteger('defaults.leaseMs', d.leaseMs, 30_000, { min: 1, max: MAX_LEASE_MS }),
    maxAttempts: optionalInteger('defaults.maxAttempts', d.maxAttempts, 5, { min: 1, max: 1_000_000 }),
    maxDemand: optionalInteger('defaults.maxDemand', d.maxDemand, 10, { min: 1, max: MAX_LIMIT }),
    pollMs: optionalInteger('defaults.pollMs', d.pollMs, 200, { min: 1, max: 3600_000 }),
    maxFetchBytes: optionalInteger('defaults.maxFetchBytes', d.maxFetchBytes, DEFAULT_MAX_FETCH_BYTES, {
      min: 1,
      max: MAX_CONFIGURABLE_BYTES,
    }),
  });
  const l = options.limits ?? {};
  assertOptions('limits', l);
  const limits = Object.freeze({
    maxEventBytes: optionalInteger('limits.maxEventBytes', l.maxEventBytes, DEFAULT_MAX_EVENT_BYTES, {
      min: 2,
      max: MAX_CONFIGURABLE_BYTES,
    }),
    maxBatchBytes: optionalInteger('limits.maxBatchBytes', l.maxBatchBytes, DEFAULT_MAX_BATCH_BYTES, {
      min: 2,
      max: MAX_CONFIGURABLE_BYTES,
    }),
  });
  const r = options.retention ?? {};
  assertOptions('retention', r);
  assertKnownKeys('retention', r, RETENTION_KEYS);
  if (r.enabled !== undefined && typeof r.enabled !== 'boolean') {
    throw invalidArgument(`retention.enabled must be a boolean, got ${describe(r.enabled)}`);
  }
  const intervalMs = optionalInteger('retention.intervalMs', r.intervalMs, 60_000, { min: 1, max: 2_147_483_647 });
  const batchSize = optionalInteger('retention.batchSize', r.batchSize, DEFAULT_TRIM_BATCH, { min: 1, max: 1_000_000 });
  if (options.telemetry !== undefined && typeof options.telemetry !== 'boolean') {
    throw invalidArgument(`telemetry must be true or false, got ${describe(options.telemetry)}`);
  }
  return {
    clock,
    defaults,
    limits,
    trimmer: { enabled: r.enabled !== false, intervalMs, batchSize },
    telemetry: options.telemetry !== false,
  };
}
