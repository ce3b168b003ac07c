import type {
  Backend,
  GroupStart,
  LeaseRef,
  NormalizedQuery,
  NormalizedReplay,
  PreparedAppend,
  SettleOp,
} from './core/backend.js';
import { systemClock, type Clock } from './core/clock.js';
import { RheoError, invalidArgument, isRheoError } from './core/errors.js';
import { decodeQueryCursor } from './core/query-cursor.js';
import type {
  AppendInput,
  DeadLetter,
  DeadLetterOptions,
  FetchOptions,
  GroupInfo,
  GroupOptions,
  JsonObject,
  JsonValue,
  LagReport,
  Lease,
  NackOptions,
  QueryOptions,
  QueryResult,
  ReadOptions,
  RedriveOptions,
  RenewOptions,
  ReplayOptions,
  ReplaySpec,
  ResetOptions,
  RheoEvent,
  SettleResult,
  StreamInfo,
  StreamOptions,
} from './core/types.js';
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
  optionalInteger,
} from './core/validation.js';
import { memoryBackend } from './backends/memory/memory-backend.js';
import { RheoProducer } from './producer/rheo-producer.js';
import type { ProducerOptions } from './producer/producer-options.js';
import { createConsumer, type Consumer } from './consumer/consumer.js';
import type { ConsumeOptions } from './consumer/consumer-types.js';

export interface RheoDefaults {
  leaseMs: number;
  maxAttempts: number;
  maxDemand: number;
  pollMs: number;
}

export interface RheoOptions {
  /** Defaults to a fresh in-memory backend using `clock`. */
  backend?: Backend;
  defaults?: Partial<RheoDefaults>;
  /** Time source for the default memory backend and for rheo's own timers. */
  clock?: Clock;
}

const MAX_LIMIT = 10_000;
const EMPTY_METADATA: JsonObject = Object.freeze({});
const MAX_PARTITIONS = 4096;
const MAX_LEASE_MS = 7 * 24 * 3600_000;

export function createRheo(options: RheoOptions = {}): Rheo {
  return new Rheo(options);
}

/**
 * The facade: validates and normalises every argument, then delegates to the
 * backend. A call that fails validation reaches no backend, so it writes nothing.
 */
export class Rheo {
  readonly backend: Backend;
  readonly clock: Clock;
  readonly defaults: Readonly<RheoDefaults>;
  #closed = false;
  #closing: Promise<void> | null = null;

  constructor(options: RheoOptions = {}) {
    if (options === null || typeof options !== 'object') throw invalidArgument('createRheo options must be an object');
    this.clock = options.clock ?? systemClock;
    const d = options.defaults ?? {};
    this.defaults = Object.freeze({
      leaseMs: optionalInteger('defaults.leaseMs', d.leaseMs, 30_000, { min: 1, max: MAX_LEASE_MS }),
      maxAttempts: optionalInteger('defaults.maxAttempts', d.maxAttempts, 5, { min: 1, max: 1_000_000 }),
      maxDemand: optionalInteger('defaults.maxDemand', d.maxDemand, 10, { min: 1, max: MAX_LIMIT }),
      pollMs: optionalInteger('defaults.pollMs', d.pollMs, 200, { min: 1, max: 3600_000 }),
    });
    this.backend = options.backend ?? memoryBackend({ clock: this.clock });
  }

  get closed(): boolean {
    return this.#closed;
  }

  async migrate(): Promise<void> {
    this.#assertOpen();
    await this.#call(() => this.backend.migrate());
  }

