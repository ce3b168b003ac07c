import type {
  GroupStart,
  LeaseRef,
  NormalizedQuery,
  NormalizedReplay,
  PreparedAppend,
  RetentionPolicy,
  ReplayQuery,
  SettleOp,
  TrimRequest,
} from './backend.js';
import type { Clock } from './clock.js';
import { RheoError, invalidArgument } from './errors.js';
import { decodeQueryCursor } from './query-cursor.js';
import type { AppendInput, JsonObject, JsonValue, QueryOptions, SettleRequest } from './types.js';
import {
  assertDate,
  assertInteger,
  assertJson,
  assertJsonObject,
  assertName,
  assertPlainObject,
  assertString,
  describe,
  frozenJsonCopy,
  instanceProblem,
  optionalInteger,
  readingJson,
  type JsonBudget,
} from './validation.js';
import { MAX_CONFIGURABLE_BYTES, eventTooLarge } from './limits.js';
import { assertLineageKeys, lineageOf, withCorrelation } from './lineage.js';

/*
 * Argument normalisation for the facade: every public call's input is checked
 * and turned into the plain values the backend contract expects, so a call that
 * fails here reaches no backend and writes nothing.
 */

export const MAX_LIMIT = 10_000;
export const MAX_PARTITIONS = 4096;
export const MAX_LEASE_MS = 7 * 24 * 3600_000;
const EMPTY_METADATA: JsonObject = Object.freeze({});

/**
 * Validates one append input into what the backend stores; payload and
 * metadata become frozen copies, and their size (json-size.ts) must not pass
 * `maxEventBytes` (`event_too_large`, counted only until it passes).
 */
export function prepareAppend(
  clock: Clock,
  input: AppendInput<unknown>,
  what: string,
  limits: { stream: string; maxEventBytes: number },
): PreparedAppend {
  return readingJson(what, () => prepareInput(clock, input, what, limits));
}

function prepareInput(
  clock: Clock,
  input: AppendInput<unknown>,
  what: string,
  { stream, maxEventBytes }: { stream: string; maxEventBytes: number },
): PreparedAppend {
  assertPlainObject(what, input);
  if (!('payload' in input) || input.payload === undefined) {
    throw invalidArgument(`${what}.payload is required and must be JSON (undefined is not JSON)`);
  }
  const budget: JsonBudget = {
    bytes: 0,
    limit: maxEventBytes,
    onOverflow: (bytes) => eventTooLarge(stream, what, bytes, maxEventBytes, true),
  };
  const payload = frozenJsonCopy(`${what}.payload`, input.payload, budget);
  let type = 'event';
  if (input.type !== undefined) {
    assertString(`${what}.type`, input.type);
    type = input.type;
  }
  let key: string | null = null;
  if (input.key !== undefined && input.key !== null) {
    assertString(`${what}.key`, input.key, { min: 0, max: 1024 });
    key = input.key;
  }
  const { derived, explicit } = lineageOf(input, what);
  let metadata: JsonObject = EMPTY_METADATA;
  const given: unknown = input.metadata;
  if (given !== undefined) assertPlainObject(`${what}.metadata`, given);
  if (derived !== null || explicit !== null) {
    // The caller's metadata is spread between the two, so its own keys beat what causedBy derives.
    // A spread keeps only own keys: refuse a class instance (a Map, a Date) here, as the copy would.
    const instance = given === undefined ? null : instanceProblem(`${what}.metadata`, given as object);
    if (instance) throw invalidArgument(instance);
    const merged = { ...derived, ...(given as JsonObject | undefined), ...explicit };
    metadata = frozenJsonCopy(`${what}.metadata`, merged, budget) as JsonObject;
  } else if (given !== undefined) {
    metadata = frozenJsonCopy(`${what}.metadata`, given, budget) as JsonObject;
  } else {
    spendEmptyMetadata(budget);
  }
  assertLineageKeys(what, metadata);
  let id: string | null = null;
  if (input.id !== undefined) {
    assertString(`${what}.id`, input.id);
    id = input.id;
  }
  let partition: number | null = null;
  if (input.partition !== undefined) {
    assertInteger(`${what}.partition`, input.partition, { max: MAX_PARTITIONS });
    partition = input.partition;
  }
  let timestamp: Date;
  if (input.timestamp !== undefined) {
    assertDate(`${what}.timestamp`, input.timestamp);
    timestamp = new Date(input.timestamp.getTime());
  } else {
    timestamp = new Date(clock.now());
  }
  return { id, type, key, payload, metadata, partition, timestamp, size: budget.bytes };
}

/** `{}`: two bytes, counted like any metadata so the size does not depend on whether it was given. */
function spendEmptyMetadata(budget: JsonBudget): void {
  budget.bytes += 2;
  if (budget.bytes > budget.limit) throw budget.onOverflow(budget.bytes);
}

