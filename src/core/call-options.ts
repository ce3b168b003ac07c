import { AsyncLocalStorage } from 'node:async_hooks';
import { RheoError, invalidArgument } from './errors.js';
import { describe } from './validation.js';

/** The longest `timeoutMs` a timer can hold (2^31 - 1 ms, about 24.8 days). */
export const MAX_TIMEOUT_MS = 2_147_483_647;

/**
 * The signal of the facade call a backend statement runs for, if any. The
 * facade runs each backend call inside it, so a backend can cancel the work
 * in flight (PostgreSQL cancels the running statement) without every method
 * of the backend contract taking a signal.
 */
export const callSignals = new AsyncLocalStorage<AbortSignal>();

/** The abort signal of the facade call running now, or `undefined`. */
export function currentCallSignal(): AbortSignal | undefined {
  return callSignals.getStore();
}

/** Cancellation of one call, checked: the caller's signal and a timeout, either or both. */
export class CallScope {
  readonly signal: AbortSignal | undefined;
  readonly timeoutMs: number | undefined;

  constructor(signal: AbortSignal | undefined, timeoutMs: number | undefined) {
    this.signal = signal;
    this.timeoutMs = timeoutMs;
  }

  get cancellable(): boolean {
    return this.signal !== undefined || this.timeoutMs !== undefined;
  }
}

const NONE = new CallScope(undefined, undefined);

/** Reads and checks `signal` and `timeoutMs` of an options object (each read once). */
export function callScope(what: string, options: unknown): CallScope {
  if (options === undefined || options === null || typeof options !== 'object') return NONE;
  const { signal, timeoutMs } = options as { signal?: unknown; timeoutMs?: unknown };
  if (signal === undefined && timeoutMs === undefined) return NONE;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw invalidArgument(`${what} signal must be an AbortSignal, got ${describe(signal)}`);
  }
  if (timeoutMs !== undefined && (!Number.isSafeInteger(timeoutMs) || (timeoutMs as number) < 1 || (timeoutMs as number) > MAX_TIMEOUT_MS)) {
    throw invalidArgument(`${what} timeoutMs must be an integer from 1 to ${MAX_TIMEOUT_MS}, got ${describe(timeoutMs)}`);
  }
  return new CallScope(signal, timeoutMs as number | undefined);
}

/** What a call rejects with when its signal was aborted: the signal's reason, or an `AbortError` when it has none. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

export interface CallTarget {
  /** Names the call in error messages, e.g. `append to stream "orders"`. */
  action: string;
  /** Whether the call may write; a write aborted after it was sent is `ambiguous`. */
  writes: boolean;
  stream?: string;
  group?: string;
}

/**
 * Runs `start` under `scope`: refuses at once (sending nothing) when the
 * signal is already aborted; otherwise starts the call with the combined
 * signal visible to the backend (`currentCallSignal`), and rejects as soon
 * as the signal aborts or the timeout passes, whichever first. Once started,
 * a read rejects with the abort reason (a timeout is a `RheoError` `timeout`)
 * and a write with `ambiguous` (its cause the abort reason): it may have been
 * applied. The backend's own outcome, arriving later, is dropped.
 */
export function runCancellable<R>(
  scope: CallScope,
  lazyTarget: CallTarget | (() => CallTarget),
  start: () => Promise<R>,
): Promise<R> {
  if (!scope.cancellable) return start();
  if (scope.signal?.aborted) return Promise.reject(abortReason(scope.signal));
  // Named only for cancellable calls: building it costs on every settle otherwise.
  const target = typeof lazyTarget === 'function' ? lazyTarget() : lazyTarget;
  const controller = new AbortController();
  const details = { stream: target.stream, group: target.group };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const onCallerAbort = (): void => controller.abort(abortReason(scope.signal!));
  scope.signal?.addEventListener('abort', onCallerAbort, { once: true });
  if (scope.timeoutMs !== undefined) {
    const ms = scope.timeoutMs;
    timer = setTimeout(
      () => controller.abort(new RheoError('timeout', `${target.action} did not finish within ${ms} ms`, details)),
      ms,
    );
    // The timer only bounds a call the caller is already awaiting.
    timer.unref();
  }
  const cleanup = (): void => {
    if (timer !== undefined) clearTimeout(timer);
    scope.signal?.removeEventListener('abort', onCallerAbort);
  };
  const work = callSignals.run(controller.signal, start);
  return new Promise<R>((resolve, reject) => {
    const onAbort = (): void => {
      cleanup();
      // The backend's late answer must not become an unhandled rejection.
      work.catch(() => {});
      const reason: unknown = controller.signal.reason;
      if (!target.writes) return reject(reason);
      reject(
        new RheoError(
          'ambiguous',
          `${target.action} was ${isTimeout(reason) ? 'timed out' : 'aborted'} after it was sent; it may or may not have been applied`,
          { ...details, cause: reason },
        ),
      );
    };
    controller.signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        controller.signal.removeEventListener('abort', onAbort);
        cleanup();
        resolve(value);
      },
      (error: unknown) => {
        controller.signal.removeEventListener('abort', onAbort);
        cleanup();
        reject(error);
      },
    );
  });
}

function isTimeout(reason: unknown): boolean {
  return reason instanceof RheoError && reason.code === 'timeout';
}