  /** Idempotent; ends only what rheo created (a borrowed pool stays open). */
  close(): Promise<void> {
    this.#closed = true;
    this.#closing ??= this.backend.close();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ---- streams and groups -------------------------------------------------

  async createStream(name: string, options: StreamOptions = {}): Promise<void> {
    this.#assertOpen();
    assertName('stream', name);
    assertOptions('createStream options', options);
    const partitions = optionalInteger('partitions', options.partitions, 1, { min: 1, max: MAX_PARTITIONS });
    await this.#call(() => this.backend.createStream(name, partitions));
  }

  async listStreams(): Promise<StreamInfo[]> {
    this.#assertOpen();
    return this.#call(() => this.backend.listStreams());
  }

  async createGroup(stream: string, group: string, options: GroupOptions = {}): Promise<void> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('createGroup options', options);
    const start = normalizeStart(options.startAfter, options.startAt);
    const maxAttempts = optionalInteger('maxAttempts', options.maxAttempts, this.defaults.maxAttempts, {
      min: 1,
      max: 1_000_000,
    });
    await this.#call(() => this.backend.createGroup(stream, group, { start, maxAttempts }));
  }

  async listGroups(stream: string): Promise<string[]> {
    this.#assertOpen();
    assertName('stream', stream);
    return this.#call(() => this.backend.listGroups(stream));
  }

