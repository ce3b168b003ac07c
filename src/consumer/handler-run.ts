import type { RheoError } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import type { ScheduledTimer, Timers } from '../runtime/timers.js';
import { LazyAbort } from '../runtime/lazy-abort.js';
import { isThenable } from '../runtime/lease-outcome.js';
import type { ConsumerHandler, HandlerContext, HandlerOutcome } from './consumer-types.js';
import { settlementOf, thrownSettlement, timeoutSettlement, type Settlement } from './handler-outcome.js';

/** Why a run was cut short from outside the handler. */
export type Interrupt = { kind: 'lost'; error: RheoError } | { kind: 'stopping' };

/** Told when the handler is really called and when its own promise settles. */
export interface RunGauge {
  started(): void;
  settled(): void;
}

/** A settlement to carry out, or `lost`: the lease is no longer ours, settle nothing. */
export type RunResult = Settlement | { kind: 'lost'; error: RheoError };

/**
 * One handler invocation for one lease: its abort signal, its timeout and
 * the interrupts (lease lost, drain gave up) that end it early.
 *
 * JavaScript cannot kill a function, so a timed-out or interrupted handler
 * gets its `signal` aborted and the run resolves at once; the consumer then
 * settles and moves on. The gauge hears `settled` only when the handler's own
 * promise settles, so it still counts a handler that ignores its signal.
 *
 * A handler that returns a plain value (not a promise) is answered
 * synchronously, with no promise at all: on the hot path of a fast handler
 * the promises per lease were most of the consumer's cost.
 */
export class HandlerRun<T extends JsonValue = JsonValue> {
  readonly lease: Lease<T>;
  readonly #abort = new LazyAbort();
  #result: RunResult | null = null;
  #resolve: ((result: RunResult) => void) | null = null;
  #timer: ScheduledTimer | null = null;

  constructor(lease: Lease<T>) {
    this.lease = lease;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** Whether the handler's signal was aborted (timeout, lease lost, drain gave up). */
  get aborted(): boolean {
    return this.#abort.aborted;
  }

  /** Aborts the handler's signal and ends the run now (idempotent; the first interrupt wins). */
  interrupt(interrupt: Interrupt): void {
    if (this.#abort.aborted) return;
    this.#abort.abort(interrupt.kind === 'lost' ? interrupt.error : stoppedError());
    this.#finish(interrupted(interrupt));
  }

  /**
   * Calls the handler once (not at all when interrupted before); returns
   * what to do with the lease, or a promise of it while the handler runs.
   * Never throws or rejects.
   */
  run(handler: ConsumerHandler<T>, timeoutMs: number | null, timers: Timers, gauge: RunGauge): RunResult | Promise<RunResult> {
    if (this.#result) return this.#result;
    if (timeoutMs !== null) {
      // The handler's own work keeps the process alive; its timeout alone must not.
      this.#timer = timers.schedule(timeoutMs, () => this.#timedOut(timeoutMs), { keepAlive: false });
    }
    gauge.started();
    let value: HandlerOutcome | Promise<HandlerOutcome>;
    try {
      value = handler(this.lease.event, new RunContext(this));
    } catch (error) {
      this.#handlerDone(gauge, thrownSettlement(error));
      return this.#result!;
    }
    if (!isThenable(value)) {
      this.#handlerDone(gauge, settlementOf(value));
      return this.#result!;
    }
    Promise.resolve(value).then(
      (outcome) => this.#handlerDone(gauge, settlementOf(outcome)),
      (error: unknown) => this.#handlerDone(gauge, thrownSettlement(error)),
    );
    return this.#result ?? new Promise<RunResult>((resolve) => (this.#resolve = resolve));
  }

  #handlerDone(gauge: RunGauge, result: RunResult): void {
    gauge.settled();
    this.#finish(result);
  }

  #timedOut(timeoutMs: number): void {
    this.#timer = null;
    const settlement = timeoutSettlement(timeoutMs);
    if (settlement.kind === 'nack') this.#abort.abort(settlement.failure?.error);
    this.#finish(settlement);
  }

  /** The first result wins. */
  #finish(result: RunResult): void {
    if (this.#result) return;
    this.#result = result;
    this.#timer?.cancel();
    this.#timer = null;
    const resolve = this.#resolve;
    this.#resolve = null;
    resolve?.(result);
  }
}

/**
 * The context a handler gets. A class, not a literal with a getter: on
 * Node 20 both a literal getter and `Object.defineProperty` cost about 1 µs
 * per lease; the signal itself is only created when read.
 */
class RunContext<T extends JsonValue> implements HandlerContext<T> {
  readonly lease: Lease<T>;
  readonly attempt: number;
  readonly #run: HandlerRun<T>;

  constructor(run: HandlerRun<T>) {
    this.lease = run.lease;
    this.attempt = run.lease.attempt;
    this.#run = run;
  }

  get signal(): AbortSignal {
    return this.#run.signal;
  }
}

function interrupted(interrupt: Interrupt): RunResult {
  if (interrupt.kind === 'lost') return { kind: 'lost', error: interrupt.error };
  const error = stoppedError();
  return { kind: 'nack', reason: error.message, delayMs: 0, failure: { kind: 'stopped', error } };
}

function stoppedError(): Error {
  const error = new Error('consumer stopped before the handler finished');
  error.name = 'AbortError';
  return error;
}
