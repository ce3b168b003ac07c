import { randomBytes } from 'node:crypto';
import { normalizePartitions } from '../core/arguments/common.js';
import { RheoError } from '../core/errors.js';
import { assertKnownKeys, optionKeys } from '../core/option-keys.js';
import type { Lease } from '../core/types.js';
import { assertName, assertString, optionalInteger } from '../core/validation.js';
import type {
  AckEvent,
  DeadLetterEvent,
  FetchErrorEvent,
  LeaseEvent,
  LeaseLostEvent,
  RetryEvent,
  SettleErrorEvent,
} from '../observability/lease-events.js';
import { resolveMaxPollMs } from '../runtime/append-wait.js';
import { resolveFetchBackoff, type BackoffOptions } from '../runtime/backoff.js';
import { failurePolicyOf, type FailurePolicy } from '../runtime/lease-outcome.js';
import type { LeaseSource } from '../runtime/sources.js';
import type { RenewSummary } from './inflight-tracker.js';
import type { Timers } from '../runtime/timers.js';

export interface ProducerOptions {
  stream: string;
  group: string;
  /**
   * Most unsettled leases held at once: buffered in the stream plus handed
   * downstream and not yet confirmed. Also the stream's `highWaterMark`.
   * Default: `rheo.defaults.maxDemand`.
   */
  maxDemand?: number;
  /**
   * Fetch only once at least this many slots are free, so that demand is
   * refilled in chunks (GenStage's `min_demand` idea: fewer, larger claims).
   * Default: a quarter of `maxDemand`, at least 1.
   */
  minDemand?: number;
  /** Lease length per claim and per renewal. Default: `rheo.defaults.leaseMs`. */
  leaseMs?: number;
  /** Wait after an empty fetch (cut short when the backend signals an append). Default: `rheo.defaults.pollMs`. */
  pollMs?: number;
  /**
   * While the store's notifications are trusted, each further empty fetch
   * that its timer ended doubles the wait from `pollMs` up to this; a
   * notification or a fetch that finds leases starts it at `pollMs` again
   * (a fetch that finds what no notification announced keeps it at `pollMs`
   * until one arrives). Default `5 × pollMs`; `pollMs` turns the backoff off.
   */
  maxPollMs?: number;
  /** Recorded on every lease. Default: `producer-<random>`. */
  consumerId?: string;
  /** Claim only from these partitions. */
  partitions?: number[];
  /**
   * Every stage's default for a lease whose work failed (a throw in a sink,
   * a map or a trigger): `'nack'` retries it until `maxAttempts`, then
   * dead-letters it; `'reject'` dead-letters it at once. A stage's own
   * `onFailure` overrides it. Default `'nack'`.
   */
  onFailure?: FailurePolicy;
  /** Aborting destroys the producer (releasing leases never read), like `Readable`'s own `signal`. */
  signal?: AbortSignal;
  /** Backoff after a failed fetch. Default `{ initialMs: min(pollMs, 100), maxMs: 30_000 }`. */
  fetchBackoff?: Partial<BackoffOptions>;
  /**
   * Retries of a settle that failed with `backend_unavailable` (nothing was
   * written), with capped exponential backoff, at most `maxRetries` times and
   * only while the lease has not expired by the facade's clock; its promise
   * settles with the final answer. `ambiguous` failures are never retried.
   * Default `{ maxRetries: 8, initialMs: 100, maxMs: 5_000 }`; `maxRetries: 0` turns it off.
   */
  settleRetry?: Partial<BackoffOptions> & { maxRetries?: number };
  /** Largest coalesced `settleMany` call. Default 500. */
  maxSettleBatch?: number;
  /** Timer source for renewal, polling, backoff and `drain`. Default: real timers. */
  timers?: Timers;
  /** Jitter source in [0, 1). Default `Math.random`. */
  random?: () => number;
}

/**
 * Producer events carry the same fields as the `rheo:*` diagnostics (never the
 * payload), plus, in process only, the `lease` itself so a stage can act on it.
 */
export type WithLease<E, T> = E & { readonly lease: Lease<T> };

export type LeaseLostInfo<T> = WithLease<LeaseLostEvent, T>;
export type FetchErrorInfo = FetchErrorEvent;

export interface RenewErrorInfo<T> {
  error: RheoError;
  /** Leases kept and retried sooner. */
  leases: Lease<T>[];
}

export interface ReleasedInfo<T> {
  /** Leases fetched but never read, given back without spending an attempt. */
  leases: Lease<T>[];
  /** Set when the release call failed (the leases then expire instead). */
  error: RheoError | null;
}

export interface FetchedInfo {
  count: number;
  inflight: number;
}