  async groupInfo(stream: string, group: string): Promise<GroupInfo> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    return this.#call(() => this.backend.groupInfo(stream, group));
  }

  // ---- the log ------------------------------------------------------------

  async append<T extends JsonValue = JsonValue>(stream: string, input: AppendInput<T>): Promise<RheoEvent<T>> {
    this.#assertOpen();
    assertName('stream', stream);
    const prepared = this.#prepareAppend(input, 'append input');
    const [event] = await this.#call(() => this.backend.append(stream, [prepared]));
    return event as RheoEvent<T>;
  }

  /** All or nothing: one bad input rejects the whole batch before anything is written. */
  async appendBatch<T extends JsonValue = JsonValue>(
    stream: string,
    inputs: AppendInput<T>[],
  ): Promise<RheoEvent<T>[]> {
    this.#assertOpen();
    assertName('stream', stream);
    if (!Array.isArray(inputs)) throw invalidArgument(`appendBatch expects an array of inputs, got ${describe(inputs)}`);
    if (inputs.length > 100_000) throw invalidArgument('appendBatch accepts at most 100000 inputs per call');
    const prepared = inputs.map((input, i) => this.#prepareAppend(input, `appendBatch input [${i}]`));
    if (prepared.length === 0) return [];
    return (await this.#call(() => this.backend.append(stream, prepared))) as RheoEvent<T>[];
  }

  async read<T extends JsonValue = JsonValue>(stream: string, options: ReadOptions = {}): Promise<RheoEvent<T>[]> {
    this.#assertOpen();
    assertName('stream', stream);
    assertOptions('read options', options);
    const partition = optionalInteger('partition', options.partition, 0, { max: MAX_PARTITIONS });
    const after = optionalInteger('after', options.after, 0);
    const limit = optionalInteger('limit', options.limit, 100, { min: 1, max: MAX_LIMIT });
    return (await this.#call(() => this.backend.read(stream, partition, after, limit))) as RheoEvent<T>[];
  }

  async query<T extends JsonValue = JsonValue>(stream: string, options: QueryOptions = {}): Promise<QueryResult<T>> {
    this.#assertOpen();
    assertName('stream', stream);
    assertOptions('query options', options);
    const q = normalizeQuery(stream, options);
    return (await this.#call(() => this.backend.query(stream, q))) as QueryResult<T>;
  }

  // ---- consuming ----------------------------------------------------------

  /**
   * An object-mode `Readable` of leases for `stream.pipeline`, with demand
   * bounded by `maxDemand` (see `RheoProducer`). Defaults come from `defaults`.
   */
  producer<T extends JsonValue = JsonValue>(options: ProducerOptions): RheoProducer<T> {
    this.#assertOpen();
    return new RheoProducer<T>(this, options);
  }

  /**
   * The one-call runtime: runs `handler` for every event of the group with
   * bounded concurrency, lease renewal, optional per-key ordering and
   * timeouts, and settles by the handler's outcome. Returns the `Consumer`
   * at once (options are validated synchronously); `consumer.stop()` drains.
   */
  consume<T extends JsonValue = JsonValue>(options: ConsumeOptions<T>): Consumer<T> {
    this.#assertOpen();
    return createConsumer<T>(this, options);
  }

  async fetch<T extends JsonValue = JsonValue>(
    stream: string,
    group: string,
    options: FetchOptions = {},
  ): Promise<Lease<T>[]> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('fetch options', options);
    const limit = optionalInteger('limit', options.limit, 10, { min: 1, max: MAX_LIMIT });
    const leaseMs = optionalInteger('leaseMs', options.leaseMs, this.defaults.leaseMs, { min: 1, max: MAX_LEASE_MS });
    let consumerId = 'anonymous';
    if (options.consumerId !== undefined) {
      assertString('consumerId', options.consumerId);
      consumerId = options.consumerId;
    }
    const partitions = normalizePartitions(options.partitions);
    return (await this.#call(() =>
      this.backend.fetch(stream, group, { limit, consumerId, leaseMs, partitions }),
    )) as Lease<T>[];
  }

  /** Extends a live lease. Fenced: `stale_lease` unless the lease is still held under this `leaseId`. */
  async renew<T>(lease: Lease<T>, options: RenewOptions = {}): Promise<Lease<T>> {
    this.#assertOpen();
    const ref = leaseRef(lease, 'renew');
    assertOptions('renew options', options);
    const leaseMs = optionalInteger('leaseMs', options.leaseMs, this.defaults.leaseMs, { min: 1, max: MAX_LEASE_MS });
    const [result] = await this.#call(() => this.backend.renew([ref], leaseMs));
    if (!result?.ok) throw result?.error ?? new RheoError('internal', 'renew returned no result');
    return { ...lease, expiresAt: result.expiresAt };
  }

  /** Renews many leases in one backend call; one result per lease, in order. */
  async renewMany<T>(
    leases: Lease<T>[],
    options: RenewOptions = {},
  ): Promise<Array<{ ok: true; lease: Lease<T> } | { ok: false; error: RheoError }>> {
    this.#assertOpen();
    if (!Array.isArray(leases)) throw invalidArgument(`renewMany expects an array of leases, got ${describe(leases)}`);
    assertOptions('renew options', options);
    const leaseMs = optionalInteger('leaseMs', options.leaseMs, this.defaults.leaseMs, { min: 1, max: MAX_LEASE_MS });
    const refs: Array<LeaseRef | RheoError> = leases.map((l) => tryLeaseRef(l, 'renewMany'));
    const valid = refs.filter((r): r is LeaseRef => !(r instanceof RheoError));
    const results = valid.length ? await this.#call(() => this.backend.renew(valid, leaseMs)) : [];
    let j = 0;
    return refs.map((r, i) => {
      if (r instanceof RheoError) return { ok: false as const, error: r };
      const res = results[j++];
      if (!res) return { ok: false as const, error: new RheoError('internal', 'renew returned too few results') };
      return res.ok ? { ok: true as const, lease: { ...leases[i]!, expiresAt: res.expiresAt } } : res;
    });
  }

  async ack(lease: Lease<unknown>): Promise<void> {
    await this.#settleOne({ ...leaseRef(lease, 'ack'), kind: 'ack' });
  }

  /** Retry later (after `delayMs`, default 0). At `attempt >= maxAttempts` this dead-letters. */
  async nack(lease: Lease<unknown>, reason?: string | null, options: NackOptions = {}): Promise<void> {
    await this.#settleOne(nackOp(lease, reason, options, 'nack'));
  }

  /** Dead-letter now. */
  async reject(lease: Lease<unknown>, reason?: string | null): Promise<void> {
    await this.#settleOne({ ...leaseRef(lease, 'reject'), kind: 'reject', reason: normalizeReason(reason) });
  }

  /** Give the delivery back unprocessed, without spending an attempt. */
  async release(lease: Lease<unknown>): Promise<void> {
    await this.#settleOne({ ...leaseRef(lease, 'release'), kind: 'release' });
  }

  ackMany(leases: Lease<unknown>[]): Promise<SettleResult[]> {
    return this.#settleMany('ackMany', leases, (l) => ({ ...leaseRef(l, 'ackMany'), kind: 'ack' }));
  }

  nackMany(leases: Lease<unknown>[], reason?: string | null, options: NackOptions = {}): Promise<SettleResult[]> {
    return this.#settleMany('nackMany', leases, (l) => nackOp(l, reason, options, 'nackMany'));
  }

  rejectMany(leases: Lease<unknown>[], reason?: string | null): Promise<SettleResult[]> {
    return this.#settleMany('rejectMany', leases, (l) => ({
      ...leaseRef(l, 'rejectMany'),
      kind: 'reject',
      reason: normalizeReason(reason),
    }));
  }

  releaseMany(leases: Lease<unknown>[]): Promise<SettleResult[]> {
    return this.#settleMany('releaseMany', leases, (l) => ({ ...leaseRef(l, 'releaseMany'), kind: 'release' }));
  }

  /**
   * Mixed settles in one backend round trip, one result per op. Used by the
   * producer to coalesce settles issued close together.
   */
  async settleMany(ops: SettleRequest[]): Promise<SettleResult[]> {
    this.#assertOpen();
    if (!Array.isArray(ops)) throw invalidArgument(`settleMany expects an array, got ${describe(ops)}`);
    const prepared: Array<SettleOp | RheoError> = ops.map((op) => {
      try {
        if (op === null || typeof op !== 'object') throw invalidArgument('settleMany op must be an object');
        switch (op.kind) {
          case 'ack':
            return { ...leaseRef(op.lease, 'settleMany'), kind: 'ack' };
          case 'release':
            return { ...leaseRef(op.lease, 'settleMany'), kind: 'release' };
          case 'reject':
            return { ...leaseRef(op.lease, 'settleMany'), kind: 'reject', reason: normalizeReason(op.reason) };
          case 'nack':
            return nackOp(op.lease, op.reason, { delayMs: op.delayMs }, 'settleMany');
          default:
            throw invalidArgument(`settleMany op kind must be ack, nack, reject or release, got ${describe((op as { kind?: unknown }).kind)}`);
        }
      } catch (error) {
        if (isRheoError(error)) return error;
        throw error;
      }
    });
    const valid = prepared.filter((p): p is SettleOp => !(p instanceof RheoError));
    const results = valid.length ? await this.#call(() => this.backend.settle(valid)) : [];
    let j = 0;
    return prepared.map((p) =>
      p instanceof RheoError
        ? { ok: false as const, error: p }
        : (results[j++] ?? { ok: false as const, error: new RheoError('internal', 'settle returned too few results') }),
    );
  }

  // ---- progress and operations -------------------------------------------

  async lag(stream: string, group: string): Promise<LagReport> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    return this.#call(() => this.backend.lag(stream, group));
  }

  /** Reopens deliveries for redelivery; the log itself never changes. */
  async replay(stream: string, group: string, spec: ReplaySpec, options: ReplayOptions = {}): Promise<void> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('replay options', options);
    const normalized = normalizeReplay(spec);
    const partitions = normalizePartitions(options.partitions);
    await this.#call(() => this.backend.replay(stream, group, normalized, partitions));
  }

  /** Forgets all progress of the group. Requires `{ confirm: true }`. */
  async resetGroup(stream: string, group: string, options: ResetOptions): Promise<void> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    if (options === null || typeof options !== 'object' || options.confirm !== true) {
      throw new RheoError(
        'confirm_required',
        `resetGroup on stream "${stream}", group "${group}" drops all progress; pass { confirm: true }`,
        { stream, group },
      );
    }
    const start = normalizeStart(options.startAfter, options.startAt);
    await this.#call(() => this.backend.resetGroup(stream, group, start));
  }

  async deadLetters<T extends JsonValue = JsonValue>(
    stream: string,
    group: string,
    options: DeadLetterOptions = {},
  ): Promise<DeadLetter<T>[]> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('deadLetters options', options);
    const limit = optionalInteger('limit', options.limit, 100, { min: 1, max: MAX_LIMIT });
    let after: string | null = null;
    if (options.after !== undefined) {
      assertString('after', options.after, { min: 1, max: 64 });
      after = options.after;
    }
    return (await this.#call(() => this.backend.deadLetters(stream, group, limit, after))) as DeadLetter<T>[];
  }

  /** Reopens dead letters (all, or the given event ids) with attempts reset. Returns how many. */
  async redrive(stream: string, group: string, options: RedriveOptions = {}): Promise<number> {
    this.#assertOpen();
    assertName('stream', stream);
    assertName('group', group);
    assertOptions('redrive options', options);
    const eventIds = options.eventIds === undefined ? null : normalizeEventIds(options.eventIds);
    return this.#call(() => this.backend.redrive(stream, group, eventIds));
  }

  // ---- internals ----------------------------------------------------------

  #assertOpen(): void {
    if (this.#closed) throw new RheoError('closed', 'this rheo instance is closed');
  }

  #prepareAppend(input: AppendInput<unknown>, what: string): PreparedAppend {
    assertPlainObject(what, input);
    if (!('payload' in input) || input.payload === undefined) {
      throw invalidArgument(`${what}.payload is required and must be JSON (undefined is not JSON)`);
    }
    const payload = frozenJsonCopy(`${what}.payload`, input.payload);
    let type = 'event';
    if (input.type !== undefined) {
      assertString(`${what}.type`, input.type);
      type = input.type;
    }
    let key: string | null = null;
    if (input.key !== undefined && input.key !== null) {
      assertString(`${what}.key`, input.key, { min: 0, max: 1024 });
      assertJson(`${what}.key`, input.key);
      key = input.key;
    }
    let metadata: JsonObject = EMPTY_METADATA;
    if (input.metadata !== undefined) {
      assertPlainObject(`${what}.metadata`, input.metadata);
      metadata = frozenJsonCopy(`${what}.metadata`, input.metadata) as JsonObject;
    }
    let id: string | null = null;
    if (input.id !== undefined) {
      assertString(`${what}.id`, input.id);
      assertJson(`${what}.id`, input.id);
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
      timestamp = new Date(this.clock.now());
    }
    return { id, type, key, payload, metadata, partition, timestamp };
  }

  async #settleOne(op: SettleOp): Promise<void> {
    this.#assertOpen();
    const [result] = await this.#call(() => this.backend.settle([op]));
    if (!result?.ok) throw result?.error ?? new RheoError('internal', 'settle returned no result');
  }

  async #settleMany(
    what: string,
    leases: Lease<unknown>[],
    toOp: (lease: Lease<unknown>) => SettleOp,
  ): Promise<SettleResult[]> {
    this.#assertOpen();
    if (!Array.isArray(leases)) throw invalidArgument(`${what} expects an array of leases, got ${describe(leases)}`);
    const prepared: Array<SettleOp | RheoError> = leases.map((l) => {
      try {
        return toOp(l);
      } catch (error) {
        if (isRheoError(error)) return error;
        throw error;
      }
    });
    const valid = prepared.filter((p): p is SettleOp => !(p instanceof RheoError));
    const results = valid.length ? await this.#call(() => this.backend.settle(valid)) : [];
    let j = 0;
    return prepared.map((p) =>
      p instanceof RheoError
        ? { ok: false as const, error: p }
        : (results[j++] ?? { ok: false as const, error: new RheoError('internal', 'settle returned too few results') }),
    );
  }

  /** Backends classify their own driver errors; anything else that escapes is wrapped, never leaked. */
  async #call<R>(fn: () => Promise<R>): Promise<R> {
    try {
      return await fn();
    } catch (error) {
      if (error instanceof RheoError) throw error;
      throw new RheoError('internal', `unexpected backend failure: ${(error as Error)?.message ?? String(error)}`, {
        cause: error,
      });
    }
  }
}

