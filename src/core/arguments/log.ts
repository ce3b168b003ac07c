import type { NormalizedQuery, PreparedAppend } from '../backend.js';
import type { Clock } from '../clock.js';
import { RheoError, invalidArgument } from '../errors.js';
import { MAX_CONFIGURABLE_BYTES, eventTooLarge } from '../limits.js';
import { assertLineageKeys, lineageOf, withCorrelation } from '../lineage.js';
import { decodeQueryCursor } from '../query-cursor.js';
import type { AppendInput, JsonObject, JsonValue, QueryOptions } from '../types.js';
import {
  assertDate,
  assertInteger,
  assertJson,
  assertJsonObject,
  assertPlainObject,
  assertString,
  describe,
  frozenJsonCopy,
  instanceProblem,
  optionalInteger,
  readingJson,
  type JsonBudget,
} from '../validation.js';
import { MAX_PARTITIONS } from './common.js';

/* The log's arguments: append inputs with their size limits, and queries. */

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
