import { LazyAbort } from './lazy-abort.js';
import { isThenable } from './lease-outcome.js';
import type { ScheduledTimer, Timers } from './timers.js';

/** Told when the handler is really called and when its own promise (or plain value) settles. */
export interface RunGauge {
  started(): void;
  settled(): void;
}

/** How a run's caller reads what the handler did; `R` is its settlement type. */
export interface RunReading<R> {
  /** The handler returned (or its promise resolved with) `value`. */
  returned(value: unknown): R;
  /** The handler threw, or its promise rejected. */
  threw(error: unknown): R;
  /** The handler outlived `timeoutMs`: the result, and the reason its signal is aborted with. */
  timedOut(timeoutMs: number): { result: R; reason: unknown };
}

const NO_GAUGE: RunGauge = { started: () => undefined, settled: () => undefined };

/**
 * One handler invocation: its lazily made abort signal, its timeout, and the
 * interrupts (lease lost, partition revoked, drain gave up) that end it early.
 * The one engine the consumer, the partition worker and the lease sink run
 * handlers on.
 *
 * JavaScript cannot kill a function, so a timed-out or interrupted handler
 * gets its signal aborted and the run resolves at once; the caller then
 * settles and moves on. The gauge hears `settled` only when the handler's own
 * promise settles, so it still counts a handler that ignores its signal.
 *
 * A handler that returns a plain value (not a promise) is answered
 * synchronously, with no promise and no timer at all: on the hot path of a
 * fast handler the promises per event were most of the runtime's cost.
 */
export class HandlerRun<R extends object> {
  readonly #reading: RunReading<R>;
  readonly #abort = new LazyAbort();
  #result: R | null = null;
  #resolve: ((result: R) => void) | null = null;
  #timer: ScheduledTimer | null = null;

  constructor(reading: RunReading<R>) {
    this.#reading = reading;
  }

  /** The handler's signal, made on first read (most handlers never read it). */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** Whether the signal was aborted (timeout, interrupt, `abortSignal`). */
  get aborted(): boolean {
    return this.#abort.aborted;
  }

  /** The result, once the run has one. */
  get result(): R | null {
    return this.#result;
  }

  /** Aborts the signal only: the run goes on until the handler answers (idempotent; the first reason wins). */
  abortSignal(reason: unknown): void {
    this.#abort.abort(reason);
  }

  /** Aborts the signal (the first reason wins) and ends the run now with `result` (the first result wins). */
  interrupt(result: R, reason: unknown): void {
    this.#abort.abort(reason);
    this.#finish(result);
  }

  /**
   * Calls `invoke` (the handler, with whatever context the caller gives it)
   * once, not at all when interrupted before; returns the result, or a
   * promise of it while the handler runs. Never throws or rejects.
   */
  run(invoke: () => unknown, timeoutMs: number | null, timers: Timers, gauge: RunGauge = NO_GAUGE): R | Promise<R> {
    if (this.#result) return this.#result;
    gauge.started();
    let value: unknown;
    try {
      value = invoke();
    } catch (error) {
      gauge.settled();
      this.#finish(this.#reading.threw(error));
      return this.#result!;
    }
    if (!isThenable(value)) {
      gauge.settled();
      this.#finish(this.#reading.returned(value));
      return this.#result!;
    }
    if (timeoutMs !== null && !this.#result) {
      // The handler's own work keeps the process alive; its timeout alone must not.
      this.#timer = timers.schedule(timeoutMs, () => this.#timedOut(timeoutMs), { keepAlive: false });
    }
    Promise.resolve(value).then(
      (outcome) => {
        gauge.settled();
        this.#finish(this.#reading.returned(outcome));
      },
      (error: unknown) => {
        gauge.settled();
        this.#finish(this.#reading.threw(error));
      },
    );
    return this.#result ?? new Promise<R>((resolve) => (this.#resolve = resolve));
  }

  #timedOut(timeoutMs: number): void {
    this.#timer = null;
    const { result, reason } = this.#reading.timedOut(timeoutMs);
    this.interrupt(result, reason);
  }

  /** The first result wins. */
  #finish(result: R): void {
    if (this.#result) return;
    this.#result = result;
    this.#timer?.cancel();
    this.#timer = null;
    const resolve = this.#resolve;
    this.#resolve = null;
    resolve?.(result);
  }
}