export type SettleRequest =
  | { kind: 'ack'; lease: Lease<unknown> }
  | { kind: 'nack'; lease: Lease<unknown>; reason?: string | null; delayMs?: number }
  | { kind: 'reject'; lease: Lease<unknown>; reason?: string | null }
  | { kind: 'release'; lease: Lease<unknown> };

function assertOptions(what: string, options: unknown): void {
  if (options !== undefined) assertPlainObject(what, options);
}

function leaseRef(lease: Lease<unknown>, what: string): LeaseRef {
  if (lease === null || typeof lease !== 'object') throw invalidArgument(`${what} expects a lease, got ${describe(lease)}`);
  const event = lease.event as Partial<RheoEvent<unknown>> | undefined;
  if (
    typeof lease.leaseId !== 'string' ||
    lease.leaseId.length === 0 ||
    typeof lease.stream !== 'string' ||
    typeof lease.group !== 'string' ||
    event === null ||
    typeof event !== 'object' ||
    !Number.isSafeInteger(event.partition) ||
    !Number.isSafeInteger(event.sequence)
  ) {
    throw invalidArgument(`${what} expects a lease returned by fetch (leaseId, stream, group, event.partition, event.sequence)`);
  }
  assertName('stream', lease.stream);
  assertName('group', lease.group);
  assertString('leaseId', lease.leaseId, { min: 1, max: 200 });
  return {
    stream: lease.stream,
    group: lease.group,
    partition: event.partition as number,
    sequence: event.sequence as number,
    leaseId: lease.leaseId,
  };
}

