import { RheoError } from '../core/errors.js';
import type { ScheduledTimer, Timers } from './timers.js';

export type FlushReason = 'size' | 'time' | 'end';

export interface BatchCollectorOptions<I> {
  /** Flush when this many items are collected. */
  size?: number;
  /** Flush this long after the first item of a batch arrived (like Broadway's `batch_timeout`). */
  intervalMs?: number;
  timers: Timers;
  onFlush(items: I[], reason: FlushReason): void;
}

/**
 * Collects items into batches that close at `size` items or `intervalMs`
 * after their first item, whichever comes first. Shared by the batch sink,
 * the batch transform and the window transform. The timer runs only while a
 * batch is open, and keeps the process alive for that short time so that a
 * partial batch is never stranded.
 */
export class BatchCollector<I> {
  readonly size: number;
  readonly intervalMs: number | null;
  readonly #timers: Timers;
  readonly #onFlush: (items: I[], reason: FlushReason) => void;
  #items: I[] = [];
  #timer: ScheduledTimer | null = null;

  constructor(options: BatchCollectorOptions<I>) {
    const size = options.size ?? Number.POSITIVE_INFINITY;
    const intervalMs = options.intervalMs ?? null;
    if (size !== Number.POSITIVE_INFINITY && (!Number.isSafeInteger(size) || size < 1)) {
      throw new RheoError('invalid_argument', `batch size must be an integer >= 1, got ${String(size)}`);
    }
    if (intervalMs !== null && (!Number.isSafeInteger(intervalMs) || intervalMs < 1)) {
      throw new RheoError('invalid_argument', `batch interval must be an integer number of ms >= 1, got ${String(intervalMs)}`);
    }
    if (size === Number.POSITIVE_INFINITY && intervalMs === null) {
      throw new RheoError('invalid_argument', 'a batch needs a size, an interval in ms, or both');
    }
    this.size = size;
    this.intervalMs = intervalMs;
    this.#timers = options.timers;
    this.#onFlush = options.onFlush;
  }

  get length(): number {
    return this.#items.length;
  }

  add(item: I): void {
    this.#items.push(item);
    if (this.#items.length >= this.size) this.flush('size');
    else if (this.#items.length === 1 && this.intervalMs !== null) {
      this.#timer = this.#timers.schedule(this.intervalMs, () => {
        this.#timer = null;
        this.flush('time');
      });
    }
  }

  /** Closes the open batch (if any) and hands it to `onFlush`. */
  flush(reason: FlushReason): void {
    this.#cancel();
    if (this.#items.length === 0) return;
    const items = this.#items;
    this.#items = [];
    this.#onFlush(items, reason);
  }

  /** Removes the open batch without flushing it (teardown). */
  take(): I[] {
    this.#cancel();
    const items = this.#items;
    this.#items = [];
    return items;
  }

  #cancel(): void {
    this.#timer?.cancel();
    this.#timer = null;
  }
}
