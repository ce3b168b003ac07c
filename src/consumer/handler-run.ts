import type { RheoError } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import type { Timers } from '../producer/timers.js';
import { LazyAbort } from '../sinks/lazy-abort.js';
import type { ConsumerHandler, HandlerContext } from './consumer-types.js';
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
 * One handler invocation for one lease: its AbortController, its timeout and
 * the interrupts (lease lost, drain gave up) that end it early.
 *
 * JavaScript cannot kill a function, so a timed-out or interrupted handler
 * gets its `signal` aborted and the run resolves at once; the consumer then
 * settles and moves on. `running` stays true until the handler's own promise
 * settles, so gauges can still see a handler that ignores its signal.
 */
export class HandlerRun<T extends JsonValue = JsonValue> {
  readonly lease: Lease<T>;
  readonly #abort = new LazyAbort();
  #interrupt: ((interrupt: Interrupt) => void) | null = null;
  #pendingInterrupt: Interrupt | null = null;
  #running = false;

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

  /** The handler was called and its promise has not settled yet. */
  get running(): boolean {
    return this.#running;
  }

  /** Aborts the handler's signal and ends the run now (idempotent; the first interrupt wins). */
  interrupt(interrupt: Interrupt): void {
    if (this.#abort.aborted) return;
    this.#abort.abort(interrupt.kind === 'lost' ? interrupt.error : stoppedError());
    if (this.#interrupt) this.#interrupt(interrupt);
    else this.#pendingInterrupt = interrupt;
  }

  /** Calls the handler once; resolves with what to do with the lease. Never rejects. */
  run(handler: ConsumerHandler<T>, timeoutMs: number | null, timers: Timers, gauge: RunGauge): Promise<RunResult> {
    if (this.#pendingInterrupt) return Promise.resolve(interrupted(this.#pendingInterrupt));
    return new Promise<RunResult>((resolve) => {
      let done = false;
      const finish = (result: RunResult): void => {
        if (done) return;
        done = true;
        timer?.cancel();
        this.#interrupt = null;
        resolve(result);
      };
      this.#interrupt = (i) => finish(interrupted(i));
      const timer =
        timeoutMs === null
          ? null
          : timers.schedule(
              timeoutMs,
              () => {
                const settlement = timeoutSettlement(timeoutMs);
                if (settlement.kind === 'nack') this.#abort.abort(settlement.failure?.error);
                finish(settlement);
              },
              // The handler's own work keeps the process alive; its timeout alone must not.
              { keepAlive: false },
            );
      this.#running = true;
      gauge.started();
      const context = { lease: this.lease, attempt: this.lease.attempt } as HandlerContext<T>;
      Object.defineProperty(context, 'signal', { get: () => this.signal, enumerable: true });
      // `then` also catches a synchronous throw from the handler.
      Promise.resolve()
        .then(() => handler(this.lease.event, context))
        .then(
          (value) => finish(settlementOf(value)),
          (error: unknown) => finish(thrownSettlement(error)),
        )
        .finally(() => {
          this.#running = false;
          gauge.settled();
        });
    });
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
