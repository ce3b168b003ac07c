import type { AppendOutcome, TransactionClient } from '../core/backend.js';
import { capability, requireCapability } from '../core/capabilities.js';
import { MAX_LIMIT, MAX_PARTITIONS, assertOptions } from '../core/arguments/common.js';
import { assertBatchSize, normalizeQuery, prepareAppend } from '../core/arguments/log.js';
import { RheoError, invalidArgument } from '../core/errors.js';
import { queryPages } from '../core/query-pages.js';
import type {
  AppendInput,
  AppendedEvent,
  CallOptions,
  JsonValue,
  QueryOptions,
  QueryResult,
  ReadOptions,
  RheoEvent,
} from '../core/types.js';
import { assertName, describe, optionalInteger } from '../core/validation.js';
import { RheoTransaction } from '../transaction/rheo-transaction.js';
import type { FacadeCalls } from './calls.js';

/*
 * The facade's log: appends, reads, queries, and the transaction binding
 * rheo's writes to the application's own. The documentation is on the `Rheo`
 * methods of the same names.
 */

export async function append<T extends JsonValue>(
  calls: FacadeCalls,
  stream: string,
  input: AppendInput<T>,
  options: CallOptions,
): Promise<AppendedEvent<T>> {
  calls.assertOpen();
  assertName('stream', stream);
  const prepared = prepareAppend(calls.clock, input, 'append input', {
    stream,
    maxEventBytes: calls.limits.maxEventBytes,
  });
  const scope = calls.scope('append options', options);
  const [outcome] = await calls.traced(
    calls.telemetry?.send(stream, [prepared], calls.limits),
    () => calls.backend.append(stream, [prepared]),
    scope,
    { action: `append to stream "${stream}"`, writes: true, stream },
  );
  if (!outcome) throw new RheoError('internal', `append to stream "${stream}" returned no event`, { stream });
  return appended<T>(outcome);
}

export async function appendBatch<T extends JsonValue>(
  calls: FacadeCalls,
  stream: string,
  inputs: AppendInput<T>[],
  options: CallOptions,
): Promise<AppendedEvent<T>[]> {
  calls.assertOpen();
  assertName('stream', stream);
  const scope = calls.scope('appendBatch options', options);
  if (!Array.isArray(inputs)) throw invalidArgument(`appendBatch expects an array of inputs, got ${describe(inputs)}`);
  if (inputs.length > 100_000) throw invalidArgument('appendBatch accepts at most 100000 inputs per call');
  const limits = { stream, maxEventBytes: calls.limits.maxEventBytes };
  const prepared = inputs.map((input, i) => prepareAppend(calls.clock, input, `appendBatch input [${i}]`, limits));
  if (prepared.length === 0) return [];
  assertBatchSize(stream, prepared, calls.limits.maxBatchBytes);
  const outcomes = await calls.traced(
    calls.telemetry?.send(stream, prepared, calls.limits),
    () => calls.backend.append(stream, prepared),
    scope,
    { action: `append a batch to stream "${stream}"`, writes: true, stream },
  );
  return outcomes.map((outcome) => appended<T>(outcome));
}

export async function read<T extends JsonValue>(calls: FacadeCalls, stream: string, options: ReadOptions): Promise<RheoEvent<T>[]> {
  calls.assertOpen();
  assertName('stream', stream);
  assertOptions('read options', options);
  const partition = optionalInteger('partition', options.partition, 0, { max: MAX_PARTITIONS });
  const after = optionalInteger('after', options.after, 0);
  const limit = optionalInteger('limit', options.limit, 100, { min: 1, max: MAX_LIMIT });
  const maxBytes = calls.maxBytes(options.maxBytes);
  const scope = calls.scope('read options', options);
  return (await calls.call(() => calls.backend.read(stream, partition, after, limit, maxBytes), scope, {
    action: `read stream "${stream}"`,
    writes: false,
    stream,
  })) as RheoEvent<T>[];
}

export async function query<T extends JsonValue>(calls: FacadeCalls, stream: string, options: QueryOptions): Promise<QueryResult<T>> {
  calls.assertOpen();
  assertName('stream', stream);
  assertOptions('query options', options);
  const q = normalizeQuery(stream, options, calls.defaults.maxFetchBytes);
  const scope = calls.scope('query options', options);
  return (await calls.call(() => calls.backend.query(stream, q), scope, {
    action: `query stream "${stream}"`,
    writes: false,
    stream,
  })) as QueryResult<T>;
}

export function queryAll<T extends JsonValue>(calls: FacadeCalls, stream: string, options: QueryOptions): AsyncIterable<RheoEvent<T>> {
  calls.assertOpen();
  assertName('stream', stream);
  assertOptions('query options', options);
  const first = normalizeQuery(stream, options, calls.defaults.maxFetchBytes);
  const scope = calls.scope('query options', options);
  const target = { action: `query stream "${stream}"`, writes: false, stream };
  return queryPages<T>(first, async (q) => {
    calls.assertOpen();
    return (await calls.call(() => calls.backend.query(stream, q), scope, target)) as QueryResult<T>;
  }, stream);
}

export function transaction(calls: FacadeCalls, client: TransactionClient): RheoTransaction {
  calls.assertOpen();
  // The flag first: a backend without transactions is `unsupported` whatever the client.
  requireCapability(calls.backend, 'transactions', 'transaction');
  if (client === null || typeof client !== 'object' || typeof (client as { query?: unknown }).query !== 'function') {
    throw invalidArgument(`transaction expects a pg client with a transaction begun on it, got ${describe(client)}`);
  }
  return new RheoTransaction(calls, capability(calls.backend, 'transactions', 'transaction').transaction(client));
}

/**
 * A new object per result: a backend may hand out the (frozen) event it
 * stores. Written out field by field: one object shape for every result, and
 * cheaper than a spread per event of a large batch.
 */
function appended<T>({ event, existed }: AppendOutcome): AppendedEvent<T> {
  const e = event as RheoEvent<T>;
  return {
    id: e.id,
    stream: e.stream,
    partition: e.partition,
    sequence: e.sequence,
    type: e.type,
    key: e.key,
    payload: e.payload,
    metadata: e.metadata,
    timestamp: e.timestamp,
    existed,
  };
}
