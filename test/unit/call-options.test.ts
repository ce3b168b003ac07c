import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  CallScope,
  MAX_TIMEOUT_MS,
  abortReason,
  callScope,
  callSignals,
  currentCallSignal,
  runCancellable,
} from '../../src/core/call-options.js';
import { RheoError } from '../../src/core/errors.js';
import { deferred } from '../support/deferred.js';
import { thrown } from '../support/thrown.js';

/** The outcome of a promise once it has settled, without an unhandled rejection in between. */
function outcome<T>(promise: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  return promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
}

describe('CallScope', () => {
  it('is cancellable with a signal, a timeout or both, and not with neither', () => {
    const signal = new AbortController().signal;
    expect(new CallScope(undefined, undefined).cancellable).toBe(false);
    expect(new CallScope(signal, undefined).cancellable).toBe(true);
    expect(new CallScope(undefined, 5).cancellable).toBe(true);
    expect(new CallScope(signal, 5).cancellable).toBe(true);
  });
});

describe('callScope', () => {
  it('is the shared non-cancellable scope without options, or without signal and timeoutMs', () => {
    const none = callScope('read', undefined);
    expect(none.cancellable).toBe(false);
    expect(none.signal).toBeUndefined();
    expect(none.timeoutMs).toBeUndefined();
    for (const options of [null, 42, 'text', {}, { signal: undefined, timeoutMs: undefined }, { other: 1 }]) {
      expect(callScope('read', options)).toBe(none);
    }
  });

  it('ignores a function passed as options, as it ignores any non-object', () => {
    const options = Object.assign(() => undefined, { timeoutMs: 'soon', signal: 'no' });
    expect(callScope('read', options).cancellable).toBe(false);
  });

  it('keeps the signal and timeout it checked', () => {
    const signal = new AbortController().signal;
    const both = callScope('read', { signal, timeoutMs: 250 });
    expect(both.signal).toBe(signal);
    expect(both.timeoutMs).toBe(250);
    expect(callScope('read', { signal })).toMatchObject({ signal, timeoutMs: undefined, cancellable: true });
    expect(callScope('read', { timeoutMs: 1 })).toMatchObject({ signal: undefined, timeoutMs: 1, cancellable: true });
    expect(callScope('read', { timeoutMs: MAX_TIMEOUT_MS }).timeoutMs).toBe(2_147_483_647);
  });

  it('refuses a signal that is not an AbortSignal, naming the call and what it got', () => {
    for (const [signal, got] of [[{ aborted: false }, 'an object'], ['abort', '"abort"'], [null, 'null']] as const) {
      const error = thrown(() => callScope('append to stream "orders"', { signal }));
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toBe(`append to stream "orders" signal must be an AbortSignal, got ${got}`);
    }
  });

  it('refuses a timeoutMs outside 1..2^31-1 or not an integer, naming the call, the range and what it got', () => {
    for (const [timeoutMs, got] of [
      [0, '0'],
      [-1, '-1'],
      [MAX_TIMEOUT_MS + 1, '2147483648'],
      [1.5, '1.5'],
      [Number.NaN, 'NaN'],
      ['100', '"100"'],
      [null, 'null'],
    ] as const) {
      const error = thrown(() => callScope('read stream "orders"', { timeoutMs }));
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toBe(`read stream "orders" timeoutMs must be an integer from 1 to 2147483647, got ${got}`);
    }
  });

  it('checks the signal before the timeout', () => {
    expect(thrown(() => callScope('read', { signal: 1, timeoutMs: 0 })).message).toMatch(/signal must be an AbortSignal/);
  });

  it('reads each option once', () => {
    let reads = 0;
    const options = {
      get timeoutMs() {
        reads++;
        return reads === 1 ? 10 : 0;
      },
    };
    expect(callScope('read', options).timeoutMs).toBe(10);
    expect(reads).toBe(1);
  });
});

describe('abortReason', () => {
  it('is the signal\'s reason when it has one', () => {
    const reason = new Error('stop');
    expect(abortReason(AbortSignal.abort(reason))).toBe(reason);
    expect(abortReason(AbortSignal.abort('why'))).toBe('why');
  });

  it('is an AbortError when the signal has no reason', () => {
    const reason = abortReason(AbortSignal.abort(null));
    expect(reason).toBeInstanceOf(DOMException);
    expect(reason).toMatchObject({ name: 'AbortError', message: 'This operation was aborted' });
  });
});

describe('currentCallSignal', () => {
  it('is the signal the call runs under, and undefined outside any call', () => {
    expect(currentCallSignal()).toBeUndefined();
    const signal = new AbortController().signal;
    expect(callSignals.run(signal, () => currentCallSignal())).toBe(signal);
  });
});

