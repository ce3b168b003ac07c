import { MAX_LIMIT, assertConfirmed, assertOptions, normalizePartitions } from '../core/arguments/common.js';
import { normalizeEventIds, normalizeReplay } from '../core/arguments/operations.js';
import { normalizeStart } from '../core/arguments/admin.js';
import type {
  DeadLetter,
  DeadLetterOptions,
  JsonValue,
  LagOptions,
  LagReport,
  RedriveOptions,
  ReplayOptions,
  ReplaySpec,
  ResetOptions,
} from '../core/types.js';
import { assertName, assertString, optionalInteger } from '../core/validation.js';
import type { FacadeCalls } from './calls.js';

/*
 * The facade's progress and operations on a group: lag, replay, reset, dead
 * letters and their redrive. The documentation is on the `Rheo` methods of
 * the same names.
 */

export async function lag(calls: FacadeCalls, stream: string, group: string, options: LagOptions): Promise<LagReport> {
  calls.assertOpen();
  assertName('stream', stream);
  assertName('group', group);
  assertOptions('lag options', options);
  const partitions = normalizePartitions(options.partitions);
  const scope = calls.scope('lag options', options);
  const report = await calls.call(() => calls.backend.lag(stream, group, partitions), scope, {
    action: `lag of group "${group}" on stream "${stream}"`,
    writes: false,
    stream,
    group,
  });
  const membership = await calls.membershipIfOwned(stream, group);
  return membership ? { ...report, membership } : report;
}

export async function replay(calls: FacadeCalls, stream: string, group: string, spec: ReplaySpec, options: ReplayOptions): Promise<void> {
  calls.assertOpen();
  assertName('stream', stream);
  assertName('group', group);
  assertOptions('replay options', options);
  const normalized = normalizeReplay(stream, spec);
  const partitions = normalizePartitions(options.partitions);
  const scope = calls.scope('replay options', options);
  await calls.call(() => calls.backend.replay(stream, group, normalized, partitions), scope, {
    action: `replay group "${group}" of stream "${stream}"`,
    writes: true,
    stream,
    group,
  });
}

export async function resetGroup(calls: FacadeCalls, stream: string, group: string, options: ResetOptions): Promise<void> {
  calls.assertOpen();
  assertName('stream', stream);
  assertName('group', group);
  assertConfirmed(options, `resetGroup on stream "${stream}", group "${group}" drops all progress`, { stream, group });
  const start = normalizeStart(options.startAfter, options.startAt);
  const partitions = normalizePartitions(options.partitions);
  const scope = calls.scope('resetGroup options', options);
  await calls.call(() => calls.backend.resetGroup(stream, group, start, partitions), scope, {
    action: `reset group "${group}" of stream "${stream}"`,
    writes: true,
    stream,
    group,
  });
}

export async function deadLetters<T extends JsonValue>(
  calls: FacadeCalls,
  stream: string,
  group: string,
  options: DeadLetterOptions,
): Promise<DeadLetter<T>[]> {
  calls.assertOpen();
  assertName('stream', stream);
  assertName('group', group);
  assertOptions('deadLetters options', options);
  const limit = optionalInteger('limit', options.limit, 100, { min: 1, max: MAX_LIMIT });
  let after: string | null = null;
  if (options.after !== undefined) {
    assertString('after', options.after, { min: 1, max: 64 });
    after = options.after;
  }
  const maxBytes = calls.maxBytes(options.maxBytes);
  const scope = calls.scope('deadLetters options', options);
  return (await calls.call(() => calls.backend.deadLetters(stream, group, limit, after, maxBytes), scope, {
    action: `list dead letters of group "${group}" on stream "${stream}"`,
    writes: false,
    stream,
    group,
  })) as DeadLetter<T>[];
}

export async function redrive(calls: FacadeCalls, stream: string, group: string, options: RedriveOptions): Promise<number> {
  calls.assertOpen();
  assertName('stream', stream);
  assertName('group', group);
  assertOptions('redrive options', options);
  const eventIds = options.eventIds === undefined ? null : normalizeEventIds(options.eventIds);
  const scope = calls.scope('redrive options', options);
  return calls.call(() => calls.backend.redrive(stream, group, eventIds), scope, {
    action: `redrive dead letters of group "${group}" on stream "${stream}"`,
    writes: true,
    stream,
    group,
  });
}