/** An `appendBatch` whose events add up to more than `maxBatchBytes` is refused whole. */
export function assertBatchSize(stream: string, prepared: PreparedAppend[], maxBatchBytes: number): void {
  let bytes = 0;
  for (const p of prepared) bytes += p.size;
  if (bytes > maxBatchBytes) {
    throw new RheoError(
      'event_too_large',
      `appendBatch to stream "${stream}" is ${bytes} bytes of payload and metadata in ${prepared.length} events, over limits.maxBatchBytes of ${maxBatchBytes}`,
      { stream },
    );
  }
}

export function assertOptions(what: string, options: unknown): void {
  if (options !== undefined) assertPlainObject(what, options);
}

/** What a caller's getter or proxy threw, as text; reading that may throw too. */
export function messageOf(error: unknown): string {
  try {
    return error instanceof Error ? String(error.message) : String(error);
  } catch {
    return 'an unreadable value was thrown';
  }
}

/**
 * Reads the fields fencing needs from a caller's lease, each exactly once, and
 * checks the values read. Once only, because a lease may be a Proxy or carry
 * getters: a value checked on one read and sent from another could differ,
 * and a getter that throws must become this item's `invalid_argument`, not a
 * TypeError that fails a whole batch.
 */
export function leaseRef(lease: unknown, what: string): LeaseRef {
  if (lease === null || typeof lease !== 'object') throw invalidArgument(`${what} expects a lease, got ${describe(lease)}`);
  let leaseId: unknown, stream: unknown, group: unknown, partition: unknown, sequence: unknown;
  try {
    ({ leaseId, stream, group } = lease as Record<string, unknown>);
    const event: unknown = (lease as Record<string, unknown>).event;
    if (event !== null && typeof event === 'object') ({ partition, sequence } = event as Record<string, unknown>);
  } catch (error) {
    throw invalidArgument(`${what} could not read the lease: ${messageOf(error)}`, { cause: error });
  }
  if (
    typeof leaseId !== 'string' ||
    typeof stream !== 'string' ||
    typeof group !== 'string' ||
    typeof partition !== 'number' ||
    typeof sequence !== 'number'
  ) {
    throw invalidArgument(`${what} expects a lease returned by fetch (leaseId, stream, group, event.partition, event.sequence)`);
  }
  assertName('stream', stream);
  assertName('group', group);
  assertString('leaseId', leaseId, { min: 1, max: 200 });
  // A fetched lease id never holds these; PostgreSQL text cannot even carry U+0000.
  if (leaseId.includes('\u0000') || !leaseId.isWellFormed()) {
    throw invalidArgument(`leaseId contains U+0000 or a lone surrogate, so no fetch returned it`);
  }
  assertInteger('lease event.partition', partition, { max: MAX_PARTITIONS });
  assertInteger('lease event.sequence', sequence, { min: 1 });
  return { stream, group, partition, sequence, leaseId };
}

/** Longest stored nack/reject reason, in UTF-16 code units. */
export const MAX_REASON_LENGTH = 4000;

/**
 * A nack/reject reason is a diagnostic and never makes a settle fail
 * (DESIGN.md §6): an Error gives its message, anything else its `String()`
 * (or a description when that throws); U+0000 and lone surrogates, which
 * PostgreSQL cannot store, become U+FFFD on every backend alike; a reason
 * longer than `MAX_REASON_LENGTH` is cut there (never inside a surrogate pair).
 */
export function normalizeReason(reason: unknown): string | null {
  if (reason === undefined || reason === null) return null;
  let text: string;
  if (typeof reason === 'string') {
    text = reason;
  } else {
    try {
      const value: unknown = reason instanceof Error ? reason.message || reason.name : String(reason);
      text = typeof value === 'string' ? value : safeDescribe(reason);
    } catch {
      text = safeDescribe(reason);
    }
  }
  if (text.length > MAX_REASON_LENGTH) {
    const last = text.charCodeAt(MAX_REASON_LENGTH - 1);
    text = text.slice(0, last >= 0xd800 && last <= 0xdbff ? MAX_REASON_LENGTH - 1 : MAX_REASON_LENGTH);
  }
  return text.replaceAll('\u0000', '\ufffd').toWellFormed();
}

function safeDescribe(value: unknown): string {
  try {
    return describe(value);
  } catch {
    return 'an unreadable value';
  }
}

/**
 * Validates one settle request into the backend's fenced op. Every op is
 * built as one literal of one shape (`reason` null and `delayMs` 0 where the
 * kind has none): on Node 20 `{ ...ref, kind }` costs about 2 µs, because
 * adding a field to a spread copy leaves V8's fast path, and this runs once
 * per settled lease.
 */
