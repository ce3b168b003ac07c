import { createHash } from 'node:crypto';
import { RheoError, invalidArgument } from '../../core/errors.js';
import { classifyRedisError, isNoScript, type FailureContext } from './errors.js';
import type { LuaScript } from './lua/scripts.js';

/**
 * The part of an ioredis `Redis` or `Cluster` that rheo uses. Declared here
 * (not imported from ioredis) so that rheo's type declarations load without
 * ioredis installed; both ioredis classes satisfy it.
 */
export interface RedisClientLike {
  call(command: string, ...args: (string | number)[]): Promise<unknown>;
  duplicate(): RedisClientLike;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  removeListener(event: string, listener: (...args: unknown[]) => void): unknown;
  quit(): Promise<unknown>;
  disconnect(): void;
  connect(): Promise<void>;
  readonly status: string;
}

/** A single server by URL, a Redis Cluster by its seed nodes, or a client the application owns. */
export type RedisConnection =
  | { url: string; nodes?: undefined; client?: undefined }
  | { nodes: string[]; url?: undefined; client?: undefined }
  | { client: RedisClientLike; url?: undefined; nodes?: undefined };

/** An ioredis `Command`: the part `ScriptRunner` sets up before sending it. */
interface IoCommand {
  transformReply(reply: unknown): unknown;
}
type CommandClass = new (name: string, args: (string | number)[], options: Record<string, unknown>) => IoCommand;

interface IoRedisModule {
  Redis: new (url: string, options: Record<string, unknown>) => RedisClientLike;
  Cluster: new (nodes: Array<{ host: string; port: number }>, options: Record<string, unknown>) => RedisClientLike;
  Command: CommandClass | null;
}

/** What an ioredis client has besides `RedisClientLike` that sending a prepared `Command` needs. */
interface CommandSender {
  sendCommand(command: IoCommand): Promise<unknown>;
  options?: { keyPrefix?: string; showFriendlyErrorStack?: boolean };
}

/** ioredis's `Command` class, or null when it cannot be loaded (scripts then go through `call`). Never rejects. */
export function loadCommandClass(): Promise<CommandClass | null> {
  return loadIoRedis().then(
    (io) => io.Command,
    () => null,
  );
}

/** Loaded on first use only, so importing rheo never loads ioredis (an optional peer). */
async function loadIoRedis(): Promise<IoRedisModule> {
  try {
    const mod = (await import('ioredis')) as unknown as Partial<IoRedisModule> & { default?: Partial<IoRedisModule> };
    const Redis = mod.Redis ?? mod.default?.Redis;
    const Cluster = mod.Cluster ?? mod.default?.Cluster;
    if (!Redis || !Cluster) throw new Error('ioredis exports neither Redis nor Cluster');
    return { Redis, Cluster, Command: mod.Command ?? mod.default?.Command ?? null };
  } catch (error) {
    throw new RheoError('unsupported', 'redisBackend needs the optional peer dependency ioredis 5: npm install ioredis', { cause: error });
  }
}

/**
 * Options for clients rheo creates: fail fast instead of queueing while
 * disconnected (a call gets `backend_unavailable` at once, not a hang), and
 * never resend a command after a reconnect (a resent write could apply twice
 * behind the caller's back; the caller gets `ambiguous` and retries with
 * the same id or lease instead).
 */
const CLIENT_OPTIONS = {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  autoResendUnfulfilledCommands: false,
  connectionName: 'rheo',
  retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
};

function parseNode(url: string): { host: string; port: number } {
  const u = new URL(url.includes('://') ? url : `redis://${url}`);
  return { host: u.hostname, port: u.port === '' ? 6379 : Number(u.port) };
}

const borrowedClients = new WeakMap<object, number>();
let borrowedCount = 0;

/**
 * The store a Redis backend reaches, as `Backend.storeId`: the server (host,
 * port, database number) or the cluster's seed nodes, and the key prefix.
 * A borrowed client is named by the host, port and database its options
 * give (a cluster by its startup nodes); a client that shows none of them is
 * its own store, by object, so no two unknown clients are ever taken for one.
 */
