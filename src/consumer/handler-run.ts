import type { RheoError } from '../core/errors.js';
import type { JsonValue, Lease } from '../core/types.js';
import { HandlerRun as Engine, type RunGauge, type RunReading } from '../runtime/handler-run.js';
import type { Timers } from '../runtime/timers.js';
import type { ConsumerHandler, HandlerContext } from './consumer-types.js';
import { CONSUMER_OUTCOMES, settlementOf, thrownSettlement, timeoutSettlement } from '../runtime/lease-outcome.js';
import type { Settlement } from './handler-outcome.js';
import { SettledInTransaction } from './transactional-handler.js';

export type { RunGauge } from '../runtime/handler-run.js';

/** Why a run was cut short from outside the handler. */
export type Interrupt = { kind: 'lost'; error: RheoError } | { kind: 'stopping' };

/** A settlement to carry out, or `lost`: the lease is no longer ours, settle nothing. */
export type RunResult = Settlement | { kind: 'lost'; error: RheoError };

/**
 * How the consumer and the partition worker read a handler: by the runtime's
 * outcome vocabulary in the consumer's style; a transactional handler's
 * settlement (made in its transaction) passes as it is.
 */
export const CONSUMER_READING: RunReading<Settlement> = {
  returned: (value) => (value instanceof SettledInTransaction ? value.settlement : settlementOf(value, CONSUMER_OUTCOMES)),
  threw: (error) => thrownSettlement(error, CONSUMER_OUTCOMES),
  timedOut: (timeoutMs) => {
    const result = timeoutSettlement(timeoutMs, CONSUMER_OUTCOMES);
    return { result, reason: result.kind === 'nack' ? result.failure?.error : undefined };
  },
};

/**
 * One handler invocation of the consumer for one lease, on the runtime's
 * engine (runtime/handler-run.ts: lazy signal, timeout, synchronous fast
 * path); this adds the consumer's context and its interrupts (lease lost,
 * drain gave up).
 */
export class HandlerRun<T extends JsonValue = JsonValue> {
  readonly lease: Lease<T>;
  readonly #engine = new Engine<RunResult>(CONSUMER_READING);

  constructor(lease: Lease<T>) {
    this.lease = lease;
  }

  get signal(): AbortSignal {
    return this.#engine.signal;
  }

  /** Whether the handler's signal was aborted (timeout, lease lost, drain gave up). */
  get aborted(): boolean {
    return this.#engine.aborted;
  }

  /** Aborts the handler's signal and ends the run now (idempotent; the first interrupt wins). */
  interrupt(interrupt: Interrupt): void {
    if (this.#engine.aborted) return;
    if (interrupt.kind === 'lost') return this.#engine.interrupt({ kind: 'lost', error: interrupt.error }, interrupt.error);
    const error = stoppedError();
    this.#engine.interrupt({ kind: 'nack', reason: error.message, delayMs: 0, failure: { kind: 'stopped', error } }, error);
  }

  /**
   * Calls the handler once (not at all when interrupted before); returns
   * what to do with the lease, or a promise of it while the handler runs.
   * Never throws or rejects.
   */
  run(handler: ConsumerHandler<T>, timeoutMs: number | null, timers: Timers, gauge: RunGauge): RunResult | Promise<RunResult> {
    return this.#engine.run(() => handler(this.lease.event, new RunContext(this)), timeoutMs, timers, gauge);
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

function stoppedError(): Error {
  const error = new Error('consumer stopped before the handler finished');
  error.name = 'AbortError';
  return error;
}
