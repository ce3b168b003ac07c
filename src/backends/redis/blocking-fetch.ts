import { RheoError } from '../../core/errors.js';
import type { RedisClientLike } from './connection.js';
import type { FailureContext } from './errors.js';
import type { RedisStore } from './store.js';

/** At most this many connections block at once per backend; past it, idle consumers wait on pub/sub. */
const MAX_BLOCKING = 32;

/** After a blocking connection failed, waits go through pub/sub for this long before one is tried again. */
const PAUSE_MS = 5_000;

/** How often, at most, an abort asks Redis to end a wait that has not reached it yet, 2 ms apart. */
const UNBLOCK_TRIES = 50;

/** A connection of its own for one wait at a time, and its id for CLIENT UNBLOCK. */
interface Blocker {
  readonly client: RedisClientLike;
  readonly id: number;
}

/**
 * Blocking fetches on one server (capability `blockingFetch`): an idle
 * consumer's next claim is sent before the append it waits for.
 *
 * On its own connection, the consumer sends `XREAD BLOCK` on the logs of
 * the partitions it claims from, each after the tail its last short claim
 * saw, and right behind it, in the same write, the CLAIM (one per
 * partition). Redis blocks the connection on the XREAD and keeps the CLAIM
 * unread; the append's XADD ends the block, and Redis
 * runs the CLAIM at once, in the same turn of its loop, before it answers
 * anyone. The consumer hears the append and gets its leases in one answer:
 * the wake-up's message and the claim's round trip after it are gone. On
 * several partitions every one's CLAIM runs, whichever log the append went
 * to, as after a pub/sub wake-up (a fetch claims each partition's share).
 *
 * XREAD wakes every reader blocked on the key, so every idle consumer of
 * every group hears each append, as with pub/sub. Its id is the tail as a
 * CLAIM that took everything claimable saw it (`saw`), so an append that
 * landed between that claim and the wait ends the wait at once. What becomes
 * claimable without an append (a retry's delay running out, a lease
 * expiring) is found when the wait times out, as the polls find it.
 *
 * An abort sends CLIENT UNBLOCK from the main connection: the XREAD answers
 * empty, the CLAIM runs, and its leases go back to the caller, who releases
 * them; no lease is claimed behind anyone's back. A connection that fails
 * is dropped, and for PAUSE_MS the waits go through pub/sub again (the caller
 * gets `null`). A server that refuses the XREAD (an ACL without it) answers
 * the claim behind it at once, and that answer is the caller's, as at a
 * timeout; then the waits go through pub/sub for PAUSE_MS. Either way what
 * such a server costs is the latency the waits would have saved.
 */
export class BlockingFetches {
  readonly #store: RedisStore;
  /** Connections not waiting now. */
  readonly #idle: Blocker[] = [];
  /** Every open connection, waiting or not (close() ends them all). */
  readonly #open = new Set<Blocker>();
  /** Per stream, group and partition: the tail the last claim that took everything claimable saw. */
  readonly #tails = new Map<string, number>();
  #pausedUntil = 0;
  #closed = false;

  constructor(store: RedisStore) {
    this.#store = store;
  }

  /** A claim on the partition stopped with nothing else claimable, at `tail` (its high watermark); -1: it stopped for another reason. */
  saw(stream: string, group: string, partition: number, tail: number): void {
    if (tail >= 0) this.#tails.set(tailKey(stream, group, partition), tail);
  }

  /** The partition's tail as the last claim that took everything claimable saw it, if one did. */
  tail(stream: string, group: string, partition: number): number | undefined {
    return this.#tails.get(tailKey(stream, group, partition));
  }