export function redisStoreId(connection: RedisConnection, prefix: string): string {
  if (connection.url !== undefined) {
    const u = parsedUrl(connection.url);
    if (!u) return `redis:${connection.url}#${prefix}`;
    return `redis://${u.hostname}:${u.port || '6379'}/${u.pathname.slice(1) || '0'}#${prefix}`;
  }
  if (connection.nodes !== undefined) {
    const nodes = connection.nodes.map((node) => {
      const u = parsedUrl(node.includes('://') ? node : `redis://${node}`);
      return u ? `${u.hostname}:${u.port || '6379'}` : node;
    });
    return `redis-cluster://${[...new Set(nodes)].sort().join(',')}#${prefix}`;
  }
  const client = connection.client as unknown as {
    options?: { host?: unknown; port?: unknown; db?: unknown };
    startupNodes?: unknown;
  };
  if (Array.isArray(client.startupNodes) && client.startupNodes.length > 0) {
    const nodes = client.startupNodes.map((node: unknown) =>
      typeof node === 'string' ? node : `${String((node as { host?: unknown }).host ?? '')}:${String((node as { port?: unknown }).port ?? '')}`,
    );
    return `redis-cluster://${[...new Set(nodes)].sort().join(',')}#${prefix}`;
  }
  const options = client.options;
  if (options && typeof options.host === 'string' && typeof options.port === 'number') {
    return `redis://${options.host}:${options.port}/${typeof options.db === 'number' ? options.db : 0}#${prefix}`;
  }
  let id = borrowedClients.get(connection.client);
  if (id === undefined) {
    id = ++borrowedCount;
    borrowedClients.set(connection.client, id);
  }
  return `redis-client#${id}#${prefix}`;
}

/** A URL, or null for a string that is none (the first use of the client then reports it). */
function parsedUrl(text: string): URL | null {
  try {
    return new URL(text);
  } catch {
    return null;
  }
}

export async function createClient(connection: RedisConnection): Promise<{ client: RedisClientLike; cluster: boolean }> {
  const io = await loadIoRedis();
  if (connection.url !== undefined) {
    return { client: new io.Redis(connection.url, { ...CLIENT_OPTIONS }), cluster: false };
  }
  const nodes = (connection.nodes ?? []).map(parseNode);
  const client = new io.Cluster(nodes, {
    lazyConnect: true,
    enableOfflineQueue: false,
    clusterRetryStrategy: CLIENT_OPTIONS.retryStrategy,
    // ioredis gives CLUSTER SLOTS 1 s by default; a busy node (a CI host running
    // the whole suite) can take longer, and every failed refresh restarts the
    // connect, which then ran into the backend's 10 s connect timeout.
    slotsRefreshTimeout: 5_000,
    // The per-node connections keep their offline queue: the cluster sends
    // CLUSTER SLOTS / CLUSTER INFO on a node connection that may still be
    // connecting, and without the queue those were refused, the connect
    // restarted, and a busy host never got the cluster ready within the
    // connect timeout. Fail-fast stays where callers see it: the cluster's own
    // enableOfflineQueue: false and maxRetriesPerRequest: 0 on every node.
    redisOptions: { ...CLIENT_OPTIONS, lazyConnect: false, enableOfflineQueue: true },
  });
  return { client, cluster: true };
}

/**
 * Connects `client` and resolves once it is ready. ioredis' `Cluster#connect()`
 * is not enough on its own: its ready check (CLUSTER INFO) goes to a random
 * node, and while that node's own connection is still in its handshake the
 * cluster (offline queue off, as rheo wants) refuses the command with
 * "Connection is closed.". The failed check disconnects and reconnects, but the
 * promise of the first connect() has already dropped its close listener and
 * never settles, though the reconnect gets ready within a second or two. On a
 * loaded host that happened about once in six connects, and each ran into the
 * 10 s connect timeout (issue 12). So a 'ready' event resolves too.
 */
export function connectReady(client: RedisClientLike): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onReady = (): void => {
      client.removeListener('ready', onReady);
      resolve();
    };
    client.on('ready', onReady);
    client.connect().then(onReady, (error: unknown) => {
      client.removeListener('ready', onReady);
      reject(error instanceof Error ? error : new Error(String(error)));
    });
  });
}

