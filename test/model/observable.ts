import type { RheoErrorCode } from '../../src/core/errors.js';
import { isRheoError } from '../../src/core/errors.js';
import type { DeadLetter, GroupInfo, JsonObject, JsonValue, Lease, RheoEvent } from '../../src/core/types.js';

/*
 * What the differential test compares: plain values with times as epoch
 * milliseconds and event ids in the model's naming, so `toEqual` between the
 * model and a backend is exact. Lease ids are random per backend and never
 * compared; the model names a lease by a handle instead (see differential.ts).
 */

export interface ObservedEvent {
  id: string;
  stream: string;
  partition: number;
  sequence: number;
  type: string;
  key: string | null;
  payload: JsonValue;
  metadata: JsonObject;
  timestamp: number;
}

export interface ObservedLease {
  receipt: string;
  stream: string;
  group: string;
  consumerId: string;
  attempt: number;
  leasedAt: number;
  expiresAt: number;
  event: ObservedEvent;
}

export interface ObservedDeadLetter {
  stream: string;
  group: string;
  attempt: number;
  reason: string | null;
  deadLetteredAt: number;
  event: ObservedEvent;
}

export interface ObservedPartition {
  frontier: number;
  highWatermark: number;
  lag: number;
  oldestUnsettledAt: number | null;
}

/** Everything a caller can see of one group, read after every step. */
export interface ObservedGroup {
  maxAttempts: number;
  lag: number;
  partitions: Record<number, ObservedPartition>;
  inflight: number;
  deadLetterCount: number;
  deadLetters: ObservedDeadLetter[];
  /** Open delivery state (invariant 7: bounded by the unsettled window). */
  storedDeliveries: number;
}

/** A call's outcome: its value, or the code of the `RheoError` it failed with. */
export type Outcome<T> = { ok: T } | { error: RheoErrorCode };

export type SettleOutcome = 'ok' | RheoErrorCode;
export type RenewOutcome = number | RheoErrorCode;

/** Maps a backend's event ids to the model's (generated ids differ per backend). */
export type IdMap = ReadonlyMap<string, string>;

export function observeEvent(e: RheoEvent, ids: IdMap): ObservedEvent {
  return {
    id: ids.get(e.id) ?? e.id,
    stream: e.stream,
    partition: e.partition,
    sequence: e.sequence,
    type: e.type,
    key: e.key,
    payload: e.payload,
    metadata: e.metadata,
    timestamp: e.timestamp.getTime(),
  };
}

export function observeLease(l: Lease, ids: IdMap): ObservedLease {
  return {
    receipt: l.receipt,
    stream: l.stream,
    group: l.group,
    consumerId: l.consumerId,
    attempt: l.attempt,
    leasedAt: l.leasedAt.getTime(),
    expiresAt: l.expiresAt.getTime(),
    event: observeEvent(l.event, ids),
  };
}

export function observeDeadLetter(d: DeadLetter, ids: IdMap): ObservedDeadLetter {
  return {
    stream: d.stream,
    group: d.group,
    attempt: d.attempt,
    reason: d.reason,
    deadLetteredAt: d.deadLetteredAt.getTime(),
    event: observeEvent(d.event, ids),
  };
}

export function observeGroup(
  info: GroupInfo,
  deadLetters: DeadLetter[],
  storedDeliveries: number,
  ids: IdMap,
): ObservedGroup {
  const partitions: Record<number, ObservedPartition> = {};
  for (const [p, v] of Object.entries(info.lag.partitions)) {
    partitions[Number(p)] = {
      frontier: v.frontier,
      highWatermark: v.highWatermark,
      lag: v.lag,
      oldestUnsettledAt: v.oldestUnsettledAt === null ? null : v.oldestUnsettledAt.getTime(),
    };
  }
  return {
    maxAttempts: info.maxAttempts,
    lag: info.lag.lag,
    partitions,
    inflight: info.inflight,
    deadLetterCount: info.deadLetters,
    deadLetters: deadLetters.map((d) => observeDeadLetter(d, ids)),
    storedDeliveries,
  };
}

/** Runs a call and turns a `RheoError` into its code; anything else is a test failure. */
export async function outcome<T>(call: () => Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: await call() };
  } catch (error) {
    if (isRheoError(error)) return { error: error.code };
    throw error;
  }
}