  /**
   * Waits for an entry past `after` in any of the logs (at most `timeoutMs`,
   * or until `signal` aborts), with `claim`'s commands issued right behind
   * the wait on the same connection. `null` when no connection is to spare
   * or the connection failed (nothing claimed then, except by a CLAIM whose
   * answer was lost with it, as on any connection).
   */
  async run<R>(
    waits: ReadonlyArray<{ key: string; after: number }>,
    timeoutMs: number,
    signal: AbortSignal,
    ctx: FailureContext,
    claim: (client: RedisClientLike) => Promise<R>,
  ): Promise<{ found: R; appended: boolean } | null> {
    if (this.#closed || signal.aborted || Date.now() < this.#pausedUntil) return null;
    const blocker = await this.#acquire();
    if (blocker === null) return null;
    // Aborted while a connection was being opened: its listener below would never hear it.
    if (signal.aborted) {
      this.#return(blocker, true);
      return null;
    }
    let blockMs = Math.max(1, Math.ceil(timeoutMs));
    // A borrowed client's command timeout would cut the wait short as a failure: stay well inside it.
    const commandTimeout = (blocker.client as { options?: { commandTimeout?: unknown } }).options?.commandTimeout;
    if (typeof commandTimeout === 'number' && commandTimeout > 0) blockMs = Math.max(1, Math.min(blockMs, Math.floor(commandTimeout / 2)));
    const streams = [...waits.map((w) => w.key), ...waits.map((w) => `${w.after}-0`)];
    const woken = this.#store.commandOn(blocker.client, ['xread', 'BLOCK', blockMs, 'COUNT', 1, 'STREAMS', ...streams], ctx);
    const found = claim(blocker.client);
    // Its answer may come in the same read as the wait's, before this call is back to await it.
    found.catch(() => undefined);
    let answered = false;
    const onAbort = (): void => void this.#unblock(blocker, () => answered, ctx);
    signal.addEventListener('abort', onAbort, { once: true });
    let healthy = true;
    try {
      let appended = false;
      let waited = true;
      try {
        appended = (await woken) !== null;
      } catch {
        // The claim behind a refused or lost wait still answers, or fails with the connection.
        waited = false;
        healthy = false;
      } finally {
        answered = true;
      }
      let result: R;
      try {
        result = await found;
      } catch (error) {
        if (!waited || isTransport(error)) {
          healthy = false;
          this.#pause();
          // A CLAIM that fails with its connection: the caller waits on pub/sub (a lost answer's leases expire, as on any connection).
          if (isTransport(error) || !(error instanceof RheoError)) return null;
        }
        // The call's own error (the group deleted meanwhile): the caller hears it, as from a fetch.
        throw error;
      }
      if (!waited) this.#pause();
      return { found: result, appended };
    } finally {
      signal.removeEventListener('abort', onAbort);
      this.#return(blocker, healthy);
    }
  }

  /** Ends every connection; later runs answer `null`. */
  close(): void {
    this.#closed = true;
    for (const blocker of this.#open) blocker.client.disconnect();
    this.#open.clear();
    this.#idle.length = 0;
  }

  /** Waits go through pub/sub for PAUSE_MS. */
  #pause(): void {
    this.#pausedUntil = Date.now() + PAUSE_MS;
  }

  async #acquire(): Promise<Blocker | null> {
    for (let blocker = this.#idle.pop(); blocker !== undefined; blocker = this.#idle.pop()) {
      if (blocker.client.status === 'ready') return blocker;
      this.#drop(blocker);
    }
    if (this.#open.size >= MAX_BLOCKING) return null;
    let client: RedisClientLike;
    try {
      client = await this.#store.duplicate();
    } catch {
      this.#pause();
      return null;
    }
    try {
      const id = Number(await this.#store.commandOn(client, ['client', 'id'], { action: 'open a blocking connection', writes: false }));
      const blocker = { client, id };
      if (this.#closed) throw new RheoError('closed', 'the redis backend is closed');
      this.#open.add(blocker);
      return blocker;
    } catch {
      client.disconnect();
      this.#pause();
      return null;
    }
  }

  #return(blocker: Blocker, healthy: boolean): void {
    if (healthy && !this.#closed && this.#open.has(blocker)) this.#idle.push(blocker);
    else this.#drop(blocker);
  }

  #drop(blocker: Blocker): void {
    this.#open.delete(blocker);
    blocker.client.disconnect();
  }

  /**
   * Ends a wait early from the main connection. The XREAD may still be on its
   * way (CLIENT UNBLOCK then answers 0), so it asks again, 2 ms apart, until
   * the wait has answered; a wait that never reaches Redis is ended by
   * dropping its connection.
   */
  async #unblock(blocker: Blocker, answered: () => boolean, ctx: FailureContext): Promise<void> {
    for (let k = 0; k < UNBLOCK_TRIES && !answered(); k++) {
      const ended = await this.#store.command(['client', 'unblock', blocker.id], { ...ctx, writes: false }).catch(() => 0);
      if (ended === 1 || answered()) return;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    if (!answered()) this.#drop(blocker);
  }
}

/** An error of the connection (nothing, or not everything, known to have run), not of the call. */
function isTransport(error: unknown): boolean {
  return error instanceof RheoError && (error.code === 'backend_unavailable' || error.code === 'ambiguous');
}

function tailKey(stream: string, group: string, partition: number): string {
  return `${stream}\u0000${group}\u0000${partition}`;
}