function tryLeaseRef(lease: Lease<unknown>, what: string): LeaseRef | RheoError {
  try {
    return leaseRef(lease, what);
  } catch (error) {
    if (isRheoError(error)) return error;
    throw error;
  }
}

function normalizeReason(reason: unknown): string | null {
  if (reason === undefined || reason === null) return null;
  if (typeof reason === 'string') return reason.slice(0, 4000).replaceAll('\u0000', '').toWellFormed();
  if (reason instanceof Error) return normalizeReason(reason.message || reason.name);
  throw invalidArgument(`reason must be a string, got ${describe(reason)}`);
}

function nackOp(lease: Lease<unknown>, reason: unknown, options: NackOptions, what: string): SettleOp {
  assertOptions('nack options', options);
  const delayMs = optionalInteger('delayMs', options?.delayMs, 0, { max: MAX_LEASE_MS });
  return { ...leaseRef(lease, what), kind: 'nack', reason: normalizeReason(reason), delayMs };
}

function normalizePartitions(partitions: unknown): number[] | null {
  if (partitions === undefined) return null;
  if (!Array.isArray(partitions) || partitions.length === 0) {
    throw invalidArgument(`partitions must be a non-empty array of partition numbers, got ${describe(partitions)}`);
  }
  for (const p of partitions) assertInteger('partitions[]', p, { max: MAX_PARTITIONS });
  return [...new Set(partitions as number[])].sort((a, b) => a - b);
}

function normalizeStart(startAfter: unknown, startAt: unknown): GroupStart {
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

function normalizeEventIds(ids: unknown): string[] {
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_LIMIT) {
    throw invalidArgument(`eventIds must be a non-empty array of at most ${MAX_LIMIT} ids, got ${describe(ids)}`);
  }
  for (const id of ids) assertString('eventIds[]', id);
  return [...new Set(ids as string[])];
}

function normalizeReplay(spec: unknown): NormalizedReplay {
  assertPlainObject('replay spec', spec);
  const keys = Object.keys(spec).filter((k) => spec[k] !== undefined);
  if (keys.length !== 1) {
    throw invalidArgument('replay spec must have exactly one of fromSequence, from, eventIds');
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
  throw invalidArgument('replay spec must have exactly one of fromSequence, from, eventIds');
}

function normalizeQuery(stream: string, o: QueryOptions): NormalizedQuery {
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
    cursor,
  };
}