export function checkConnection(connection: unknown): RedisConnection {
  const c = connection as Partial<Record<'url' | 'nodes' | 'client', unknown>> | null;
  if (c === null || typeof c !== 'object') throw invalidArgument('redisBackend expects { url }, { nodes } or { client }');
  const given = (['url', 'nodes', 'client'] as const).filter((k) => c[k] !== undefined);
  if (given.length !== 1) throw invalidArgument(`redisBackend takes exactly one of url, nodes or client, got ${given.join(', ') || 'none'}`);
  if (c.url !== undefined && (typeof c.url !== 'string' || !/^rediss?:\/\//.test(c.url))) {
    throw invalidArgument('redisBackend url must be a redis:// or rediss:// URL');
  }
  if (c.nodes !== undefined && (!Array.isArray(c.nodes) || c.nodes.length === 0 || !c.nodes.every((n) => typeof n === 'string'))) {
    throw invalidArgument('redisBackend nodes must be a non-empty array of redis://host:port strings');
  }
  if (c.client !== undefined && typeof (c.client as { call?: unknown }).call !== 'function') {
    throw invalidArgument('redisBackend client must be an ioredis Redis or Cluster');
  }
  return c as RedisConnection;
}

/**
 * A script's reply with its bulk strings decoded as UTF-8: what ioredis's
 * `call` returns, built with `Array.prototype.map` instead of the
 * `Array(length)` that ioredis copies each reply array with. V8 counts how
 * many objects from such a call site survive a minor garbage collection, and
 * past a threshold it allocates the site's objects straight in the old
 * generation. On an 8-partition drain a burst of eight claim replies is
 * parsed at once, its arrays outlive a scavenge, and the site tipped over:
 * from then on every reply array was old and kept the young strings it held
 * alive through the next scavenge. `map` allocates without that feedback.
 * It runs as the command's reply transform, inside the parser's callback, so
 * the parser's own arrays die before the next reply is parsed.
 */
export function textOf(reply: unknown): unknown {
  if (Buffer.isBuffer(reply)) return reply.toString();
  if (Array.isArray(reply)) return reply.map(textOf);
  return reply;
}

/** Runs scripts by EVALSHA; a server that lost its script cache (restart, failover, SCRIPT FLUSH) gets the source once. */
export class ScriptRunner {
  readonly #shas = new Map<LuaScript, string>();
  #reloads = 0;
  #Command: CommandClass | null = null;

  /** Sends scripts as prepared ioredis `Command`s that decode their reply with `textOf`. */
  useCommandClass(Command: CommandClass | null): void {
    this.#Command = Command;
  }

  /** How many times a script's source was sent after NOSCRIPT. */
  get reloads(): number {
    return this.#reloads;
  }

  sha(script: LuaScript): string {
    let sha = this.#shas.get(script);
    if (sha === undefined) {
      sha = createHash('sha1').update(script.source).digest('hex');
      this.#shas.set(script, sha);
    }
    return sha;
  }

  async run(client: RedisClientLike, script: LuaScript, keys: string[], args: (string | number)[], ctx: FailureContext): Promise<unknown> {
    if (script.keys >= 0 && keys.length !== script.keys) throw new RheoError('internal', `script ${script.name} declares ${script.keys} keys, got ${keys.length}`);
    try {
      try {
        return await this.#send(client, 'evalsha', [this.sha(script), keys.length, ...keys, ...args]);
      } catch (error) {
        if (!isNoScript(error)) throw error;
        this.#reloads++;
        // EVAL runs the script and caches it under the same sha on that server.
        return await this.#send(client, 'eval', [script.source, keys.length, ...keys, ...args]);
      }
    } catch (error) {
      throw classifyRedisError(error, ctx);
    }
  }

  /** `client.call(name, ...args)`, with the reply decoded by `textOf` (a client without `sendCommand` gets `call` itself). */
  #send(client: RedisClientLike, name: string, args: (string | number)[]): Promise<unknown> {
    const sender = client as Partial<CommandSender>;
    if (this.#Command === null || typeof sender.sendCommand !== 'function') return client.call(name, ...args);
    // The options ioredis's own call() passes; replyEncoding null keeps bulk strings as Buffers for textOf.
    const command = new this.#Command(name, args, {
      replyEncoding: null,
      keyPrefix: sender.options?.keyPrefix,
      errorStack: sender.options?.showFriendlyErrorStack ? new Error() : undefined,
    });
    command.transformReply = textOf;
    return sender.sendCommand(command);
  }

  async command(client: RedisClientLike, args: [string, ...(string | number)[]], ctx: FailureContext): Promise<unknown> {
    try {
      return await client.call(...args);
    } catch (error) {
      throw classifyRedisError(error, ctx);
    }
  }
}
