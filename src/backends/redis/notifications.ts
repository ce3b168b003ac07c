import type { RedisClientLike } from './connection.js';

/**
 * Wakes idle producers on append. Each append call PUBLISHes on the stream's
 * channel (on one server once per call, after its scripts; on a cluster from
 * each partition's script: log.ts); one dedicated subscriber connection (a duplicate
 * of the command client, opened on the first wait) PSUBSCRIBEs to every
 * stream of the prefix. A lost message, or a subscriber that is down,
 * only costs latency: callers still poll.
 */
export class AppendWaiters {
  readonly #open: () => Promise<RedisClientLike>;
  readonly #pattern: string;
  readonly #streamOf: (channel: string) => string | null;
  readonly #waiters = new Map<string, Set<() => void>>();
  #subscriber: RedisClientLike | null = null;
  #starting: Promise<void> | null = null;
  #closed = false;

  constructor(open: () => Promise<RedisClientLike>, pattern: string, streamOf: (channel: string) => string | null) {
    this.#open = open;
    this.#pattern = pattern;
    this.#streamOf = streamOf;
  }

  wait(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.#closed || signal?.aborted) return Promise.resolve(false);
    void this.#start();
    return new Promise<boolean>((resolve) => {
      let set = this.#waiters.get(stream);
      if (!set) this.#waiters.set(stream, (set = new Set()));
      const waiters = set;
      const done = (woken: boolean) => {
        clearTimeout(timer);
        waiters.delete(wake);
        if (waiters.size === 0 && this.#waiters.get(stream) === waiters) this.#waiters.delete(stream);
        signal?.removeEventListener('abort', onAbort);
        resolve(woken && !this.#closed);
      };
      const wake = () => done(true);
      const onAbort = () => done(false);
      const timer = setTimeout(() => done(false), timeoutMs);
      waiters.add(wake);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const set of [...this.#waiters.values()]) for (const wake of [...set]) wake();
    this.#waiters.clear();
    await this.#starting?.catch(() => {});
    const sub = this.#subscriber;
    this.#subscriber = null;
    if (sub) sub.disconnect();
  }

  /** True while the subscriber connection is up and subscribed. */
  get listening(): boolean {
    return this.#subscriber !== null && this.#subscriber.status === 'ready';
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
      sub.on('pmessage', ((_pattern: string, channel: string) => this.#wake(channel)) as (...args: unknown[]) => void);
      await sub.call('psubscribe', this.#pattern);
      // ioredis re-subscribes by itself after a reconnect; appends while the
      // connection was down went unheard, so every waiter looks again.
      sub.on('ready', () => {
        for (const stream of [...this.#waiters.keys()]) this.wake(stream);
      });
    })().catch(() => {
      // Down now: waits fall back to their timeout, and the next wait tries again.
      const sub = this.#subscriber;
      this.#subscriber = null;
      sub?.disconnect();
      this.#starting = null;
    });
    return this.#starting;
  }

  #wake(channel: string): void {
    const stream = this.#streamOf(channel);
    if (stream !== null) this.wake(stream);
  }

  /** Wakes the waiters of one stream: a message, or an append through this backend. */
  wake(stream: string): void {
    const set = this.#waiters.get(stream);
    if (!set) return;
    this.#waiters.delete(stream);
    for (const wake of set) wake();
  }
}
