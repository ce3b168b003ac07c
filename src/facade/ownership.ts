import type { GroupMembership, MemberView } from '../core/backend.js';
import { MAX_LIMIT, assertOptions } from '../core/arguments/common.js';
import {
  assertDistinctPartitions,
  assertMemberId,
  commitOp,
  heartbeatRequest,
  ownershipFence,
  type CommitInput,
  type HeartbeatOptions,
  type OwnershipFenceInput,
} from '../core/ownership-arguments.js';
import type { CallOptions, JsonValue, ReadOptions, RheoEvent, SettleResult } from '../core/types.js';
import { assertName, optionalInteger } from '../core/validation.js';
import type { FacadeCalls } from './calls.js';

/*
 * The facade's partition ownership: membership by heartbeat, fenced reads
 * of owned partitions and offset commits. Every call needs the
 * `partitionOwnership` capability. The documentation is on the `Rheo`
 * methods of the same names.
 */

export async function heartbeat(calls: FacadeCalls, stream: string, group: string, options: HeartbeatOptions): Promise<MemberView> {
  calls.assertOpen();
  assertName('stream', stream);
  assertName('group', group);
  const request = heartbeatRequest(options);
  const backend = calls.ownership('heartbeat');
  const scope = calls.scope('heartbeat options', options);
  return calls.call(() => backend.heartbeat(stream, group, request), scope, { action: `heartbeat in group "${group}" of stream "${stream}"`, writes: true, stream, group });
}

export async function leaveGroup(calls: FacadeCalls, stream: string, group: string, memberId: string, options: CallOptions): Promise<void> {
  calls.assertOpen();
  assertName('stream', stream);
  assertName('group', group);
  assertMemberId(memberId);
  const backend = calls.ownership('leaveGroup');
  const scope = calls.scope('leaveGroup options', options);
  await calls.call(() => backend.leaveGroup(stream, group, memberId), scope, { action: `leave group "${group}" of stream "${stream}"`, writes: true, stream, group });
}

export function releasePartitions(calls: FacadeCalls, fences: OwnershipFenceInput[], options: CallOptions): Promise<SettleResult[]> {
  calls.assertCanSettle();
  const backend = calls.ownership('releasePartitions');
  const scope = calls.scope('releasePartitions options', options);
  return calls.perItem('releasePartitions', scope, fences, (f) => ownershipFence(f, 'releasePartitions'), (valid) =>
    backend.releasePartitions(valid),
  );
}

export async function readOwned<T extends JsonValue>(calls: FacadeCalls, fence: OwnershipFenceInput, options: ReadOptions): Promise<RheoEvent<T>[]> {
  calls.assertOpen();
  const f = ownershipFence(fence, 'readOwned');
  assertOptions('readOwned options', options);
  const after = optionalInteger('after', options.after, 0);
  const limit = optionalInteger('limit', options.limit, 100, { min: 1, max: MAX_LIMIT });
  const maxBytes = calls.maxBytes(options.maxBytes);
  const backend = calls.ownership('readOwned');
  const scope = calls.scope('readOwned options', options);
  return (await calls.call(() => backend.readOwned(f, after, limit, maxBytes), scope)) as RheoEvent<T>[];
}

export function commit(calls: FacadeCalls, ops: CommitInput[], options: CallOptions): Promise<SettleResult[]> {
  calls.assertCanSettle();
  const backend = calls.ownership('commit');
  const scope = calls.scope('commit options', options);
  return calls.perItem('commit', scope, ops, (op) => commitOp(op, 'commit'), (valid) => {
    assertDistinctPartitions(valid, 'commit');
    return backend.commit(valid);
  });
}

export async function members(calls: FacadeCalls, stream: string, group: string, options: CallOptions): Promise<GroupMembership> {
  calls.assertOpen();
  assertName('stream', stream);
  assertName('group', group);
  const backend = calls.ownership('members');
  const scope = calls.scope('members options', options);
  return calls.call(() => backend.members(stream, group), scope, { action: `members of group "${group}" of stream "${stream}"`, writes: false, stream, group });
}