/** Events a `RheoProducer` emits besides the `Readable` ones. */
export interface RheoProducerEvents<T> {
  /** A lease was claimed and is now held (buffered, then handed downstream). */
  lease: [info: WithLease<LeaseEvent, T>];
  /** `producer.ack` settled durably. */
  ack: [info: WithLease<AckEvent, T>];
  /** `producer.nack` settled durably: retried after `delayMs` (dead-lettered if it was the last attempt). */
  retry: [info: WithLease<RetryEvent, T>];
  /** `producer.reject` settled durably. */
  'dead-letter': [info: WithLease<DeadLetterEvent, T>];
  /** A settle through the producer failed for another reason than `stale_lease`. */
  'settle-error': [info: WithLease<SettleErrorEvent, T>];
  /**
   * A renewal, or a settle through the producer, came back `stale_lease`
   * while the producer held the lease: it was dropped (another holder may
   * have it). Once per lease, whichever noticed first.
   */
  'lease-lost': [info: LeaseLostInfo<T>];
  /**
   * A fetch failed; the producer backs off `backoffMs` and retries, so the
   * stream does not end because of it, except on `closed` (rheo was closed):
   * then the producer is destroyed with that error (quietly when nothing
   * listens for `'error'`).
   */
  'fetch-error': [info: FetchErrorInfo];
  /** A renewal failed for another reason than `stale_lease`; the leases are kept. */
  'renew-error': [info: RenewErrorInfo<T>];
  /** A renewal round finished. */
  renewed: [summary: RenewSummary];
  /** A fetch returned leases, now counted in `inflightCount`. */
  fetched: [info: FetchedInfo];
  /** Leases fetched but never read were released during teardown. */
  released: [info: ReleasedInfo<T>];
}

/** Every option `rheo.producer()` takes; any other key is refused. */
const PRODUCER_OPTION_KEYS = optionKeys<ProducerOptions>()(
  'stream',
  'group',
  'maxDemand',
  'minDemand',
  'leaseMs',
  'pollMs',
  'maxPollMs',
  'consumerId',
  'partitions',
  'onFailure',
  'signal',
  'fetchBackoff',
  'settleRetry',
  'maxSettleBatch',
  'timers',
  'random',
);

/**
 * Checks the producer's options once, at construction (the lease source
 * validates nothing again), and fills in the defaults from `source.defaults`.
 */
export function resolveProducerOptions(source: LeaseSource, options: ProducerOptions) {
  if (options === null || typeof options !== 'object') {
    throw new RheoError('invalid_argument', 'producer options must be an object with stream and group');
  }
  assertKnownKeys('producer options', options, PRODUCER_OPTION_KEYS);
  assertName('stream', options.stream);
  assertName('group', options.group);
  const d = source.defaults;
  const maxDemand = optionalInteger('maxDemand', options.maxDemand, d.maxDemand, { min: 1, max: 10_000 });
  const leaseMs = optionalInteger('leaseMs', options.leaseMs, d.leaseMs, { min: 2, max: 7 * 24 * 3600_000 });
  const pollMs = optionalInteger('pollMs', options.pollMs, d.pollMs, { min: 1, max: 3600_000 });
  const maxPollMs = resolveMaxPollMs(options.maxPollMs, pollMs);
  const minDemand = optionalInteger('minDemand', options.minDemand, Math.max(1, Math.floor(maxDemand / 4)), {
    min: 1,
    max: maxDemand,
  });
  const maxSettleBatch = optionalInteger('maxSettleBatch', options.maxSettleBatch, 500, { min: 1, max: 10_000 });
  const retry = options.settleRetry ?? {};
  if (retry === null || typeof retry !== 'object') {
    throw new RheoError('invalid_argument', 'settleRetry must be an object { maxRetries?, initialMs?, maxMs? }');
  }
  const settleRetry = {
    maxRetries: optionalInteger('settleRetry.maxRetries', retry.maxRetries, 8, { min: 0, max: 1000 }),
    initialMs: optionalInteger('settleRetry.initialMs', retry.initialMs, 100, { min: 1, max: 3600_000 }),
    maxMs: optionalInteger('settleRetry.maxMs', retry.maxMs, 5_000, { min: 1, max: 3600_000 }),
  };
  let consumerId = `producer-${randomBytes(6).toString('hex')}`;
  if (options.consumerId !== undefined) {
    assertString('consumerId', options.consumerId);
    consumerId = options.consumerId;
  }
  const fetchBackoff = resolveFetchBackoff(options.fetchBackoff, pollMs) ?? { initialMs: Math.min(pollMs, 100), maxMs: 30_000 };
  const onFailure = failurePolicyOf('producer', options.onFailure, undefined);
  const partitions = normalizePartitions(options.partitions);
  return { maxDemand, minDemand, leaseMs, pollMs, maxPollMs, maxSettleBatch, settleRetry, consumerId, fetchBackoff, onFailure, partitions };
}
