import type { RheoError } from '../core/errors.js';
import type { Lease } from '../core/types.js';

/**
 * What every lease-scoped event says about its lease. Built from the lease by
 * `leaseInfo`; it never carries the event payload or metadata (they may
 * hold personal data, and APM tools store what they receive) nor the
 * `leaseId` (the fencing token authorises settles).
 */
export interface LeaseEventInfo {
  readonly stream: string;
  readonly group: string;
  readonly consumerId: string;
  readonly eventId: string;
  readonly eventType: string;
  readonly partition: number;
  readonly sequence: number;
  /** 1 on first delivery, +1 on every claim. */
  readonly attempt: number;
}

/** A lease was claimed and handed to the pipeline. */
export type LeaseEvent = LeaseEventInfo;

/** A lease was acked durably. */
export type AckEvent = LeaseEventInfo;

/** A lease was nacked durably: it is retried after `delayMs` (or dead-lettered if it was its last attempt). */
export interface RetryEvent extends LeaseEventInfo {
  readonly reason: string | null;
  readonly delayMs: number;
}

/** A lease was dead-lettered durably by a reject. */
export interface DeadLetterEvent extends LeaseEventInfo {
  readonly reason: string | null;
}

/** A held lease was taken away (renewal or settle answered `stale_lease`; reported once per lease): stop working on it. */
export interface LeaseLostEvent extends LeaseEventInfo {
  readonly error: RheoError;
}

/**
 * A settle failed for another reason than `stale_lease` (that is
 * `lease-lost`). Unless a `retry` event for the same delivery follows (a
 * consumer nacks after a definite ack failure), the lease is left to expire
 * and is redelivered then.
 */
export interface SettleErrorEvent extends LeaseEventInfo {
  readonly op: 'ack' | 'nack' | 'reject' | 'release';
  readonly error: RheoError;
}

/** A fetch failed; the next one waits `backoffMs`. */
export interface FetchErrorEvent {
  readonly stream: string;
  readonly group: string;
  readonly consumerId: string;
  readonly error: RheoError;
  /** Consecutive failed fetches, this one included. */
  readonly failures: number;
  readonly backoffMs: number;
}

/** Why a handler did not produce a valid outcome. */
export type HandlerErrorKind = 'threw' | 'timeout' | 'invalid-outcome' | 'stopped';

/**
 * A handler threw, timed out, returned something that is not an outcome, or
 * was still running when a drain gave up on it; the lease is nacked.
 */
export interface HandlerErrorEvent extends LeaseEventInfo {
  readonly kind: HandlerErrorKind;
  readonly error: unknown;
}

/** A drain finished: everything in flight has settled, or was aborted at the timeout. */
export interface DrainEvent {
  readonly stream: string;
  readonly group: string;
  readonly consumerId: string;
  /** Leases given back without being started. */
  readonly released: number;
  /** Handlers still running at the timeout, whose signals were aborted. */
  readonly aborted: number;
  readonly timedOut: boolean;
}

/** A partition-ownership member joined its group (its first heartbeat succeeded). */
export interface MemberJoinEvent {
  readonly stream: string;
  readonly group: string;
  readonly memberId: string;
}

/** A member left its group (`stop()`): its partitions are free at once. */
export type MemberLeaveEvent = MemberJoinEvent;

/**
 * A member's share changed: partitions it was given (`assigned`, each with
 * the generation that fences it) and partitions it is giving up (`revoked`,
 * when asked to hand them over; `lost`, when they moved without its release,
 * after the rebalance timeout or the end of its session).
 */
export interface RebalanceEvent extends MemberJoinEvent {
  readonly groupGeneration: number;
  readonly assigned: ReadonlyArray<{ partition: number; generation: number }>;
  readonly revoked: readonly number[];
  readonly lost: readonly number[];
  /** Every partition the member owns after the change. */
  readonly owned: readonly number[];
}

/**
 * Event name → listener arguments, for `EventEmitter<RheoEventMap>`. The same
 * names, prefixed with `rheo:`, are the `node:diagnostics_channel` channels.
 */
export interface RheoEventMap {
  lease: [LeaseEvent];
  ack: [AckEvent];
  retry: [RetryEvent];
  'dead-letter': [DeadLetterEvent];
  'lease-lost': [LeaseLostEvent];
  'settle-error': [SettleErrorEvent];
  'fetch-error': [FetchErrorEvent];
  'handler-error': [HandlerErrorEvent];
  drain: [DrainEvent];
  'member-join': [MemberJoinEvent];
  'member-leave': [MemberLeaveEvent];
  rebalance: [RebalanceEvent];
}

export type RheoEventName = keyof RheoEventMap;

/**
 * A lease-scoped event as the consumer emits it in process: the published
 * payload plus the lease's `leaseId`, so a caller can tie a settle to the
 * lease it settled. The channels never carry it (see {@link LeaseEventInfo}).
 */
export type WithLeaseId<E> = E & { readonly leaseId: string };

/** A renewal round failed for another reason than `stale_lease`; the leases are kept and retried sooner. */
export interface RenewErrorEvent {
  readonly stream: string;
  readonly group: string;
  readonly consumerId: string;
  readonly error: RheoError;
  /** The leases whose renewal failed. */
  readonly leaseIds: readonly string[];
}

/**
 * Event name → listener arguments of a `Consumer`: the channel payloads, with
 * `leaseId` on the lease-scoped ones, plus `renew-error` (emitted only).
 */
export interface ConsumerEventMap {
  lease: [WithLeaseId<LeaseEvent>];
  ack: [WithLeaseId<AckEvent>];
  retry: [WithLeaseId<RetryEvent>];
  'dead-letter': [WithLeaseId<DeadLetterEvent>];
  'lease-lost': [WithLeaseId<LeaseLostEvent>];
  'settle-error': [WithLeaseId<SettleErrorEvent>];
  'fetch-error': [FetchErrorEvent];
  'renew-error': [RenewErrorEvent];
  'handler-error': [HandlerErrorEvent];
  drain: [DrainEvent];
}

/** The lease-scoped part of an event: no payload, no metadata, no fencing token. */
export function leaseInfo(lease: Lease<unknown>): LeaseEventInfo {
  return {
    stream: lease.stream,
    group: lease.group,
    consumerId: lease.consumerId,
    eventId: lease.event.id,
    eventType: lease.event.type,
    partition: lease.event.partition,
    sequence: lease.event.sequence,
    attempt: lease.attempt,
  };
}

/** `leaseInfo` plus the `leaseId`: for events emitted in process only, never published. */
export function emittedLeaseInfo(lease: Lease<unknown>): WithLeaseId<LeaseEventInfo> {
  return { ...leaseInfo(lease), leaseId: lease.leaseId };
}
