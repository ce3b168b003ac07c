import type { NormalizedReplay, ReplayQuery } from '../backend.js';
import { invalidArgument } from '../errors.js';
import type { QueryOptions } from '../types.js';
import { assertDate, assertInteger, assertPlainObject, assertString, describe } from '../validation.js';
import { MAX_LIMIT } from './common.js';
import { normalizeQuery } from './log.js';

/* The operations' arguments: what a replay reopens, and the event ids of a replay or redrive. */

export function normalizeEventIds(ids: unknown): string[] {
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_LIMIT) {
    throw invalidArgument(`eventIds must be a non-empty array of at most ${MAX_LIMIT} ids, got ${describe(ids)}`);
  }
  for (const id of ids) assertString('eventIds[]', id);
  return [...new Set(ids as string[])];
}

const REPLAY_KINDS = 'exactly one of fromSequence, from, eventIds, query';
const REPLAY_QUERY_FIELDS = new Set(['type', 'key', 'where', 'correlationId', 'from', 'to']);

export function normalizeReplay(stream: string, spec: unknown): NormalizedReplay {
  assertPlainObject('replay spec', spec);
  const keys = Object.keys(spec).filter((k) => spec[k] !== undefined);
  if (keys.length !== 1) {
    throw invalidArgument(`replay spec must have ${REPLAY_KINDS}`);
  }
  if ('fromSequence' in spec && spec.fromSequence !== undefined) {
    assertInteger('fromSequence', spec.fromSequence, { min: 1 });
    return { kind: 'fromSequence', fromSequence: spec.fromSequence };
  }
  if ('from' in spec && spec.from !== undefined) {
    assertDate('from', spec.from);
    return { kind: 'from', from: new Date(spec.from.getTime()) };
  }
  if ('eventIds' in spec && spec.eventIds !== undefined) {
    return { kind: 'eventIds', eventIds: normalizeEventIds(spec.eventIds) };
  }
  if ('query' in spec && spec.query !== undefined) {
    return { kind: 'query', query: replayQuery(stream, spec.query) };
  }
  throw invalidArgument(`replay spec must have ${REPLAY_KINDS}`);
}

/** A replay's query: the filters of `query` only; paging, order and partition have no meaning here. */
function replayQuery(stream: string, query: unknown): ReplayQuery {
  assertPlainObject('replay query', query);
  for (const key of Object.keys(query)) {
    if (!REPLAY_QUERY_FIELDS.has(key)) {
      throw invalidArgument(
        `replay query accepts ${[...REPLAY_QUERY_FIELDS].join(', ')}, got ${JSON.stringify(key)} (scope a replay with its partitions option)`,
      );
    }
  }
  const q = normalizeQuery(stream, query as QueryOptions, 1);
  return { types: q.types, key: q.key, wherePayload: q.wherePayload, whereMetadata: q.whereMetadata, from: q.from, to: q.to };
}
