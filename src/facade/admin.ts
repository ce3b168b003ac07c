import type { TrimReport } from '../core/backend.js';
import { requireCapability } from '../core/capabilities.js';
import { MAX_PARTITIONS, assertConfirmed, assertOptions, normalizePartitions } from '../core/arguments/common.js';
import { normalizeRetention, normalizeStart, normalizeTrim } from '../core/arguments/admin.js';
import type { PingResult } from '../core/health.js';
import type {
  CallOptions,
  DeleteOptions,
  GroupInfo,
  GroupOptions,
  Retention,
  StreamInfo,
  StreamOptions,
  TrimOptions,
} from '../core/types.js';
import { assertName, optionalInteger } from '../core/validation.js';
import { trimInBatches } from '../retention/trim-batches.js';
import type { FacadeCalls } from './calls.js';

/*
 * The facade's administration: the schema and the store's health, the
 * instance's shutdown, streams and groups, retention and deletion. Each
 * function validates its arguments, then makes one backend call through
 * `FacadeCalls`; the documentation is on the `Rheo` methods of the same names.
 */

export async function migrate(calls: FacadeCalls, options: CallOptions): Promise<void> {
  calls.assertOpen();
  const scope = calls.scope('migrate options', options);
  await calls.call(() => calls.backend.migrate(), scope, { action: 'migrate', writes: true });
}

export async function ping(calls: FacadeCalls, options: CallOptions): Promise<PingResult> {
  calls.assertOpen();
  const scope = calls.scope('ping options', options);
  const started = performance.now();
  const schemaVersion = await calls.call(() => calls.backend.ping(), scope, { action: 'ping', writes: false });
  return { backend: calls.backend.name, roundTripMs: performance.now() - started, schemaVersion };
}

/**
 * Ends the instance: new calls fail at once, then every attached producer
 * and consumer ends (its settles still go through) with the background
 * trimmer, then settles are refused and the backend closes.
 */
export async function shutdown(
  calls: FacadeCalls,
  attached: ReadonlySet<() => Promise<void>>,
  trimmer: { close(): Promise<void> } | null,
): Promise<void> {
  calls.closeCalls();
  try {
    await Promise.allSettled([...[...attached].map((end) => end()), trimmer?.close()]);
  } finally {
    calls.closeSettles();
    calls.telemetry?.close();
    await calls.backend.close();
  }
}

// ---- streams and groups ---------------------------------------------------

export async function createStream(calls: FacadeCalls, name: string, options: StreamOptions): Promise<void> {
  calls.assertOpen();
  assertName('stream', name);
  assertOptions('createStream options', options);
  const partitions = optionalInteger('partitions', options.partitions, 1, { min: 1, max: MAX_PARTITIONS });
  const retention = options.retention === undefined ? null : normalizeRetention(options.retention);
  if (options.retention !== undefined) requireCapability(calls.backend, 'retention', 'createStream with a retention option');
  await calls.call(() => calls.backend.createStream(name, partitions, retention), calls.scope('createStream options', options), {
    action: `create stream "${name}"`,
    writes: true,
    stream: name,
  });
}

export async function listStreams(calls: FacadeCalls, options: CallOptions): Promise<StreamInfo[]> {
  calls.assertOpen();
  const scope = calls.scope('listStreams options', options);
  return calls.call(() => calls.backend.listStreams(), scope, { action: 'list streams', writes: false });
}

export async function createGroup(calls: FacadeCalls, stream: string, group: string, options: GroupOptions): Promise<void> {
  calls.assertOpen();
  assertName('stream', stream);
  assertName('group', group);
  assertOptions('createGroup options', options);
  const start = normalizeStart(options.startAfter, options.startAt);
  const maxAttempts = optionalInteger('maxAttempts', options.maxAttempts, calls.defaults.maxAttempts, {
    min: 1,
    max: 1_000_000,
  });
  const partitions = normalizePartitions(options.partitions);
  await calls.call(
    () => calls.backend.createGroup(stream, group, { start, maxAttempts, partitions }),
    calls.scope('createGroup options', options),
    { action: `create group "${group}" on stream "${stream}"`, writes: true, stream, group },
  );
}

export async function listGroups(calls: FacadeCalls, stream: string, options: CallOptions): Promise<string[]> {
  calls.assertOpen();
  assertName('stream', stream);
  const scope = calls.scope('listGroups options', options);
  return calls.call(() => calls.backend.listGroups(stream), scope, { action: `list groups of stream "${stream}"`, writes: false, stream });
}

export async function groupInfo(calls: FacadeCalls, stream: string, group: string, options: CallOptions): Promise<GroupInfo> {
  calls.assertOpen();
  assertName('stream', stream);
  assertName('group', group);
  const scope = calls.scope('groupInfo options', options);
  const info = await calls.call(() => calls.backend.groupInfo(stream, group), scope, {
    action: `describe group "${group}" of stream "${stream}"`,
    writes: false,
    stream,
    group,
  });
  const membership = await calls.membershipIfOwned(stream, group);
  return membership ? { ...info, membership } : info;
}

// ---- retention and deletion -----------------------------------------------

export async function setRetention(calls: FacadeCalls, stream: string, retention: Retention | null, options: CallOptions): Promise<void> {
  calls.assertOpen();
  assertName('stream', stream);
  const policy = normalizeRetention(retention);
  const scope = calls.scope('setRetention options', options);
  const backend = calls.retention('setRetention');
  await calls.call(() => backend.setRetention(stream, policy), scope, { action: `set retention of stream "${stream}"`, writes: true, stream });
}

export async function trim(calls: FacadeCalls, stream: string, options: TrimOptions): Promise<TrimReport> {
  calls.assertOpen();
  assertName('stream', stream);
  const request = normalizeTrim(options);
  const scope = calls.scope('trim options', options);
  calls.retention('trim');
  return calls.call(() => trimInBatches(calls.backend, stream, { ...request, limit: calls.trimBatchSize }), scope, {
    action: `trim stream "${stream}"`,
    writes: true,
    stream,
  });
}

export async function deleteGroup(calls: FacadeCalls, stream: string, group: string, options: DeleteOptions): Promise<void> {
  calls.assertOpen();
  assertName('stream', stream);
  assertName('group', group);
  assertConfirmed(options, `deleteGroup on stream "${stream}", group "${group}" deletes the group's progress and dead letters`, { stream, group });
  const scope = calls.scope('deleteGroup options', options);
  const backend = calls.retention('deleteGroup');
  await calls.call(() => backend.deleteGroup(stream, group), scope, { action: `delete group "${group}" of stream "${stream}"`, writes: true, stream, group });
}

export async function deleteStream(calls: FacadeCalls, stream: string, options: DeleteOptions): Promise<void> {
  calls.assertOpen();
  assertName('stream', stream);
  assertConfirmed(options, `deleteStream on stream "${stream}" deletes its events and every group`, { stream });
  const scope = calls.scope('deleteStream options', options);
  const backend = calls.retention('deleteStream');
  await calls.call(() => backend.deleteStream(stream), scope, { action: `delete stream "${stream}"`, writes: true, stream });
}
