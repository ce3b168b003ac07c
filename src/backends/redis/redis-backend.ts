import type {
  AppendOutcome,
  Backend,
  BackendCapabilities,
  CommitOp,
  GroupMembership,
  HeartbeatRequest,
  MemberView,
  OwnershipFence,
  FetchRequest,
  GroupSpec,
  GroupStart,
  GroupStorageStats,
  LeaseRef,
  NormalizedQuery,
  NormalizedReplay,
  PreparedAppend,
  RenewResult,
  RetentionPolicy,
  SettleOp,
  SettleOutcome,
  TrimReport,
  TrimRequest,
} from '../../core/backend.js';
import { receiptOf } from '../../core/backend.js';
import type { Clock } from '../../core/clock.js';
import { RheoError, groupNotFound, invalidArgument, invalidPartition, staleLease, streamNotFound } from '../../core/errors.js';
import { newLeaseId, uuidv7 } from '../../core/ids.js';
import { checkStartScope, scopedPartitions } from '../../core/partition-scope.js';
import type { DeadLetter, GroupInfo, LagReport, Lease, PartitionLag, QueryResult, RheoEvent, StreamInfo } from '../../core/types.js';
import { routePartition } from '../../core/validation.js';
import { decodeEvent, decodeReason, encodeEvent, encodeReason, entryFields } from './codec.js';
import { checkConnection, connectReady, createClient, redisStoreId, ScriptRunner, type RedisClientLike, type RedisConnection } from './connection.js';
import type { FailureContext } from './errors.js';
import { planFetch, type FetchPlan } from './fetch-plan.js';
import { checkPrefix, KeyLayout } from './keys.js';
import {
  APPEND,
  CLAIM,
  DEAD_LETTERS,
  INFO,
  INIT_GROUP,
  PEEK,
  REDRIVE,
  RENEW,
  REPLAY,
  RESET_GROUP,
  SETTLE,
  type LuaScript,
} from './lua/scripts.js';
import { FENCING_VARIANTS } from './lua/ownership-scripts.js';
import { AppendWaiters } from './notifications.js';
import { RedisOwnership } from './ownership.js';
import { matchingSequences, queryPartitions } from './query.js';
import * as retention from './retention.js';

export type { RedisClientLike, RedisConnection } from './connection.js';

export interface RedisBackendOptions {
  /** Prefix of every key and channel; `[A-Za-z0-9._-]{1,64}`. Default `rheo`. */
  prefix?: string;
  /**
   * Time authority for leases, delays and dead-letter times. Default: the
   * Redis server clock (`TIME`, read inside each script), so workers with
   * skewed clocks cannot steal live leases. Inject a clock (e.g.
   * `ManualClock`) only for tests or when every process shares one clock.
   */
  clock?: Clock;
  /** Publish once per append call so `waitForAppend` wakes promptly. Default true. */
  notify?: boolean;
}

export type RedisBackendConfig = RedisConnection & RedisBackendOptions;

/** A first connection (a cluster's included: slots discovered) that takes longer fails with backend_unavailable. */
const CONNECT_TIMEOUT_MS = 10_000;
/** close() waits this long for QUIT before dropping the socket. */
const QUIT_TIMEOUT_MS = 2_000;

/** Schema version migrate() records; ping() reports it. */
const SCHEMA_VERSION = 1;

type StreamMeta = retention.StreamCatalogEntry;

interface GroupMeta {
  maxAttempts: number;
  /** The partitions the group covers (GroupSpec.partitions); absent: all of the stream's. */
  partitions?: number[];
}

/**
 * A durable, distributed backend on Redis Streams, on one server or on
 * Redis Cluster. Every multi-key step is one Lua script over one
 * partition's keys (lua/scripts.ts).
 *
 *     redisBackend({ url: 'redis://127.0.0.1:6379' }, { prefix: 'orders' })
 *     redisBackend({ nodes: ['redis://10.0.0.1:7000', 'redis://10.0.0.2:7000'] })
 *     redisBackend({ client })   // a borrowed ioredis Redis or Cluster: never closed by rheo
 */
export function redisBackend(connection: RedisBackendConfig, options: RedisBackendOptions = {}): RedisBackend {
  return new RedisBackend(connection, options);
}

export class RedisBackend implements Backend {
  readonly name = 'redis';
  readonly capabilities: BackendCapabilities;
  readonly prefix: string;
  readonly storeId: string;
  readonly #connection: RedisConnection;
  readonly #keys: KeyLayout;
  readonly #scripts = new ScriptRunner();
  readonly #clock: Clock | null;
  readonly #notify: boolean;
  readonly #waiters: AppendWaiters;
  /** What retention.ts needs of this backend. */
  readonly #host: retention.RetentionHost;
  readonly #streams = new Map<string, StreamMeta>();
  readonly #groups = new Map<string, GroupMeta>();
  readonly #rotation = new Map<string, number>();
  /** When each stream was last looked up again after an empty read. */
  readonly #rechecked = new Map<string, number>();
  /** Orders dead letters that die in one millisecond (see DEAD_LETTER_ID). */
  #deathOrder = 0;
  #client: Promise<RedisClientLike> | null = null;
  #owned: RedisClientLike | null = null;
  #closed = false;
  /** Partition ownership (ownership.ts). */
  readonly #ownership: RedisOwnership;