export function settleOp(request: SettleRequest, what: string): SettleOp {
  if (request === null || typeof request !== 'object') throw invalidArgument(`${what} expects a settle request, got ${describe(request)}`);
  let kind: unknown, lease: unknown, rawReason: unknown, rawDelayMs: unknown;
  try {
    ({ kind, lease } = request as Record<string, unknown>);
    if (kind === 'nack' || kind === 'reject') rawReason = (request as Record<string, unknown>).reason;
    if (kind === 'nack') rawDelayMs = (request as Record<string, unknown>).delayMs;
  } catch (error) {
    throw invalidArgument(`${what} could not read the settle request: ${messageOf(error)}`, {
      cause: error,
    });
  }
  const ref = leaseRef(lease, what);
  let reason: string | null = null;
  let delayMs = 0;
  switch (kind) {
    case 'ack':
    case 'release':
      break;
    case 'reject':
      reason = normalizeReason(rawReason);
      break;
    case 'nack':
      delayMs = optionalInteger('delayMs', rawDelayMs, 0, { max: MAX_LEASE_MS });
      reason = normalizeReason(rawReason);
      break;
    default:
      throw invalidArgument(`${what}: kind must be ack, nack, reject or release, got ${describe(kind)}`);
  }
  return {
    stream: ref.stream,
    group: ref.group,
    partition: ref.partition,
    sequence: ref.sequence,
    leaseId: ref.leaseId,
    kind,
    reason,
    delayMs,
  } as SettleOp;
}

export function normalizePartitions(partitions: unknown): number[] | null {
  if (partitions === undefined) return null;
  if (!Array.isArray(partitions) || partitions.length === 0) {
    throw invalidArgument(`partitions must be a non-empty array of partition numbers, got ${describe(partitions)}`);
  }
  for (const p of partitions) assertInteger('partitions[]', p, { max: MAX_PARTITIONS });
  return [...new Set(partitions as number[])].sort((a, b) => a - b);
}

export function normalizeStart(startAfter: unknown, startAt: unknown): GroupStart {
  if (startAfter !== undefined && startAt !== undefined) {
    throw invalidArgument('give either startAfter or startAt, not both');
  }
  if (startAt !== undefined) {
    assertDate('startAt', startAt);
    return { kind: 'at', at: new Date(startAt.getTime()) };
  }
  if (startAfter === undefined) return { kind: 'after', after: 0, perPartition: {} };
  if (typeof startAfter === 'number') {
    assertInteger('startAfter', startAfter);
    return { kind: 'after', after: startAfter, perPartition: {} };
  }
  assertPlainObject('startAfter', startAfter);
  const perPartition: Record<number, number> = {};
  for (const [k, v] of Object.entries(startAfter)) {
    const p = Number(k);
    assertInteger(`startAfter partition key ${JSON.stringify(k)}`, /^\d+$/.test(k) ? p : NaN, { max: MAX_PARTITIONS });
    assertInteger(`startAfter[${k}]`, v);
    perPartition[p] = v;
  }
  return { kind: 'after', after: 0, perPartition };
}

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

export function normalizeQuery(stream: string, o: QueryOptions, defaultMaxBytes: number): NormalizedQuery {
  return readingJson('query options', () => queryOf(stream, o, defaultMaxBytes));
}

function queryOf(stream: string, o: QueryOptions, defaultMaxBytes: number): NormalizedQuery {
  let types: string[] | null = null;
  if (o.type !== undefined) {
    const list = Array.isArray(o.type) ? o.type : [o.type];
    if (list.length === 0) throw invalidArgument('query type must be a string or a non-empty array of strings');
    for (const t of list) assertString('query type', t);
    types = [...new Set(list)];
  }
  let key: string | null = null;
  if (o.key !== undefined) {
    assertString('query key', o.key, { min: 0, max: 1024 });
    key = o.key;
  }
  let wherePayload: JsonValue | undefined;
  let whereMetadata: NormalizedQuery['whereMetadata'];
  if (o.where !== undefined) {
    assertPlainObject('query where', o.where);
    for (const k of Object.keys(o.where)) {
      if (k !== 'payload' && k !== 'metadata') {
        throw invalidArgument(`query where accepts payload and metadata, got ${JSON.stringify(k)}`);
      }
    }
    if (o.where.payload !== undefined) {
      assertJson('query where.payload', o.where.payload);
      wherePayload = o.where.payload;
    }
    if (o.where.metadata !== undefined) {
      assertJsonObject('query where.metadata', o.where.metadata);
      whereMetadata = o.where.metadata;
    }
  }
  const correlationId: unknown = o.correlationId;
  if (correlationId !== undefined) whereMetadata = withCorrelation(whereMetadata, correlationId);
  let from: Date | null = null;
  let to: Date | null = null;
  if (o.from !== undefined) {
    assertDate('query from', o.from);
    from = o.from;
  }
  if (o.to !== undefined) {
    assertDate('query to', o.to);
    to = o.to;
  }
  const afterSequence = o.afterSequence === undefined ? null : optionalInteger('afterSequence', o.afterSequence, 0);
  const untilSequence = o.untilSequence === undefined ? null : optionalInteger('untilSequence', o.untilSequence, 0);
  const partition = o.partition === undefined ? null : optionalInteger('partition', o.partition, 0, { max: MAX_PARTITIONS });
  if (o.order !== undefined && o.order !== 'asc' && o.order !== 'desc') {
    throw invalidArgument(`query order must be 'asc' or 'desc', got ${describe(o.order)}`);
  }
  const limit = optionalInteger('limit', o.limit, 100, { min: 1, max: 1000 });
  const maxBytes = optionalInteger('maxBytes', o.maxBytes, defaultMaxBytes, { min: 1, max: MAX_CONFIGURABLE_BYTES });
  let cursor = null;
  if (o.cursor !== undefined && o.cursor !== null) {
    assertString('query cursor', o.cursor, { min: 1, max: 500 });
    cursor = decodeQueryCursor(stream, o.cursor);
  }
  return {
    types,
    key,
    wherePayload,
    whereMetadata,
    from,
    to,
    afterSequence,
    untilSequence,
    partition,
    order: o.order ?? 'asc',
    limit,
    maxBytes,
    cursor,
  };
}

