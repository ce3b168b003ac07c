import { Transform, type TransformCallback } from 'node:stream';
import type { JsonValue, Lease } from '../core/types.js';

export interface LeaseGateOptions<T> {
  /** Ordering key per lease; `null` lets every lease through at once. */
  orderKey: ((lease: Lease<T>) => string) | null;
  /** Called for every lease handed to the consumer while open. */
  onArrive(lease: Lease<T>): void;
  /** Called for every lease that arrives after `close()`: it must be given back, not run. */
  onLateLease(lease: Lease<T>): void;
}

/**
 * The consumer's intake, between the producer and the lease sink. It knows
 * which leases were handed to the consumer but not started yet, so a drain
 * can release them at once instead of waiting for a concurrency slot, and it
 * holds back a lease while another lease with the same ordering key is in
 * flight (at most one handler per key; different keys run in parallel).
 *
 * Parked leases are bounded by the producer's `maxDemand`, because they are
 * still held (and renewed) by the producer.
 */
export class LeaseGate<T extends JsonValue = JsonValue> extends Transform {
  readonly #orderKey: LeaseGateOptions<T>['orderKey'];
  readonly #onLateLease: LeaseGateOptions<T>['onLateLease'];
  readonly #onArrive: LeaseGateOptions<T>['onArrive'];
  /** Handed to the consumer and not started: leaseId → lease. */
  readonly #waiting = new Map<string, Lease<T>>();
  /** leaseId → key, for leases whose key is taken by them. */
  readonly #keyOf = new Map<string, string>();
  /** Keys in flight → leases parked behind them, oldest first. */
  readonly #busy = new Map<string, Lease<T>[]>();
  #closed = false;
  #flushed: (() => void) | null = null;

  constructor(options: LeaseGateOptions<T>) {
    super({ objectMode: true, highWaterMark: 1 });
    this.#orderKey = options.orderKey;
    this.#onLateLease = options.onLateLease;
    this.#onArrive = options.onArrive;
  }

  /** Leases handed over and not started yet (parked ones included). */
  get waitingCount(): number {
    return this.#waiting.size;
  }

  override _transform(lease: Lease<T>, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.#closed) {
      this.#onLateLease(lease);
      return callback();
    }
    this.#waiting.set(lease.leaseId, lease);
    this.#onArrive(lease);
    if (this.#orderKey === null) {
      this.push(lease);
      return callback();
    }
    let key: string;
    try {
      key = this.#orderKey(lease);
    } catch {
      // A key function that throws cannot order this lease; let it run
      // unordered rather than wedge the key or the stream.
      this.push(lease);
      return callback();
    }
    this.#keyOf.set(lease.leaseId, key);
    const parked = this.#busy.get(key);
    if (parked) parked.push(lease);
    else {
      this.#busy.set(key, []);
      this.push(lease);
    }
    callback();
  }

  override _flush(callback: TransformCallback): void {
    if (this.#parkedCount() === 0) return callback();
    this.#flushed = () => callback();
  }

  /**
   * A handler is about to start on this lease. `false` when the lease was
   * taken back meanwhile (released by a drain, or lost): do not run it.
   */
  start(leaseId: string): boolean {
    return this.#waiting.delete(leaseId);
  }

  /** The lease is settled (or given up): its key is free for the next lease of that key. */
  finish(leaseId: string): void {
    this.#waiting.delete(leaseId);
    const key = this.#keyOf.get(leaseId);
    if (key === undefined) return;
    this.#keyOf.delete(leaseId);
    const parked = this.#busy.get(key);
    const next = parked?.shift();
    if (next) this.push(next);
    else this.#busy.delete(key);
    if (this.#flushed && this.#parkedCount() === 0) {
      const done = this.#flushed;
      this.#flushed = null;
      done();
    }
  }

  /**
   * The lease was taken away before it started (renewal came back stale).
   * Unparks it, or frees its key if it was already passed on. Returns whether
   * it was waiting.
   */
  forget(leaseId: string): boolean {
    if (!this.#waiting.has(leaseId)) return false;
    const key = this.#keyOf.get(leaseId);
    const parked = key === undefined ? undefined : this.#busy.get(key);
    const index = parked?.findIndex((l) => l.leaseId === leaseId) ?? -1;
    if (parked && index >= 0) {
      parked.splice(index, 1);
      this.#waiting.delete(leaseId);
      this.#keyOf.delete(leaseId);
    } else {
      this.finish(leaseId);
    }
    return true;
  }

  /**
   * Stops intake for a drain: every lease handed over and not started is
   * taken out (parked ones are never passed on) and returned to be
   * released; leases arriving later go to `onLateLease`.
   */
  close(): Lease<T>[] {
    this.#closed = true;
    const unstarted = [...this.#waiting.values()];
    this.#waiting.clear();
    for (const parked of this.#busy.values()) parked.length = 0;
    if (this.#flushed) {
      const done = this.#flushed;
      this.#flushed = null;
      done();
    }
    return unstarted;
  }

  #parkedCount(): number {
    let n = 0;
    for (const parked of this.#busy.values()) n += parked.length;
    return n;
  }
}
