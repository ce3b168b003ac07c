import { StreamWaiters } from '../../core/stream-waiters.js';
import type { RedisClientLike } from './connection.js';

/**
 * At most this many streams stay subscribed; past it, a new one first drops
 * the streams nobody waits on right now.
 */
const MAX_SUBSCRIBED = 256;

/**
 * Wakes idle producers on append. Each append call PUBLISHes on the stream's
 * channel (on one server once per call, after its scripts; on a cluster from
 * each partition's script: log.ts); one dedicated subscriber connection (a
 * duplicate of the command client, opened on the first wait) SUBSCRIBEs to
 * the channel of each stream waited on, from its first wait on. It hears no
 * other stream's appends: with one pattern for every stream of the prefix,
 * each process parsed every append of the prefix, and where two subscribers
 * shared a process (the bench's subjects), a consumer's wake-up waited behind
 * the other's about half the time, 0.07-0.1 ms. A lost message, or a
 * subscriber that is down, only costs latency: callers still poll. So does a
 * first wait whose SUBSCRIBE reaches Redis after an append it was waiting for.
 */
export class AppendWaiters {
  readonly #open: () => Promise<RedisClientLike>;
  readonly #channelOf: (stream: string) => string;
  readonly #streamOf: (channel: string) => string | null;
  readonly #waiters = new StreamWaiters();
  /** Streams subscribed, or on their way to be. */
  readonly #subscribed = new Set<string>();
  #subscriber: RedisClientLike | null = null;
  /** Whether the subscriber's `ready` wakes every waiter (set by the first subscription). */
  #resubscribes = false;
  #starting: Promise<void> | null = null;
  #closed = false;

  constructor(open: () => Promise<RedisClientLike>, channelOf: (stream: string) => string, streamOf: (channel: string) => string | null) {
    this.#open = open;
    this.#channelOf = channelOf;
    this.#streamOf = streamOf;
  }

  wait(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.#closed || signal?.aborted) return Promise.resolve(false);
    if (!this.#subscribed.has(stream)) this.#subscribe(stream);
    return this.#waiters.wait(stream, timeoutMs, signal);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#waiters.close();
    await this.#starting?.catch(() => {});
    const sub = this.#subscriber;
    this.#subscriber = null;
    this.#subscribed.clear();
    if (sub) sub.disconnect();
  }

  /** True while the subscriber connection is up. */
  get listening(): boolean {
    return this.#subscriber !== null && this.#subscriber.status === 'ready';
  }

  /** Wakes the waiters of one stream: a message, or an append through this backend. */
  wake(stream: string): void {
    this.#waiters.wake(stream);
  }

  #subscribe(stream: string): void {
    if (this.#subscribed.size >= MAX_SUBSCRIBED) {
      const idle = [...this.#subscribed].filter((s) => !this.#waiters.has(s));
      for (const s of idle) this.#subscribed.delete(s);
      if (idle.length > 0) void this.#send('unsubscribe', idle);
    }
    this.#subscribed.add(stream);
    void this.#send('subscribe', [stream]).then((sent) => {
      // Not sent (no connection): the next wait on the stream tries again.
      if (!sent) this.#subscribed.delete(stream);
    });
  }

  /** Sends (UN)SUBSCRIBE for `streams` once the subscriber is up; false when it is not. */
  async #send(command: 'subscribe' | 'unsubscribe', streams: string[]): Promise<boolean> {
    await this.#start();
    const sub = this.#subscriber;
    if (sub === null || this.#closed) return false;
    try {
      await sub.call(command, ...streams.map((s) => this.#channelOf(s)));
      if (!this.#resubscribes) {
        this.#resubscribes = true;
        // ioredis subscribes again by itself after a reconnect; appends while
        // the connection was down went unheard, so every waiter looks again.
        // Only from the first subscription on: a Cluster's subscriber emits
        // `ready` while that SUBSCRIBE is on its way, which would wake the
        // waits as if an append had come before they were subscribed.
        sub.on('ready', () => this.#waiters.wakeAll());
      }
      return true;
    } catch {
      return false;
    }
  }

  #start(): Promise<void> {
    if (this.#starting) return this.#starting;
    this.#starting = (async () => {
      const sub = await this.#open();
      if (this.#closed) {
        sub.disconnect();
        return;
      }
      this.#subscriber = sub;
      sub.on('message', ((channel: string) => {
        const stream = this.#streamOf(channel);
        if (stream !== null) this.#waiters.wake(stream);
      }) as (...args: unknown[]) => void);
    })().catch(() => {
      // Down now: waits fall back to their timeout, and the next wait tries again.
      const sub = this.#subscriber;
      this.#subscriber = null;
      this.#resubscribes = false;
      sub?.disconnect();
      this.#starting = null;
    });
    return this.#starting;
  }
}