describe('runCancellable', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const read = { action: 'read stream "orders"', writes: false, stream: 'orders', group: 'billing' };
  const write = { action: 'append to stream "orders"', writes: true, stream: 'orders' };

  it('starts a call that cannot be cancelled as it is, with no call signal and without naming it', async () => {
    const lazy = vi.fn(() => read);
    let seen: AbortSignal | undefined | null = null;
    const result = await runCancellable(new CallScope(undefined, undefined), lazy, () => {
      seen = currentCallSignal();
      return Promise.resolve(7);
    });
    expect(result).toBe(7);
    expect(seen).toBeUndefined();
    expect(lazy).not.toHaveBeenCalled();
  });

  it('refuses at once, starting nothing, when the signal is already aborted', async () => {
    const reason = new Error('gone');
    const start = vi.fn(() => Promise.resolve(1));
    const lazy = vi.fn(() => read);
    await expect(runCancellable(new CallScope(AbortSignal.abort(reason), undefined), lazy, start)).rejects.toBe(reason);
    expect(start).not.toHaveBeenCalled();
    expect(lazy).not.toHaveBeenCalled();
  });

  it('names a cancellable call through a lazy target, and gives the backend a live call signal', async () => {
    const lazy = vi.fn(() => read);
    let seen: AbortSignal | undefined;
    const result = await runCancellable(new CallScope(new AbortController().signal, undefined), lazy, () => {
      seen = currentCallSignal();
      return Promise.resolve('ok');
    });
    expect(result).toBe('ok');
    expect(lazy).toHaveBeenCalledTimes(1);
    expect(seen).toBeInstanceOf(AbortSignal);
    expect(seen!.aborted).toBe(false);
  });

  it('passes the backend\'s own failure through', async () => {
    const failure = new RheoError('backend_unavailable', 'down');
    await expect(runCancellable(new CallScope(undefined, 1_000), read, () => Promise.reject(failure))).rejects.toBe(failure);
  });

  it('rejects a read with the caller\'s abort reason as soon as it aborts, and aborts the backend\'s call signal', async () => {
    const caller = new AbortController();
    const work = deferred<number>();
    let seen: AbortSignal | undefined;
    const call = outcome(
      runCancellable(new CallScope(caller.signal, undefined), read, () => {
        seen = currentCallSignal();
        return work.promise;
      }),
    );
    // No timeout asked for, so no timer either.
    expect(vi.getTimerCount()).toBe(0);
    const reason = new Error('user cancelled');
    caller.abort(reason);
    expect(seen!.aborted).toBe(true);
    expect(seen!.reason).toBe(reason);
    work.resolve(1);
    expect(await call).toEqual({ error: reason });
  });

  it('rejects a read that runs past its timeout with a timeout error naming the call and the limit', async () => {
    const work = deferred<number>();
    let seen: AbortSignal | undefined;
    const call = outcome(
      runCancellable(new CallScope(undefined, 250), read, () => {
        seen = currentCallSignal();
        return work.promise;
      }),
    );
    await vi.advanceTimersByTimeAsync(249);
    expect(seen!.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen!.aborted).toBe(true);
    const { error } = await call;
    expect(error).toBeInstanceOf(RheoError);
    expect(error).toMatchObject({ code: 'timeout', stream: 'orders', group: 'billing', message: 'read stream "orders" did not finish within 250 ms' });
    work.reject(new Error('late'));
  });

  it('rejects a write that times out as ambiguous, with the timeout as its cause', async () => {
    const call = outcome(runCancellable(new CallScope(undefined, 100), write, () => new Promise<number>(() => {})));
    await vi.advanceTimersByTimeAsync(100);
    const { error } = await call;
    expect(error).toBeInstanceOf(RheoError);
    expect(error).toMatchObject({
      code: 'ambiguous',
      stream: 'orders',
      group: undefined,
      message: 'append to stream "orders" was timed out after it was sent; it may or may not have been applied',
    });
    expect((error as Error).cause).toMatchObject({ code: 'timeout', message: 'append to stream "orders" did not finish within 100 ms' });
  });

  it('rejects an aborted write as ambiguous, with the caller\'s reason as its cause', async () => {
    const caller = new AbortController();
    const call = outcome(runCancellable(new CallScope(caller.signal, 60_000), write, () => new Promise<number>(() => {})));
    const reason = new RheoError('closed', 'shutting down');
    caller.abort(reason);
    const { error } = await call;
    expect(error).toMatchObject({
      code: 'ambiguous',
      stream: 'orders',
      message: 'append to stream "orders" was aborted after it was sent; it may or may not have been applied',
    });
    expect((error as Error).cause).toBe(reason);
  });

  it('once settled, neither a later abort of the caller nor the timer reaches the call signal', async () => {
    const caller = new AbortController();
    let seen: AbortSignal | undefined;
    await runCancellable(new CallScope(caller.signal, 100), read, () => {
      seen = currentCallSignal();
      return Promise.resolve(1);
    });
    await vi.advanceTimersByTimeAsync(1_000);
    caller.abort(new Error('late'));
    expect(seen!.aborted).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('once failed, neither a later abort of the caller nor the timer reaches the call signal', async () => {
    const caller = new AbortController();
    let seen: AbortSignal | undefined;
    const call = outcome(
      runCancellable(new CallScope(caller.signal, 100), read, () => {
        seen = currentCallSignal();
        return Promise.reject(new Error('failed'));
      }),
    );
    expect((await call).error).toEqual(new Error('failed'));
    expect(vi.getTimerCount()).toBe(0);
    caller.abort(new Error('late'));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(seen!.aborted).toBe(false);
  });

  it('after an abort, the timer is cleared', async () => {
    const caller = new AbortController();
    const call = outcome(runCancellable(new CallScope(caller.signal, 100), read, () => new Promise<number>(() => {})));
    caller.abort('stop');
    expect((await call).error).toBe('stop');
    expect(vi.getTimerCount()).toBe(0);
  });
});