  constructor(connection: RedisBackendConfig, options: RedisBackendOptions = {}) {
    this.#connection = checkConnection(connection);
    this.prefix = checkPrefix(options.prefix ?? connection.prefix ?? 'rheo');
    this.storeId = redisStoreId(this.#connection, this.prefix);
    const clock = options.clock ?? connection.clock;
    if (clock !== undefined && (clock === null || typeof clock.now !== 'function')) {
      throw invalidArgument('redisBackend clock must have a now() method returning epoch milliseconds');
    }
    this.#clock = clock ?? null;
    this.#notify = options.notify ?? connection.notify ?? true;
    this.#keys = new KeyLayout(this.prefix);
    this.#host = {
      keys: this.#keys,
      now: () => (this.#clock ? String(this.#clock.now()) : ''),
      run: (script, keys, args, ctx) => this.#run(script, keys, args, ctx),
      command: (args, ctx) => this.#command(args, ctx),
      stream: (name) => this.#stream(name),
      forget: (stream, group) => this.#forget(stream, group),
    };
    const cluster = this.#connection.nodes !== undefined || (connection.client as { isCluster?: unknown } | undefined)?.isCluster === true;
    this.capabilities = Object.freeze({
      durable: true,
      distributed: true,
      notifications: true,
      transactions: false,
      partitionOwnership: true,
      retention: true,
      cluster,
    });
    this.#ownership = new RedisOwnership({
      keys: this.#keys,
      now: () => (this.#clock ? String(this.#clock.now()) : ''),
      run: (script, keys, args, ctx) => this.#run(script, keys, args, ctx),
      group: async (stream, group) => {
        const { meta, g } = await this.#groupMeta(stream, group);
        return { partitions: meta.partitions, covered: coveredOf(meta, g) };
      },
      nextDeathOrder: () => this.#nextDeathOrder(),
    });
    this.#waiters = new AppendWaiters(
      async () => {
        const sub = (await this.#ready()).duplicate();
        sub.on('error', () => {});
        if (sub.status === 'wait') await sub.connect();
        return sub;
      },
      this.#keys.appendPattern,
      (channel) => this.#keys.streamOfChannel(channel),
    );
  }

  // ---- lifecycle -----------------------------------------------------------

  async migrate(): Promise<void> {
    await this.#command(['set', this.#keys.schema, String(SCHEMA_VERSION)], { action: 'migrate', writes: true });
  }

  async ping(): Promise<number | null> {
    const version = await this.#command(['get', this.#keys.schema], { action: 'ping', writes: false });
    return version === null ? null : Number(version);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#waiters.close();
    const owned = this.#owned;
    this.#owned = null;
    if (owned) {
      // QUIT lets replies in flight arrive; a server that does not answer
      // must not hold close() up, so the socket is dropped after a bound.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([owned.quit().catch(() => {}), new Promise((resolve) => (timer = setTimeout(resolve, QUIT_TIMEOUT_MS)))]);
      clearTimeout(timer);
      owned.disconnect();
    }
  }

  /** True while the pub/sub connection that wakes producers is up. */
  get listening(): boolean {
    return this.#waiters.listening;
  }

  // ---- streams and groups --------------------------------------------------

