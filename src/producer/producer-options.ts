import type { RheoError } from '../core/errors.js';
import type { Lease } from '../core/types.js';
import type { Rheo } from '../rheo.js';
import type { BackoffOptions } from './backoff.js';
import type { RenewSummary } from './inflight-tracker.js';
import type { Timers } from './timers.js';

/** What a producer needs from rheo: the facade, never a concrete backend. */
export type ProducerSource = Pick<Rheo, 'fetch' | 'renewMany' | 'settleMany' | 'backend' | 'defaults'>;

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
  /** Recorded on every lease. Default: `producer-<random>`. */
  consumerId?: string;
  /** Claim only from these partitions. */
  partitions?: number[];
  /** Aborting destroys the producer (releasing leases never read), like `Readable`'s own `signal`. */
  signal?: AbortSignal;
  /** Backoff after a failed fetch. Default `{ initialMs: min(pollMs, 100), maxMs: 30_000 }`. */
  fetchBackoff?: Partial<BackoffOptions>;
  /** Largest coalesced `settleMany` call. Default 500. */
  maxSettleBatch?: number;
  /** Timer source for renewal, polling, backoff and `drain`. Default: real timers. */
  timers?: Timers;
  /** Jitter source in [0, 1). Default `Math.random`. */
  random?: () => number;
}

export interface LeaseLostInfo<T> {
  lease: Lease<T>;
  error: RheoError;
}

export interface FetchErrorInfo {
  error: RheoError;
  /** Consecutive failed fetches, 1 for the first. */
  failures: number;
  /** The backoff before the next fetch. */
  retryInMs: number;
}

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
  /** A renewal came back `stale_lease`: the lease was dropped (another holder may have it). */
  'lease-lost': [info: LeaseLostInfo<T>];
  /** A fetch failed; the producer backs off and retries. The stream never ends because of it. */
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
