import type { Clock } from '../../core/clock.js';
import { RheoError, groupNotFound, streamNotFound } from '../../core/errors.js';
import { connectReady, createClient, loadCommandClass, ScriptRunner, type RedisClientLike, type RedisConnection } from './connection.js';
import type { FailureContext } from './errors.js';
import type { KeyLayout } from './keys.js';
import type { LuaScript } from './lua/scripts.js';
import { FENCING_VARIANTS } from './lua/ownership-scripts.js';
import { BlockingFetches } from './blocking-fetch.js';
import { AppendWaiters } from './notifications.js';
import { range } from './partition-scope.js';
import type { StreamCatalogEntry } from './retention.js';

/** A first connection (a cluster's included: slots discovered) that takes longer fails with backend_unavailable. */
const CONNECT_TIMEOUT_MS = 10_000;

/** Connects `client` (connectReady), giving up after CONNECT_TIMEOUT_MS. */
async function connectWithin(client: RedisClientLike): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`connect timed out after ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS);
  });
  try {
    await Promise.race([connectReady(client), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** close() waits this long for QUIT before dropping the socket. */
const QUIT_TIMEOUT_MS = 2_000;

export type StreamMeta = StreamCatalogEntry;

export interface GroupMeta {
  maxAttempts: number;
  /** The partitions the group covers (GroupSpec.partitions); absent: all of the stream's. */
  partitions?: number[];
}

export interface RedisStoreOptions {
  connection: RedisConnection;
  keys: KeyLayout;
  clock: Clock | null;
  /** Publish once per append call so `waitForAppend` wakes promptly. */
  notify: boolean;
  /** A Redis Cluster: its commands go to several nodes, each over its own connection. */
  cluster: boolean;
}

/** The part of a socket a burst uses. */
interface Corkable {
  cork(): void;
  uncork(): void;
}

/**
 * What every concern of the Redis backend (log, leases, progress,
 * ownership, retention) shares: the connection (made on first use, ended by
 * `close()` when rheo made it), the key layout, the time authority, how
 * commands and scripts run, and this process's cache of the stream and
 * group catalogs.
 */
export class RedisStore {
  readonly keys: KeyLayout;
  readonly clock: Clock | null;
  readonly notify: boolean;
  readonly cluster: boolean;
  /** The pub/sub side: who waits for appends, on a connection of its own. */
  readonly waiters: AppendWaiters;
  /** Idle consumers' claims that wait inside Redis for the append (one server only). */
  readonly blocking: BlockingFetches;
  readonly #connection: RedisConnection;
  readonly #scripts = new ScriptRunner();
  readonly #streams = new Map<string, StreamMeta>();
  readonly #groups = new Map<string, GroupMeta>();
  /** When each stream was last looked up again after an empty read. */
  readonly #rechecked = new Map<string, number>();
  /** Orders dead letters that die in one millisecond (see DEAD_LETTER_ID in progress.ts). */
  #deathOrder = 0;
  #client: Promise<RedisClientLike> | null = null;
  #owned: RedisClientLike | null = null;
  /** The client once ready, for a burst (which cannot wait for it). */
  #connected: RedisClientLike | null = null;
  /** The corked socket of a burst, and how many of its commands are still to be issued (see burst). */
  #corked: Corkable | null = null;
  #burstLeft = 0;
  #closed = false;

  constructor(options: RedisStoreOptions) {
    this.#connection = options.connection;
    this.keys = options.keys;
    this.clock = options.clock;
    this.notify = options.notify;
    this.cluster = options.cluster;
    this.waiters = new AppendWaiters(
      () => this.duplicate(),
      (stream) => this.keys.appendChannel(stream),
      (channel) => this.keys.streamOfChannel(channel),
    );
    this.blocking = new BlockingFetches(this);
  }

  /** A connection of its own beside the main one (the subscriber's, a blocking fetch's), connected. */
  async duplicate(): Promise<RedisClientLike> {
    const client = (await this.ready()).duplicate();
    client.on('error', () => {});
    // A Cluster's duplicate connects as its original does (connectReady):
    // its first connect() may never settle though it gets ready, and a
    // subscriber stuck there would leave every wait to its poll.
    if (client.status === 'wait') {
      try {
        await connectWithin(client);
      } catch (error) {
        client.disconnect();
        throw error;
      }
    }
    return client;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The time argument of a script: the injected clock's, or empty for the server's TIME. */
  now(): string {
    return this.clock ? String(this.clock.now()) : '';
  }

  nextDeathOrder(): number {
    this.#deathOrder = (this.#deathOrder + 1) % 1e12;
    return this.#deathOrder;
  }

  /** Refuses every later call, stops listening, and ends the client rheo made (a borrowed one stays open). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.blocking.close();
    await this.waiters.close();
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

  /** Connects on first use (rheo's own client) and hands out the client. */
  ready(): Promise<RedisClientLike> {
    if (this.#closed) return Promise.reject(new RheoError('closed', 'the redis backend is closed'));
    if (this.#client) return this.#client;
    const connecting = (async () => {
      if (this.#connection.client !== undefined) {
        // Not awaited: a borrowed client is usable at once, and its scripts go through call() until this lands.
        void loadCommandClass().then((Command) => this.#scripts.useCommandClass(Command));
        return (this.#connected = this.#connection.client);
      }
      const { client } = await createClient(this.#connection);
      this.#scripts.useCommandClass(await loadCommandClass());
      // ioredis reports a dropped connection as an 'error' event; without a
      // listener it would only log, and calls already fail with a code.
      client.on('error', () => {});
      this.#owned = client;
      try {
        await connectWithin(client);
      } catch (error) {
        this.#owned = null;
        client.disconnect();
        throw error;
      }
      if (this.#closed) {
        client.disconnect();
        throw new RheoError('closed', 'the redis backend is closed');
      }
      return (this.#connected = client);
    })();
    this.#client = connecting;
    connecting.catch(() => {
      if (this.#client === connecting) this.#client = null;
    });
    return connecting;
  }

  async #clientFor(ctx: FailureContext): Promise<RedisClientLike> {
    try {
      return await this.ready();
    } catch (error) {
      if (error instanceof RheoError && (error.code === 'closed' || error.code === 'unsupported')) throw error;
      throw new RheoError('backend_unavailable', `${ctx.action} failed: cannot connect to Redis: ${(error as Error).message}`, {
        stream: ctx.stream,
        group: ctx.group,
        cause: error,
      });
    }
  }

  /**
   * Sends one command. Once the client is there, `command` and `run` hand
   * their command to it before they return, so commands leave in the order
   * of the calls: an append's PUBLISH goes after its scripts (log.ts).
   */
  command(args: [string, ...(string | number)[]], ctx: FailureContext): Promise<unknown> {
    const client = this.#connected;
    if (client === null || this.#closed) return this.#clientFor(ctx).then((c) => this.#command(c, args, ctx));
    return this.#command(client, args, ctx);
  }

  run(script: LuaScript, keys: string[], args: (string | number)[], ctx: FailureContext): Promise<unknown> {
    const client = this.#connected;
    if (client === null || this.#closed) return this.#clientFor(ctx).then((c) => this.#run(c, script, keys, args, ctx));
    return this.#run(client, script, keys, args, ctx);
  }

  /** One command on a connection of the caller's (a blocking fetch's), not the main one. */
  commandOn(client: RedisClientLike, args: [string, ...(string | number)[]], ctx: FailureContext): Promise<unknown> {
    if (this.#closed) return Promise.reject(new RheoError('closed', 'the redis backend is closed'));
    return this.#scripts.command(client, args, ctx);
  }

  /** A script on a connection of the caller's (a blocking fetch's), not the main one. */
  runOn(client: RedisClientLike, script: LuaScript, keys: string[], args: (string | number)[], ctx: FailureContext): Promise<unknown> {
    if (this.#closed) return Promise.reject(new RheoError('closed', 'the redis backend is closed'));
    return this.#scripts.run(client, script, keys, args, ctx);
  }

  /** How many scripts had to be sent again (a server that lost its script cache); see ScriptRunner. */
  get scriptReloads(): number {
    return this.#scripts.reloads;
  }

  #command(client: RedisClientLike, args: [string, ...(string | number)[]], ctx: FailureContext): Promise<unknown> {
    if (this.#closed) return Promise.reject(new RheoError('closed', 'the redis backend is closed'));
    const reply = this.#scripts.command(client, args, ctx);
    this.#issued();
    return reply;
  }

  #run(client: RedisClientLike, script: LuaScript, keys: string[], args: (string | number)[], ctx: FailureContext): Promise<unknown> {
    if (this.#closed) return Promise.reject(new RheoError('closed', 'the redis backend is closed'));
    const reply = this.#scripts.run(client, script, keys, args, ctx);
    this.#issued();
    return reply;
  }

  /**
   * Runs `call` on every item at once (the per-partition scripts of one
   * fetch or settle), each issuing one command: they leave in one socket
   * write instead of one each. The client's socket is corked until the last
   * of them is issued, or at the latest until this turn's microtasks have
   * run (one that fails before it is sent, say). Measured on an 8-partition
   * drain (docs/performance.md): one write per fetch and per settle instead
   * of eight cut both the client's and Redis's CPU per event. A command
   * issued alone is never held back. A Cluster client has no socket of its
   * own, and its commands go out as before.
   */
  burst<T, R>(items: readonly T[], call: (item: T) => Promise<R>): Promise<R[]> {
    this.#writeBurst(items.length);
    return Promise.all(items.map(call));
  }

  /** Corks the socket for `count` commands about to be issued (see burst). */
  #writeBurst(count: number): void {
    if (count < 2 || this.#closed) return;
    const stream = (this.#connected as { stream?: Partial<Corkable> } | null)?.stream;
    if (this.#corked === null) {
      if (!stream || typeof stream.cork !== 'function' || typeof stream.uncork !== 'function') return;
      const corked = stream as Corkable;
      corked.cork();
      this.#corked = corked;
      process.nextTick(() => this.#uncork(corked));
    }
    this.#burstLeft += count;
  }

  /** One command was handed to the client: the burst's last one sends them all. */
  #issued(): void {
    if (this.#corked !== null && --this.#burstLeft <= 0) this.#uncork(this.#corked);
  }

  #uncork(stream: Corkable): void {
    if (this.#corked !== stream) return;
    this.#corked = null;
    this.#burstLeft = 0;
    stream.uncork();
  }

  /**
   * A group script over one partition; `now` comes first (empty: the server's TIME), then the partition.
   * REPLAY, RESET_GROUP and REDRIVE run as their variants that also fence the partition's owner (ownership.ts).
   * `on`: a connection of the caller's (a blocking fetch's) instead of the main one.
   */
  group(
    script: LuaScript,
    stream: string,
    group: string,
    partition: number,
    args: (string | number)[],
    ctx: FailureContext,
    on: RedisClientLike | null = null,
  ): Promise<unknown> {
    const now = this.now();
    const fencing = FENCING_VARIANTS.get(script);
    const keys = this.keys.group(stream, group, partition);
    const run = fencing
      ? this.run(fencing, [...keys, this.keys.owner(stream, group, partition)], [now, partition, ...args], ctx)
      : on !== null
        ? this.runOn(on, script, keys, [now, partition, ...args], ctx)
        : this.run(script, keys, [now, partition, ...args], ctx);
    return run.catch((error: unknown) => {
      // No state: the group (or its stream) was deleted since this process cached it; the next call looks again.
      if (error instanceof RheoError && error.code === 'group_not_found') this.forget(stream);
      throw error;
    });
  }

  async stream(stream: string): Promise<StreamMeta> {
    const cached = this.#streams.get(stream);
    if (cached) {
      if (this.#closed) throw new RheoError('closed', 'the redis backend is closed');
      return cached;
    }
    const raw = await this.command(['hget', this.keys.streams, stream], { action: `look up stream "${stream}"`, stream, writes: false });
    if (raw === null) throw streamNotFound(stream);
    const meta = JSON.parse(raw as string) as StreamMeta;
    this.#streams.set(stream, meta);
    return meta;
  }

  /** groupMeta's answer when both entries are cached: a woken consumer's claim goes out without waiting a turn for it. */
  cachedGroupMeta(stream: string, group: string): { meta: StreamMeta; g: GroupMeta } | undefined {
    if (this.#closed) return undefined; // groupMeta says why
    const meta = this.#streams.get(stream);
    const g = meta && this.#groups.get(groupKey(stream, group));
    return g ? { meta: meta!, g } : undefined;
  }

  async groupMeta(stream: string, group: string): Promise<{ meta: StreamMeta; g: GroupMeta }> {
    const known = this.cachedGroupMeta(stream, group);
    if (known) return known;
    const meta = await this.stream(stream);
    const cached = this.#groups.get(groupKey(stream, group));
    if (cached) return { meta, g: cached };
    const raw = await this.command(['hget', this.keys.groups(stream), group], {
      action: `look up group "${group}" of stream "${stream}"`,
      stream,
      group,
      writes: false,
    });
    if (raw === null) throw groupNotFound(stream, group);
    const g = JSON.parse(raw as string) as GroupMeta;
    this.#groups.set(groupKey(stream, group), g);
    return { meta, g };
  }

  /** Drops the cached catalog entries of a stream (and of one or all of its groups). */
  forget(stream: string, group?: string): void {
    if (group === undefined) {
      this.#streams.delete(stream);
      for (const key of this.#groups.keys()) if (key.startsWith(groupKey(stream, ''))) this.#groups.delete(key);
    } else {
      this.#groups.delete(groupKey(stream, group));
    }
  }

  /** Looks a cached stream up again, at most once a second per name; true when it is gone (and then forgotten). */
  async deletedMeanwhile(stream: string): Promise<boolean> {
    const now = Date.now();
    if (now - (this.#rechecked.get(stream) ?? 0) < 1_000) return false;
    this.#rechecked.set(stream, now);
    const raw = await this.command(['hget', this.keys.streams, stream], { action: `look up stream "${stream}"`, stream, writes: false });
    this.forget(stream);
    if (raw === null) return true;
    // Perhaps deleted and created again: serve the stream as it is now.
    this.#streams.set(stream, JSON.parse(raw as string) as StreamMeta);
    return false;
  }

  /** Where each id is stored: one HMGET per partition's id index. */
  async locate(stream: string, partitions: number, ids: string[], ctx: FailureContext): Promise<Map<string, { partition: number; sequence: number }>> {
    const found = new Map<string, { partition: number; sequence: number }>();
    if (ids.length === 0) return found;
    const replies = await Promise.all(
      range(partitions).map((p) => this.command(['hmget', this.keys.partition(stream, p).ids, ...ids], { ...ctx, writes: false }) as Promise<(string | null)[]>),
    );
    replies.forEach((seqs, p) =>
      seqs.forEach((s, k) => {
        if (s !== null && !found.has(ids[k]!)) found.set(ids[k]!, { partition: p, sequence: Number(s) });
      }),
    );
    return found;
  }
}

/** A group's entry in the catalog cache (a NUL cannot occur in a stream name, so a stream's keys share its prefix). */
function groupKey(stream: string, group: string): string {
  return `${stream}\u0000${group}`;
}
