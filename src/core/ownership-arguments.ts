import { assertKnownKeys, optionKeys } from './option-keys.js';
import type { CallOptions } from './types.js';
import type { CommitOp, HeartbeatRequest, OwnershipFence } from './backend.js';
import { MAX_LEASE_MS, MAX_PARTITIONS, messageOf, normalizeReason } from './arguments.js';
import { invalidArgument } from './errors.js';
import { assertInteger, assertName, assertString, describe } from './validation.js';

/** What a caller passes to fence an ownership call: a member's partition as its heartbeat returned it. */
export interface OwnershipFenceInput {
  stream: string;
  group: string;
  partition: number;
  memberId: string;
  generation: number;
}

export interface CommitInput extends OwnershipFenceInput {
  upTo: number;
  /** Events in `(frontier, upTo]` that failed for good; `reason` is stored as a nack reason is. */
  deadLetters?: Array<{ sequence: number; attempt: number; reason?: unknown }>;
}

export interface HeartbeatOptions extends CallOptions {
  memberId: string;
  /** Default 10 s. */
  sessionMs?: number;
  /** Default 30 s. */
  rebalanceTimeoutMs?: number;
}

export const DEFAULT_SESSION_MS = 10_000;
export const DEFAULT_REBALANCE_TIMEOUT_MS = 30_000;

export function assertMemberId(value: unknown): asserts value is string {
  assertString('memberId', value, { min: 1, max: 200 });
}

const HEARTBEAT_KEYS = optionKeys<HeartbeatOptions>()('memberId', 'sessionMs', 'rebalanceTimeoutMs', 'signal', 'timeoutMs');

export function heartbeatRequest(options: HeartbeatOptions): HeartbeatRequest {
  if (options === null || typeof options !== 'object') throw invalidArgument(`heartbeat expects { memberId, sessionMs?, rebalanceTimeoutMs? }, got ${describe(options)}`);
  assertKnownKeys('heartbeat options', options, HEARTBEAT_KEYS);
  const { memberId, sessionMs = DEFAULT_SESSION_MS, rebalanceTimeoutMs = DEFAULT_REBALANCE_TIMEOUT_MS } = options;
  assertMemberId(memberId);
  assertInteger('sessionMs', sessionMs, { min: 1, max: MAX_LEASE_MS });
  assertInteger('rebalanceTimeoutMs', rebalanceTimeoutMs, { min: 0, max: MAX_LEASE_MS });
  return { memberId, sessionMs, rebalanceTimeoutMs };
}

/** Reads each field once (a Proxy or getter may change between reads) and checks it. */
export function ownershipFence(value: unknown, what: string): OwnershipFence {
  if (value === null || typeof value !== 'object') throw invalidArgument(`${what} expects { stream, group, partition, memberId, generation }, got ${describe(value)}`);
  let stream: unknown, group: unknown, partition: unknown, memberId: unknown, generation: unknown;
  try {
    ({ stream, group, partition, memberId, generation } = value as Record<string, unknown>);
  } catch (error) {
    throw invalidArgument(`${what} could not read its argument: ${messageOf(error)}`, { cause: error });
  }
  assertName('stream', stream);
  assertName('group', group);
  assertInteger(`${what} partition`, partition, { max: MAX_PARTITIONS - 1 });
  assertMemberId(memberId);
  assertInteger(`${what} generation`, generation, { min: 0 });
  return { stream, group, partition, memberId, generation };
}

export function commitOp(value: unknown, what: string): CommitOp {
  const fence = ownershipFence(value, what);
  let upTo: unknown, deadLetters: unknown;
  try {
    ({ upTo, deadLetters } = value as Record<string, unknown>);
  } catch (error) {
    throw invalidArgument(`${what} could not read its argument: ${messageOf(error)}`, { cause: error });
  }
  assertInteger(`${what} upTo`, upTo, { min: 0 });
  const dead: CommitOp['deadLetters'] = [];
  if (deadLetters !== undefined) {
    if (!Array.isArray(deadLetters)) throw invalidArgument(`${what} deadLetters must be an array, got ${describe(deadLetters)}`);
    const seen = new Set<number>();
    for (const [i, d] of (deadLetters as unknown[]).entries()) {
      if (d === null || typeof d !== 'object') throw invalidArgument(`${what} deadLetters[${i}] must be { sequence, attempt, reason? }`);
      const { sequence, attempt, reason } = d as Record<string, unknown>;
      assertInteger(`${what} deadLetters[${i}].sequence`, sequence, { min: 1, max: upTo });
      assertInteger(`${what} deadLetters[${i}].attempt`, attempt, { min: 1 });
      if (seen.has(sequence)) throw invalidArgument(`${what} deadLetters names sequence ${sequence} twice`);
      seen.add(sequence);
      dead.push({ sequence, attempt, reason: normalizeReason(reason) });
    }
  }
  return { ...fence, upTo, deadLetters: dead };
}

/** Two ops on one partition in one call would race each other inside the backend's single write. */
export function assertDistinctPartitions(ops: OwnershipFence[], what: string): void {
  const seen = new Set<string>();
  for (const op of ops) {
    const key = `${op.stream}\u0000${op.group}\u0000${op.partition}`;
    if (seen.has(key)) throw invalidArgument(`${what} names partition ${op.partition} of group "${op.group}" on stream "${op.stream}" twice`);
    seen.add(key);
  }
}