/** Longest retention age accepted: about 1,000 years, so `now - maxAgeMs` stays a valid date. */
export const MAX_RETENTION_AGE_MS = 1000 * 365 * 24 * 3600_000;

/**
 * A retention policy: `null` (keep everything) or an object with at least
 * one of `maxAgeMs` (>= 1) and `maxEvents` (>= 0); each may be null/absent.
 */
export function normalizeRetention(value: unknown): RetentionPolicy | null {
  if (value === null) return null;
  assertPlainObject('retention', value);
  for (const key of Object.keys(value)) {
    if (key !== 'maxAgeMs' && key !== 'maxEvents') {
      throw invalidArgument(`retention accepts maxAgeMs and maxEvents, got an unknown key ${JSON.stringify(key)}`);
    }
  }
  const maxAgeMs = value.maxAgeMs ?? null;
  const maxEvents = value.maxEvents ?? null;
  if (maxAgeMs !== null) assertInteger('retention.maxAgeMs', maxAgeMs, { min: 1, max: MAX_RETENTION_AGE_MS });
  if (maxEvents !== null) assertInteger('retention.maxEvents', maxEvents, { min: 0 });
  if (maxAgeMs === null && maxEvents === null) {
    throw invalidArgument('retention needs maxAgeMs or maxEvents (pass null to keep every event)');
  }
  return { maxAgeMs, maxEvents };
}

/** `rheo.trim` options into a backend request (without `limit`). */
export function normalizeTrim(options: unknown): Omit<TrimRequest, 'limit'> {
  if (options === undefined) return { before: null, keep: null, force: false };
  assertPlainObject('trim options', options);
  for (const key of Object.keys(options)) {
    if (key !== 'before' && key !== 'keep' && key !== 'force' && key !== 'signal' && key !== 'timeoutMs') {
      throw invalidArgument(`trim accepts before, keep, force, signal and timeoutMs, got an unknown key ${JSON.stringify(key)}`);
    }
  }
  let before: Date | null = null;
  if (options.before !== undefined) {
    assertDate('trim before', options.before);
    before = new Date(options.before.getTime());
  }
  let keep: number | null = null;
  if (options.keep !== undefined) {
    assertInteger('trim keep', options.keep);
    keep = options.keep;
  }
  if (options.force !== undefined && typeof options.force !== 'boolean') {
    throw invalidArgument(`trim force must be a boolean, got ${describe(options.force)}`);
  }
  return { before, keep, force: options.force === true };
}

/** Destructive calls need `{ confirm: true }`; anything else is `confirm_required` and changes nothing. */
export function assertConfirmed(options: unknown, what: string, details: { stream: string; group?: string }): void {
  let confirmed = false;
  try {
    confirmed = options !== null && typeof options === 'object' && (options as { confirm?: unknown }).confirm === true;
  } catch {
    confirmed = false;
  }
  if (!confirmed) throw new RheoError('confirm_required', `${what}; pass { confirm: true }`, details);
}

/** An array's length, read once; an array-like Proxy whose traps throw is bad input, not a crash. */
export function arrayLength(what: string, items: unknown): number {
  try {
    if (Array.isArray(items)) return items.length;
  } catch (error) {
    throw invalidArgument(`${what} could not read its array: ${messageOf(error)}`, { cause: error });
  }
  throw invalidArgument(`${what} expects an array, got ${describe(items)}`);
}
