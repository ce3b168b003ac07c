import { assertKnownKeys, optionKeys } from '../core/option-keys.js';
import { invalidArgument } from '../core/errors.js';
import type { Lease } from '../core/types.js';
import { assertInteger, assertName, assertPlainObject, assertString, describe, optionalInteger } from '../core/validation.js';
import { resolveMaxPollMs } from '../runtime/append-wait.js';
import { resolveFetchBackoff, type BackoffOptions } from '../runtime/backoff.js';
import type { Timers } from '../runtime/timers.js';
import type { RuntimeDefaults as RheoDefaults } from '../runtime/sources.js';
import type { ConsumeOptions, ConsumerHandler } from './consumer-types.js';

const MAX_LEASE_MS = 7 * 24 * 3600_000;
const MAX_CONCURRENCY = 10_000;

/** `consume` options after validation, every default filled in. */
export interface ResolvedConsumeOptions<T> {
  stream: string;
  group: string;
  handler: ConsumerHandler<T>;
  concurrency: number;
  maxDemand: number;
  leaseMs: number;
  pollMs: number;
  maxPollMs: number;
  consumerId: string;
  partitions: number[] | undefined;
  handlerTimeoutMs: number | null;
  /** `null`: no ordering. */
  orderKey: ((lease: Lease<T>) => string) | null;
  signal: AbortSignal | undefined;
  stopTimeoutMs: number;
  timers: Timers | undefined;
  minDemand: number | undefined;
  fetchBackoff: BackoffOptions | undefined;
  transaction: boolean;
}

/**
 * Validates everything up front, so that `consume()` can return its handle
 * synchronously and a bad option is an immediate `invalid_argument`, never a
 * failure discovered later on a background loop.
 */
const CONSUME_OPTION_KEYS = optionKeys<ConsumeOptions>()(
  'stream',
  'group',
  'assignment',
  'handler',
  'concurrency',
  'maxDemand',
  'leaseMs',
  'pollMs',
  'maxPollMs',
  'consumerId',
  'partitions',
  'handlerTimeoutMs',
  'orderBy',
  'signal',
  'stopTimeoutMs',
  'timers',
  'minDemand',
  'fetchBackoff',
  'transaction',
);

export function resolveConsumeOptions<T>(
  options: ConsumeOptions<T>,
  defaults: Readonly<RheoDefaults>,
  randomId: () => string,
): ResolvedConsumeOptions<T> {
  assertPlainObject('consume options', options);
  assertKnownKeys('consume options', options, CONSUME_OPTION_KEYS);
  assertName('stream', options.stream);
  assertName('group', options.group);
  if (typeof options.handler !== 'function') {
    throw invalidArgument(`consume handler must be a function (event, { lease, attempt, signal }) => outcome, got ${describe(options.handler)}`);
  }
  const concurrency = optionalInteger('concurrency', options.concurrency, 1, { min: 1, max: MAX_CONCURRENCY });
  const maxDemand = optionalInteger('maxDemand', options.maxDemand, Math.max(10, concurrency), {
    min: 1,
    max: MAX_CONCURRENCY,
  });
  if (maxDemand < concurrency) {
    throw invalidArgument(
      `maxDemand (${maxDemand}) must be at least concurrency (${concurrency}): with fewer leases held, ${concurrency} handlers can never run at once`,
    );
  }
  const leaseMs = optionalInteger('leaseMs', options.leaseMs, defaults.leaseMs, { min: 1, max: MAX_LEASE_MS });
  const pollMs = optionalInteger('pollMs', options.pollMs, defaults.pollMs, { min: 1, max: 3600_000 });
  const maxPollMs = resolveMaxPollMs(options.maxPollMs, pollMs);
  let consumerId = `consumer-${randomId()}`;
  if (options.consumerId !== undefined) {
    assertString('consumerId', options.consumerId);
    consumerId = options.consumerId;
  }
  let partitions: number[] | undefined;
  if (options.partitions !== undefined) {
    if (!Array.isArray(options.partitions) || options.partitions.length === 0) {
      throw invalidArgument(`partitions must be a non-empty array of partition numbers, got ${describe(options.partitions)}`);
    }
    for (const p of options.partitions) assertInteger('partitions[]', p, { max: 4096 });
    partitions = [...options.partitions];
  }
  const handlerTimeoutMs =
    options.handlerTimeoutMs === undefined
      ? null
      : optionalInteger('handlerTimeoutMs', options.handlerTimeoutMs, 0, { min: 1, max: MAX_LEASE_MS });
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw invalidArgument(`signal must be an AbortSignal, got ${describe(options.signal)}`);
  }
  if (options.timers !== undefined && (options.timers === null || typeof options.timers.schedule !== 'function')) {
    throw invalidArgument(`timers must be an object with schedule(ms, callback), got ${describe(options.timers)}`);
  }
  const stopTimeoutMs = optionalInteger('stopTimeoutMs', options.stopTimeoutMs, 30_000, { max: MAX_LEASE_MS });
  const minDemand =
    options.minDemand === undefined ? undefined : optionalInteger('minDemand', options.minDemand, 1, { min: 1, max: maxDemand });
  const fetchBackoff = resolveFetchBackoff(options.fetchBackoff, pollMs);
  if (options.transaction !== undefined && typeof options.transaction !== 'boolean') {
    throw invalidArgument(`transaction must be true or false, got ${describe(options.transaction)}`);
  }
  return {
    stream: options.stream,
    group: options.group,
    handler: options.handler,
    concurrency,
    maxDemand,
    leaseMs,
    pollMs,
    maxPollMs,
    consumerId,
    partitions,
    handlerTimeoutMs,
    orderKey: orderKeyOf(options.orderBy),
    signal: options.signal,
    stopTimeoutMs,
    timers: options.timers,
    minDemand,
    fetchBackoff,
    transaction: options.transaction === true,
  };
}

/** Validates `stop({ timeoutMs })`; `fallback` is the consumer's `stopTimeoutMs`. */
export function resolveStopTimeout(options: unknown, fallback: number): number {
  if (options === undefined) return fallback;
  assertPlainObject('stop options', options);
  return optionalInteger('stop timeoutMs', options.timeoutMs, fallback, { max: MAX_LEASE_MS });
}

function orderKeyOf<T>(orderBy: ConsumeOptions<T>['orderBy']): ((lease: Lease<T>) => string) | null {
  if (orderBy === undefined) return null;
  // Kafka semantics: an event without a key has no ordering constraint, so it
  // gets a key of its own (its receipt is unique per delivery).
  if (orderBy === 'key') return (lease) => (lease.event.key === null ? `\u0000${lease.receipt}` : `k:${lease.event.key}`);
  if (orderBy === 'partition') return (lease) => `p:${lease.event.partition}`;
  if (typeof orderBy === 'function') {
    return (lease) => {
      const key: unknown = orderBy(lease);
      if (typeof key !== 'string') {
        throw invalidArgument(`orderBy function must return a string, got ${describe(key)} for event ${lease.event.id}`);
      }
      return key;
    };
  }
  throw invalidArgument(`orderBy must be 'key', 'partition' or a function (lease) => string, got ${describe(orderBy)}`);
}