  async createStream(name: string, partitions: number, policy: RetentionPolicy | null = null): Promise<void> {
    const createdAt = this.#clock ? this.#clock.now() : Date.now();
    await retention.createStream(this.#host, name, partitions, policy, createdAt);
  }

  async listStreams(): Promise<StreamInfo[]> {
    const reply = await this.#command(['hgetall', this.#keys.streams], { action: 'list streams', writes: false });
    // ioredis turns an HGETALL reply into an object, even through call().
    const entries: Array<[string, string]> = Array.isArray(reply)
      ? Array.from({ length: reply.length / 2 }, (_, i) => [reply[2 * i] as string, reply[2 * i + 1] as string])
      : Object.entries(reply as Record<string, string>);
    const ctx = { action: 'list streams', writes: false };
    const policies = await retention.policies(this.#host);
    const out: StreamInfo[] = await Promise.all(
      entries.map(async ([name, raw]) => {
        const meta = JSON.parse(raw) as StreamMeta;
        const marks = (await Promise.all(
          range(meta.partitions).map((p) => this.#command(['hmget', this.#keys.partition(name, p).meta, 'hw', 'lw'], { ...ctx, stream: name })),
        )) as Array<[string | null, string | null]>;
        const watermarks: StreamInfo['watermarks'] = {};
        marks.forEach(([h, l], p) => {
          watermarks[p] = { lowWatermark: Number(l ?? 1), highWatermark: Number(h ?? 0) };
        });
        const policy = policies.get(name);
        return { name, partitions: meta.partitions, createdAt: new Date(meta.createdAt), retention: policy ? { ...policy } : null, watermarks };
      }),
    );
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /**
   * Sets the group's start in every partition (only where it has no state
   * yet), then records it in the stream's group catalog: a createGroup cut
   * short leaves no catalog entry, and a retry completes it.
   */
  async createGroup(stream: string, group: string, spec: GroupSpec): Promise<void> {
    // Looked up afresh: the stream may have been deleted (and created again) since it was cached.
    this.#forget(stream);
    const meta = await this.#stream(stream);
    const ctx = { action: `create group "${group}" on stream "${stream}"`, stream, group, writes: true };
    const covered = partitionList(stream, meta.partitions, spec.partitions ?? null);
    checkStart(stream, group, meta, spec.start, covered);
    const exists = await this.#command(['hexists', this.#keys.groups(stream), group], { ...ctx, writes: false });
    if (exists === 1) throw new RheoError('already_exists', `group "${group}" already exists on stream "${stream}"`, { stream, group });
    await retention.finishGroupDeletion(this.#host, stream, group, meta.partitions);
    await Promise.all(
      covered.map((p) => this.#group(INIT_GROUP, stream, group, p, startArgs(spec.start, p), ctx)),
    );
    const g: GroupMeta = { maxAttempts: spec.maxAttempts };
    if (spec.partitions) g.partitions = [...spec.partitions];
    const created = await this.#command(['hsetnx', this.#keys.groups(stream), group, JSON.stringify(g)], ctx);
    if (created === 0) throw new RheoError('already_exists', `group "${group}" already exists on stream "${stream}"`, { stream, group });
  }

  async listGroups(stream: string): Promise<string[]> {
    await this.#stream(stream);
    const names = (await this.#command(['hkeys', this.#keys.groups(stream)], { action: `list groups of stream "${stream}"`, stream, writes: false })) as string[];
    return names.sort();
  }

  // ---- the log ---------------------------------------------------------------

  /**
   * One script per partition the batch touches, each atomic on its slot; on
   * a cluster the partitions commit independently, so a batch cut by a lost
   * connection is `ambiguous` and its retry (same ids) completes it.
   *
   * Each partition keeps the index of the ids stored in it, and the append
   * script checks it atomically with the write. An id given again with a
   * different key or partition routes elsewhere, so an append that carries
   * ids first looks them up in the other partitions (one HMGET per
   * partition, in parallel): a retry finds its event wherever it landed.
   * Only two appends of one id racing into different partitions could both
   * write; the same id with the same routing never can.
   */
  async append(stream: string, inputs: PreparedAppend[]): Promise<AppendOutcome[]> {
    const meta = await this.#stream(stream);
    const partitions = inputs.map((i) => routePartition(stream, meta.partitions, i.partition, i.key));
    const ids = inputs.map((i) => i.id ?? uuidv7(this.#clock ?? undefined));
    const ctx = { action: `append to stream "${stream}"`, stream, writes: true };
    const out: (AppendOutcome | undefined)[] = new Array(inputs.length);
    const firstOf = new Map<string, number>();
    inputs.forEach((input, i) => {
      if (input.id !== null && !firstOf.has(input.id)) firstOf.set(input.id, i);
    });
    if (firstOf.size > 0 && meta.partitions > 1) {
      const found = await this.#locate(stream, meta.partitions, [...firstOf.keys()], { ...ctx, writes: false });
      await Promise.all(
        [...found].map(async ([id, { partition, sequence }]) => {
          const i = firstOf.get(id)!;
          if (partitions[i] === partition) return; // the append script checks its own partition atomically
          const [event] = await this.#readRange(stream, partition, sequence, ctx);
          if (event) out[i] = { event, existed: true };
        }),
      );
    }
    const byPartition = new Map<number, number[]>();
    inputs.forEach((input, i) => {
      if (out[i] !== undefined || (input.id !== null && firstOf.get(input.id) !== i)) return;
      const p = partitions[i]!;
      let list = byPartition.get(p);
      if (!list) byPartition.set(p, (list = []));
      list.push(i);
    });
    const channel = this.#notify ? this.#keys.appendChannel(stream) : '';
    await Promise.all(
      [...byPartition].map(async ([p, indexes]) => {
        const keys = this.#keys.partition(stream, p);
        const args: (string | number)[] = [channel, meta.inc ?? ''];
        for (const i of indexes) {
          const input = inputs[i]!;
          args.push(ids[i]!, input.id === null ? '0' : '1', input.timestamp.getTime(), input.size, encodeEvent(ids[i]!, input));
        }
        const replies = (await this.#run(APPEND, [keys.log, keys.meta, keys.ids], args, ctx).catch((error: unknown) => {
          // Deleted since this process cached it: forget it, so the next call looks again.
          if (error instanceof RheoError && error.code === 'stream_not_found') this.#forget(stream);
          throw error;
        })) as Array<[string, number, string?, string?, string?]>;
        replies.forEach(([sequence, existed, t, , d], k) => {
          const i = indexes[k]!;
          const input = inputs[i]!;
          const event: RheoEvent =
            existed === 1
              ? decodeEvent(stream, p, Number(sequence), t!, d!)
              : {
                  id: ids[i]!,
                  stream,
                  partition: p,
                  sequence: Number(sequence),
                  type: input.type,
                  key: input.key,
                  payload: input.payload,
                  metadata: input.metadata,
                  timestamp: input.timestamp,
                };
          out[i] = { event, existed: existed === 1 };
        });
      }),
    );
    // This process's own waiters need no round trip through pub/sub.
    if (out.some((o) => o !== undefined && !o.existed)) this.#waiters.wake(stream);
    // A repeated id in the batch yields its first occurrence's event.
    return inputs.map((input, i) => out[i] ?? { event: out[firstOf.get(input.id!)!]!.event, existed: true });
  }

  async #readRange(stream: string, partition: number, sequence: number, ctx: FailureContext): Promise<RheoEvent[]> {
    const entries = (await this.#command(['xrange', this.#keys.partition(stream, partition).log, `${sequence}-0`, `${sequence}-0`], {
      ...ctx,
      writes: false,
    })) as unknown[];
    return entries.map((raw) => {
      const e = entryFields(raw);
      return decodeEvent(stream, partition, e.sequence, e.t, e.d);
    });
  }

  async read(stream: string, partition: number, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    const meta = await this.#stream(stream);
    if (partition >= meta.partitions) throw invalidPartition(stream, partition, meta.partitions);
    const entries = (await this.#command(
      ['xrange', this.#keys.partition(stream, partition).log, `${after + 1}-0`, '+', 'COUNT', limit],
      { action: `read stream "${stream}"`, stream, writes: false },
    )) as unknown[];
    // Nothing read from a cached stream: another process may have deleted it (docs/semantics.md, "Other processes").
    if (entries.length === 0 && (await this.#deletedMeanwhile(stream))) throw streamNotFound(stream);
    const out: RheoEvent[] = [];
    let bytes = 0;
    for (const raw of entries) {
      const e = entryFields(raw);
      bytes += e.z;
      if (bytes > maxBytes && out.length > 0) break;
      out.push(decodeEvent(stream, partition, e.sequence, e.t, e.d));
    }
    return out;
  }

  /** Looks a cached stream up again, at most once a second per name; true when it is gone (and then forgotten). */
  async #deletedMeanwhile(stream: string): Promise<boolean> {
    const now = Date.now();
    if (now - (this.#rechecked.get(stream) ?? 0) < 1_000) return false;
    this.#rechecked.set(stream, now);
    const raw = await this.#command(['hget', this.#keys.streams, stream], { action: `look up stream "${stream}"`, stream, writes: false });
    this.#forget(stream);
    if (raw === null) return true;
    // Perhaps deleted and created again: serve the stream as it is now.
    this.#streams.set(stream, JSON.parse(raw as string) as StreamMeta);
    return false;
  }

  /** Scans every event within the query's sequence bounds in the partitions asked (see query.ts). */
  async query(stream: string, query: NormalizedQuery): Promise<QueryResult> {
    const meta = await this.#stream(stream);
    if (query.partition !== null && query.partition >= meta.partitions) throw invalidPartition(stream, query.partition, meta.partitions);
    const partitions = query.partition === null ? range(meta.partitions) : [query.partition];
    return queryPartitions(stream, partitions, query, (p, from, count) =>
      this.#command(['xrange', this.#keys.partition(stream, p).log, from, '+', 'COUNT', count], {
        action: `query stream "${stream}"`,
        stream,
        writes: false,
      }) as Promise<unknown[]>,
    );
  }

  // ---- leases ----------------------------------------------------------------

  /**
   * Two steps on a multi-partition fetch: PEEK reads the sizes of each
   * partition's next claimable deliveries (one script per partition, in
   * parallel), fetch-plan.ts walks them round-robin exactly as the memory
   * backend's claim does, and CLAIM takes each partition's share. Concurrent
   * fetches may claim part of a share first; CLAIM then takes the next
   * claimable ones instead, and each delivery is still claimed once because
   * every CLAIM is atomic on its partition.
   */
  async fetch(stream: string, group: string, request: FetchRequest): Promise<Lease[]> {
    const { meta, g } = await this.#groupMeta(stream, group);
    const partitions = scopeOf(stream, group, meta, g, request.partitions);
    const rotationKey = `${stream}\u0000${group}`;
    const turn = this.#rotation.get(rotationKey) ?? 0;
    this.#rotation.set(rotationKey, turn + 1);
    const start = turn % partitions.length;
    const walk = partitions.map((_, k) => partitions[(start + k) % partitions.length]!);
    const ctx = { action: `fetch from group "${group}" of stream "${stream}"`, stream, group, writes: true };
    // One order for the whole fetch: its spent deliveries die by partition and sequence.
    const order = this.#nextDeathOrder();
    let plan: FetchPlan;
    if (walk.length === 1) {
      // No extra turn: the walk ends at the limit, so a spent delivery after
      // the last claim waits for the next fetch (issue 12). Short of the
      // limit, CLAIM dead-letters every spent delivery it passes anyway.
      plan = { shares: [{ partition: walk[0]!, claims: request.limit, bytes: request.maxBytes, first: true, extraTurn: false }] };
    } else {
      const peeks = await Promise.all(
        walk.map(async (p) => {
          const [sizes, more] = (await this.#group(PEEK, stream, group, p, [g.maxAttempts, request.limit, request.maxBytes], ctx)) as [number[], number];
          return { partition: p, sizes, more: more === 1 };
        }),
      );
      plan = planFetch(peeks, request.limit, request.maxBytes);
    }
    const claimed = await Promise.all(
      plan.shares.map(async (share) => {
        if (share.claims === 0 && !share.extraTurn) return [];
        const leaseIds = Array.from({ length: share.claims }, () => newLeaseId());
        const [now, rows] = (await this.#group(
          CLAIM,
          stream,
          group,
          share.partition,
          [
            g.maxAttempts,
            share.claims,
            share.bytes,
            share.first ? '1' : '0',
            share.extraTurn ? '1' : '0',
            request.leaseMs,
            request.consumerId,
            order,
            ...leaseIds,
          ],
          ctx,
        )) as [string, Array<[string, number, string, string, string]>];
        const leasedAt = Number(now);
        return rows.map(([sequence, attempt, t, , d], k): Lease => {
          const seq = Number(sequence);
          return {
            leaseId: leaseIds[k]!,
            receipt: receiptOf(stream, group, share.partition, seq),
            stream,
            group,
            consumerId: request.consumerId,
            attempt,
            leasedAt: new Date(leasedAt),
            expiresAt: new Date(leasedAt + request.leaseMs),
            event: decodeEvent(stream, share.partition, seq, t, d),
          };
        });
      }),
    );
    // The walk's order: round by round, partitions in rotation order.
    const leases: Lease[] = [];
    for (let round = 0; leases.length < claimed.reduce((n, c) => n + c.length, 0); round++) {
      for (const list of claimed) if (list[round]) leases.push(list[round]!);
    }
    return leases;
  }

  async renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    const out: RenewResult[] = new Array(refs.length);
    await Promise.all(
      [...groupRefs(refs)].map(async ([, indexes]) => {
        const first = refs[indexes[0]!]!;
        const args: (string | number)[] = [leaseMs];
        for (const i of indexes) args.push(refs[i]!.sequence, refs[i]!.leaseId);
        const ctx = { action: `renew leases of group "${first.group}" on stream "${first.stream}"`, stream: first.stream, group: first.group, writes: true };
        const [now, oks] = (await this.#group(RENEW, first.stream, first.group, first.partition, args, ctx)) as [string, number[]];
        indexes.forEach((i, k) => {
          const ref = refs[i]!;
          out[i] =
            oks[k] === 1
              ? { ok: true, expiresAt: new Date(Number(now) + leaseMs) }
              : { ok: false, error: staleLease(ref.stream, ref.group, `delivery ${ref.partition}/${ref.sequence} is not leased under this lease id`) };
        });
      }),
    );
    return out;
  }

  async settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    const out: SettleOutcome[] = new Array(ops.length);
    // Dead letters of one call die in the order of its ops, across partitions too.
    const orders = ops.map(() => this.#nextDeathOrder());
    await Promise.all(
      [...groupRefs(ops)].map(async ([, indexes]) => {
        const first = ops[indexes[0]!]!;
        const ctx = { action: `settle leases of group "${first.group}" on stream "${first.stream}"`, stream: first.stream, group: first.group, writes: true };
        let g: GroupMeta;
        try {
          g = (await this.#groupMeta(first.stream, first.group)).g;
        } catch (error) {
          // A lease of a group or stream that does not exist is stale, like any other unknown lease.
          if (error instanceof RheoError && (error.code === 'stream_not_found' || error.code === 'group_not_found')) {
            for (const i of indexes) out[i] = { ok: false, error: staleOf(ops[i]!) };
            return;
          }
          throw error;
        }
        const args: (string | number)[] = [g.maxAttempts];
        for (const i of indexes) {
          const op = ops[i]!;
          const reason = op.kind === 'nack' || op.kind === 'reject' ? encodeReason(op.reason) : 'n';
          args.push(op.kind, op.sequence, op.leaseId, reason, op.kind === 'nack' ? op.delayMs : 0, orders[i]!);
        }
        if (first.partition >= (await this.#stream(first.stream)).partitions) {
          for (const i of indexes) out[i] = { ok: false, error: staleOf(ops[i]!) };
          return;
        }
        const oks = (await this.#group(SETTLE, first.stream, first.group, first.partition, args, ctx)) as number[];
        indexes.forEach((i, k) => {
          out[i] = oks[k] === 1 ? { ok: true } : { ok: false, error: staleOf(ops[i]!) };
        });
      }),
    );
    return out;
  }

  // ---- progress ----------------------------------------------------------------

  async lag(stream: string, group: string, partitions: number[] | null = null): Promise<LagReport> {
    return (await this.#info(stream, group, partitions)).lag;
  }

  async groupInfo(stream: string, group: string): Promise<GroupInfo> {
    const { lag, g, leased, deadLetters, perPartition } = await this.#info(stream, group);
    return { stream, group, maxAttempts: g.maxAttempts, lag, inflight: leased, deadLetters, partitions: perPartition };
  }

  async storageStats(stream: string, group: string): Promise<GroupStorageStats> {
    const { open, deadLetters } = await this.#info(stream, group);
    return { deliveries: open, deadLetters };
  }

  async replay(stream: string, group: string, spec: NormalizedReplay, only: number[] | null): Promise<void> {
    const { meta, g } = await this.#groupMeta(stream, group);
    const partitions = scopeOf(stream, group, meta, g, only);
    const ctx = { action: `replay group "${group}" of stream "${stream}"`, stream, group, writes: true };
    if (spec.kind === 'query') {
      // Every match is found before the first is reopened, so a failed scan reopens nothing.
      const matched = await Promise.all(
        partitions.map((p) =>
          matchingSequences(stream, p, spec.query, (partition, from, count) =>
            this.#command(['xrange', this.#keys.partition(stream, partition).log, from, '+', 'COUNT', count], { ...ctx, writes: false }) as Promise<unknown[]>,
          ),
        ),
      );
      await Promise.all(
        partitions.map((p, i) => (matched[i]!.length > 0 ? this.#replayIds(stream, group, p, matched[i]!, ctx) : Promise.resolve())),
      );
      return;
    }
    if (spec.kind === 'eventIds') {
      const found = await this.#locate(stream, meta.partitions, spec.eventIds, ctx);
      const missing = spec.eventIds.find((id) => !found.has(id));
      if (missing !== undefined) throw invalidArgument(`replay: event "${missing}" does not exist in stream "${stream}"`, { stream, group });
      const bySeq = new Map<number, number[]>();
      for (const { partition, sequence } of found.values()) {
        if (!partitions.includes(partition)) continue;
        let list = bySeq.get(partition);
        if (!list) bySeq.set(partition, (list = []));
        list.push(sequence);
      }
      await Promise.all([...bySeq].map(([p, seqs]) => this.#replayIds(stream, group, p, seqs, ctx)));
      return;
    }
    const args = spec.kind === 'fromSequence' ? ['seq', spec.fromSequence] : ['at', spec.from.getTime()];
    await Promise.all(partitions.map((p) => this.#group(REPLAY, stream, group, p, args, ctx)));
  }

  /** Reopens the settled ones of `sequences` in one partition, in chunks that keep each script's argument list bounded. */
  async #replayIds(stream: string, group: string, partition: number, sequences: number[], ctx: FailureContext): Promise<void> {
    for (let i = 0; i < sequences.length; i += 5_000) {
      await this.#group(REPLAY, stream, group, partition, ['ids', ...sequences.slice(i, i + 5_000)], ctx);
    }
  }

  async resetGroup(stream: string, group: string, start: GroupStart, only: number[] | null = null): Promise<void> {
    const { meta, g } = await this.#groupMeta(stream, group);
    const scope = scopeOf(stream, group, meta, g, only);
    checkStart(stream, group, meta, start, scope);
    const ctx = { action: `reset group "${group}" of stream "${stream}"`, stream, group, writes: true };
    await Promise.all(scope.map((p) => this.#group(RESET_GROUP, stream, group, p, startArgs(start, p), ctx)));
  }

  /**
   * Dead-letter ids are 42 digits (DEAD_LETTER_ID): the time in ms, this
   * process's order of the call, the partition and a per-partition counter,
   * so they grow in the order deliveries died, and a page is a merge of each
   * partition's next ids. Deaths in one millisecond in different processes
   * (on a cluster: on different servers, whose clocks may differ) are
   * ordered arbitrarily, but the same way every time.
   */
  async deadLetters(stream: string, group: string, limit: number, after: string | null, maxBytes: number): Promise<DeadLetter[]> {
    const { meta, g } = await this.#groupMeta(stream, group);
    const covered = coveredOf(meta, g);
    const ctx = { action: `list dead letters of group "${group}" on stream "${stream}"`, stream, group, writes: false };
    let cursorPartition = -1;
    if (after !== null) {
      cursorPartition = DEAD_LETTER_ID.test(after) ? Number(after.slice(27, 32)) : -1;
      if (!covered.includes(cursorPartition)) throw cursorNotFound(stream, group, after);
    }
    const pages = await Promise.all(
      covered.map(async (p) => {
        const reply = await this.#group(DEAD_LETTERS, stream, group, p, [after ?? '', limit, p === cursorPartition ? '1' : '0'], ctx);
        if (reply === 'nocursor') throw cursorNotFound(stream, group, after!);
        return (reply as Array<[string, string, string, string, string, string]>).map(([id, sequence, record, t, z, d]) => {
          const [, attempt, at, reason] = /^(\d+)\|(\d+)\|(-?\d+)\|(.*)$/s.exec(record)!.slice(1, 5);
          const letter: DeadLetter = {
            id,
            stream,
            group,
            attempt: Number(attempt),
            reason: decodeReason(reason!),
            deadLetteredAt: new Date(Number(at)),
            event: decodeEvent(stream, p, Number(sequence), t, d),
          };
          return { letter, size: Number(z) };
        });
      }),
    );
    const merged = pages.flat().sort((a, b) => (a.letter.id < b.letter.id ? -1 : a.letter.id > b.letter.id ? 1 : 0));
    const out: DeadLetter[] = [];
    let bytes = 0;
    for (const { letter, size } of merged.slice(0, limit)) {
      bytes += size;
      if (bytes > maxBytes && out.length > 0) break;
      out.push(letter);
    }
    return out;
  }

  async redrive(stream: string, group: string, eventIds: string[] | null): Promise<number> {
    const { meta, g } = await this.#groupMeta(stream, group);
    const covered = coveredOf(meta, g);
    const ctx = { action: `redrive dead letters of group "${group}" on stream "${stream}"`, stream, group, writes: true };
    if (eventIds === null) {
      const counts = await Promise.all(covered.map((p) => this.#group(REDRIVE, stream, group, p, ['all'], ctx)));
      return counts.reduce((n: number, c) => n + Number(c), 0);
    }
    const found = await this.#locate(stream, meta.partitions, eventIds, ctx);
    const byPartition = new Map<number, number[]>();
    for (const { partition, sequence } of found.values()) {
      if (!covered.includes(partition)) continue; // the group holds no dead letter there
      let list = byPartition.get(partition);
      if (!list) byPartition.set(partition, (list = []));
      list.push(sequence);
    }
    const counts = await Promise.all([...byPartition].map(([p, seqs]) => this.#group(REDRIVE, stream, group, p, ['seqs', ...seqs], ctx)));
    return counts.reduce((n: number, c) => n + Number(c), 0);
  }

  // ---- retention and deletion (retention.ts) -----------------------------------

  async setRetention(stream: string, policy: RetentionPolicy | null): Promise<void> {
    await retention.setRetention(this.#host, stream, policy);
  }

  async trim(stream: string, request: TrimRequest): Promise<TrimReport> {
    return retention.trim(this.#host, stream, request);
  }

  async deleteGroup(stream: string, group: string): Promise<void> {
    await retention.deleteGroup(this.#host, stream, group);
  }

  async deleteStream(stream: string): Promise<void> {
    await retention.deleteStream(this.#host, stream);
  }

  /** Drops the cached catalog entries of a stream (and of one or all of its groups). */
  #forget(stream: string, group?: string): void {
    if (group === undefined) {
      this.#streams.delete(stream);
      for (const key of this.#groups.keys()) if (key.startsWith(`${stream}\u0000`)) this.#groups.delete(key);
    } else {
      this.#groups.delete(`${stream}\u0000${group}`);
    }
  }

  // ---- partition ownership (ownership.ts) -----------------------------------------

  heartbeat(stream: string, group: string, request: HeartbeatRequest): Promise<MemberView> {
    return this.#ownership.heartbeat(stream, group, request);
  }

  leaveGroup(stream: string, group: string, memberId: string): Promise<void> {
    return this.#ownership.leaveGroup(stream, group, memberId);
  }

  releasePartitions(fences: OwnershipFence[]): Promise<SettleOutcome[]> {
    return this.#ownership.releasePartitions(fences);
  }

  readOwned(fence: OwnershipFence, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    return this.#ownership.readOwned(fence, after, limit, maxBytes);
  }

  commit(ops: CommitOp[]): Promise<SettleOutcome[]> {
    return this.#ownership.commit(ops);
  }

  members(stream: string, group: string): Promise<GroupMembership> {
    return this.#ownership.members(stream, group);
  }

  waitForAppend(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.#closed) return Promise.resolve(false);
    return this.#waiters.wait(stream, timeoutMs, signal);
  }

  // ---- internals -------------------------------------------------------------------

  #nextDeathOrder(): number {
    this.#deathOrder = (this.#deathOrder + 1) % 1e12;
    return this.#deathOrder;
  }

  /** Connects on first use (rheo's own client) and hands out the client. */
  #ready(): Promise<RedisClientLike> {
    if (this.#closed) return Promise.reject(new RheoError('closed', 'the redis backend is closed'));
    if (this.#client) return this.#client;
    const connecting = (async () => {
      if (this.#connection.client !== undefined) return this.#connection.client;
      const { client } = await createClient(this.#connection);
      // ioredis reports a dropped connection as an 'error' event; without a
      // listener it would only log, and calls already fail with a code.
      client.on('error', () => {});
      this.#owned = client;
      try {
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`connect timed out after ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS);
        });
        try {
          await Promise.race([connectReady(client), timeout]);
        } finally {
          clearTimeout(timer);
        }
      } catch (error) {
        this.#owned = null;
        client.disconnect();
        throw error;
      }
      if (this.#closed) {
        client.disconnect();
        throw new RheoError('closed', 'the redis backend is closed');
      }
      return client;
    })();
    this.#client = connecting;
    connecting.catch(() => {
      if (this.#client === connecting) this.#client = null;
    });
    return connecting;
  }

  async #client_(ctx: FailureContext): Promise<RedisClientLike> {
    try {
      return await this.#ready();
    } catch (error) {
      if (error instanceof RheoError && (error.code === 'closed' || error.code === 'unsupported')) throw error;
      throw new RheoError('backend_unavailable', `${ctx.action} failed: cannot connect to Redis: ${(error as Error).message}`, {
        stream: ctx.stream,
        group: ctx.group,
        cause: error,
      });
    }
  }

  async #command(args: [string, ...(string | number)[]], ctx: FailureContext): Promise<unknown> {
    const client = await this.#client_(ctx);
    if (this.#closed) throw new RheoError('closed', 'the redis backend is closed');
    return this.#scripts.command(client, args, ctx);
  }

  async #run(script: LuaScript, keys: string[], args: (string | number)[], ctx: FailureContext): Promise<unknown> {
    const client = await this.#client_(ctx);
    if (this.#closed) throw new RheoError('closed', 'the redis backend is closed');
    return this.#scripts.run(client, script, keys, args, ctx);
  }

  /**
   * A group script over one partition; `now` comes first (empty: the server's TIME), then the partition.
   * REPLAY, RESET_GROUP and REDRIVE run as their variants that also fence the partition's owner (ownership.ts).
   */
  #group(script: LuaScript, stream: string, group: string, partition: number, args: (string | number)[], ctx: FailureContext): Promise<unknown> {
    const now = this.#clock ? String(this.#clock.now()) : '';
    const fencing = FENCING_VARIANTS.get(script);
    const keys = this.#keys.group(stream, group, partition);
    const run = fencing
      ? this.#run(fencing, [...keys, this.#keys.owner(stream, group, partition)], [now, partition, ...args], ctx)
      : this.#run(script, keys, [now, partition, ...args], ctx);
    return run.catch((error: unknown) => {
      // No state: the group (or its stream) was deleted since this process cached it; the next call looks again.
      if (error instanceof RheoError && error.code === 'group_not_found') this.#forget(stream);
      throw error;
    });
  }

  async #stream(stream: string): Promise<StreamMeta> {
    const cached = this.#streams.get(stream);
    if (cached) {
      if (this.#closed) throw new RheoError('closed', 'the redis backend is closed');
      return cached;
    }
    const raw = await this.#command(['hget', this.#keys.streams, stream], { action: `look up stream "${stream}"`, stream, writes: false });
    if (raw === null) throw streamNotFound(stream);
    const meta = JSON.parse(raw as string) as StreamMeta;
    this.#streams.set(stream, meta);
    return meta;
  }

  async #groupMeta(stream: string, group: string): Promise<{ meta: StreamMeta; g: GroupMeta }> {
    const meta = await this.#stream(stream);
    const key = `${stream}\u0000${group}`;
    const cached = this.#groups.get(key);
    if (cached) return { meta, g: cached };
    const raw = await this.#command(['hget', this.#keys.groups(stream), group], {
      action: `look up group "${group}" of stream "${stream}"`,
      stream,
      group,
      writes: false,
    });
    if (raw === null) throw groupNotFound(stream, group);
    const g = JSON.parse(raw as string) as GroupMeta;
    this.#groups.set(key, g);
    return { meta, g };
  }

  async #info(
    stream: string,
    group: string,
    only: number[] | null = null,
  ): Promise<{
    lag: LagReport;
    g: GroupMeta;
    leased: number;
    deadLetters: number;
    open: number;
    perPartition: GroupInfo['partitions'];
  }> {
    const { meta, g } = await this.#groupMeta(stream, group);
    const scope = scopeOf(stream, group, meta, g, only);
    const ctx = { action: `read progress of group "${group}" on stream "${stream}"`, stream, group, writes: false };
    const rows = (await Promise.all(scope.map((p) => this.#group(INFO, stream, group, p, [], ctx)))) as Array<
      [string, string, string, number, number, number, string]
    >;
    const partitions: Record<number, PartitionLag> = {};
    let total = 0;
    let leased = 0;
    let deadLetters = 0;
    let open = 0;
    const perPartition: GroupInfo['partitions'] = {};
    rows.forEach(([f, h, oldest, l, dl, o, low], i) => {
      const p = scope[i]!;
      const frontier = Number(f);
      const highWatermark = Number(h);
      const lag = Math.max(0, highWatermark - frontier);
      total += lag;
      partitions[p] = { lowWatermark: Number(low), frontier, highWatermark, lag, oldestUnsettledAt: lag > 0 && oldest !== '' ? new Date(Number(oldest)) : null };
      perPartition[p] = { inflight: l, deadLetters: dl };
      leased += l;
      deadLetters += dl;
      open += o;
    });
    return { lag: { stream, group, lag: total, partitions }, g, leased, deadLetters, open, perPartition };
  }

  /** Where each id is stored: one HMGET per partition's id index. */
  async #locate(stream: string, partitions: number, ids: string[], ctx: FailureContext): Promise<Map<string, { partition: number; sequence: number }>> {
    const found = new Map<string, { partition: number; sequence: number }>();
    if (ids.length === 0) return found;
    const replies = await Promise.all(
      range(partitions).map((p) => this.#command(['hmget', this.#keys.partition(stream, p).ids, ...ids], { ...ctx, writes: false }) as Promise<(string | null)[]>),
    );
    replies.forEach((seqs, p) =>
      seqs.forEach((s, k) => {
        if (s !== null && !found.has(ids[k]!)) found.set(ids[k]!, { partition: p, sequence: Number(s) });
      }),
    );
    return found;
  }
}

/** 15 digits of ms, 12 of order, 5 of partition, 10 of counter (lua/group-prelude.ts `dead`). */
const DEAD_LETTER_ID = /^\d{42}$/;

function range(n: number): number[] {
  return [...Array(n).keys()];
}

function partitionList(stream: string, partitions: number, only: number[] | null): number[] {
  if (only === null) return range(partitions);
  for (const p of only) if (p >= partitions) throw invalidPartition(stream, p, partitions);
  return only;
}

/** The partitions group `g` covers: its own, or all of the stream's. */
function coveredOf(meta: StreamMeta, g: GroupMeta): number[] {
  return g.partitions ? [...g.partitions] : range(meta.partitions);
}

/** The partitions a call on a group covers: the group's, or `only` (each in the stream, else out of range, and in the group). */
function scopeOf(stream: string, group: string, meta: StreamMeta, g: GroupMeta, only: number[] | null): number[] {
  if (only !== null) partitionList(stream, meta.partitions, only);
  return scopedPartitions(stream, group, coveredOf(meta, g), only);
}

/** A start map may only name partitions of the stream, and of `scope`. */
function checkStart(stream: string, group: string, meta: StreamMeta, start: GroupStart, scope: readonly number[]): void {
  if (start.kind !== 'after') return;
  for (const key of Object.keys(start.perPartition)) {
    if (Number(key) >= meta.partitions) throw invalidPartition(stream, key, meta.partitions);
  }
  checkStartScope(stream, group, start.perPartition, scope);
}

function startArgs(start: GroupStart, partition: number): (string | number)[] {
  if (start.kind === 'at') return ['at', start.at.getTime()];
  return ['after', start.perPartition[partition] ?? start.after];
}

/** Refs grouped by the script call that serves them: one per (stream, group, partition). */
function groupRefs(refs: LeaseRef[]): Map<string, number[]> {
  const groups = new Map<string, number[]>();
  refs.forEach((ref, i) => {
    const key = `${ref.stream}\u0000${ref.group}\u0000${ref.partition}`;
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push(i);
  });
  return groups;
}

function staleOf(ref: LeaseRef): RheoError {
  return staleLease(ref.stream, ref.group, `delivery ${ref.partition}/${ref.sequence} is not leased under this lease id`);
}

function cursorNotFound(stream: string, group: string, after: string): RheoError {
  return new RheoError('cursor_not_found', `dead-letter cursor "${after}" not found in group "${group}" of stream "${stream}"`, { stream, group });
}
