import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { RheoError } from '../../src/core/errors.js';
import type { HandlerOutcome } from '../../src/consumer/consumer-types.js';
import { HandlerRun, type RunResult } from '../../src/consumer/handler-run.js';
import { fakeLease } from '../support/fake-settler.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { turns } from '../support/turns.js';

/*
 * One handler invocation: its result, its timeout and the interrupts that
 * end it early, driven by manual timers (the consumer tests cover it end to
 * end).
 */

function setup(attempt = 1) {
  const timers = new ManualTimers(new ManualClock(0));
  const gauge = { started: 0, settled: 0 };
  const counting = { started: () => void gauge.started++, settled: () => void gauge.settled++ };
  const run = new HandlerRun({ ...fakeLease(1), attempt });
  return { timers, gauge, counting, run };
}

function gate<T>(): { promise: Promise<T>; open(value: T): void; fail(error: unknown): void } {
  let open!: (value: T) => void;
  let fail!: (error: unknown) => void;
  const promise = new Promise<T>((resolve, reject) => ((open = resolve), (fail = reject)));
  return { promise, open, fail };
}

describe('HandlerRun', () => {
  it('a handler that returns a plain value is answered synchronously, and a second run answers the same without calling it', () => {
    const { timers, gauge, counting, run } = setup(3);
    const seen: Array<{ sequence: number; attempt: number }> = [];
    const result = run.run((event, context) => {
      seen.push({ sequence: event.sequence, attempt: context.attempt });
      expect(context.lease).toBe(run.lease);
      return { reject: 'bad' };
    }, null, timers, counting);
    expect(result).toEqual({ kind: 'reject', reason: 'bad' });
    expect(run.run(() => 'ack', null, timers, counting)).toBe(result);
    expect(seen).toEqual([{ sequence: 1, attempt: 3 }]);
    expect(gauge).toEqual({ started: 1, settled: 1 });
  });

  it('a synchronous throw nacks with the error, and an asynchronous rejection does too', async () => {
    const boom = new Error('boom');
    const sync = setup();
    expect(sync.run.run(() => {
      throw boom;
    }, null, sync.timers, sync.counting)).toEqual({ kind: 'nack', reason: 'handler threw: boom', delayMs: 0, failure: { kind: 'threw', error: boom } });

    const async = setup();
    const pending = async.run.run(() => Promise.reject(boom), null, async.timers, async.counting);
    expect(pending).toBeInstanceOf(Promise);
    expect(await pending).toEqual({ kind: 'nack', reason: 'handler threw: boom', delayMs: 0, failure: { kind: 'threw', error: boom } });
    expect(async.gauge).toEqual({ started: 1, settled: 1 });
  });

  it('an asynchronous handler resolves the run with its outcome; the gauge hears it settle', async () => {
    const { timers, gauge, counting, run } = setup();
    const outcome = gate<HandlerOutcome>();
    const pending = run.run(() => outcome.promise, null, timers, counting);
    await turns();
    expect(gauge).toEqual({ started: 1, settled: 0 });
    outcome.open({ retry: 'later', delayMs: 5 });
    expect(await pending).toEqual({ kind: 'nack', reason: 'later', delayMs: 5, failure: null });
    expect(gauge).toEqual({ started: 1, settled: 1 });
  });

  it('handlerTimeoutMs ends the run with a timeout nack and aborts the signal; its timer keeps no process alive', async () => {
    const { timers, gauge, counting, run } = setup();
    let signal: AbortSignal | null = null;
    const outcome = gate<HandlerOutcome>();
    const pending = run.run((_e, context) => {
      signal = context.signal;
      return outcome.promise;
    }, 250, timers, counting);
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([250]);
    expect(timers.pendingDelays({ keepAlive: true })).toEqual([]);
    timers.advance(250);
    const result = (await pending) as Extract<RunResult, { kind: 'nack' }>;
    expect(result).toMatchObject({ kind: 'nack', reason: 'handler timed out after 250 ms', delayMs: 0, failure: { kind: 'timeout' } });
    expect(run.aborted).toBe(true);
    expect(signal!.aborted).toBe(true);
    expect(signal!.reason).toBe(result.failure!.error);
    expect((signal!.reason as Error).name).toBe('TimeoutError');
    // The handler ignored its signal: the gauge still counts it until its promise settles.
    expect(gauge).toEqual({ started: 1, settled: 0 });
    outcome.open('ack');
    await turns();
    expect(gauge).toEqual({ started: 1, settled: 1 });
    expect(run.run(() => 'ack', null, timers, counting)).toBe(result); // the first result stands
  });

  it('a handler that finishes before its timeout cancels the timer', async () => {
    const { timers, counting, run } = setup();
    expect(await run.run(() => Promise.resolve('ack' as const), 250, timers, counting)).toEqual({ kind: 'ack' });
    expect(timers.pendingDelays()).toEqual([]);
    const sync = setup();
    sync.run.run(() => 'ack', 250, sync.timers, sync.counting);
    expect(sync.timers.pendingDelays()).toEqual([]);
  });

  it("interrupt 'stopping' aborts the signal with an AbortError and nacks; the first interrupt wins", async () => {
    const { timers, counting, run } = setup();
    let signal: AbortSignal | null = null;
    const pending = run.run((_e, context) => {
      signal = context.signal;
      return new Promise<HandlerOutcome>(() => {});
    }, 1000, timers, counting);
    run.interrupt({ kind: 'stopping' });
    run.interrupt({ kind: 'lost', error: new RheoError('stale_lease', 'gone') });
    const result = (await pending) as Extract<RunResult, { kind: 'nack' }>;
    expect(result).toMatchObject({ kind: 'nack', reason: 'consumer stopped before the handler finished', delayMs: 0, failure: { kind: 'stopped' } });
    expect((result.failure!.error as Error).name).toBe('AbortError');
    expect(signal!.reason).toMatchObject({ name: 'AbortError', message: 'consumer stopped before the handler finished' });
    expect(timers.pendingDelays()).toEqual([]); // the timeout is cancelled
  });

  it("interrupt 'lost' aborts the signal with the loss and ends the run as lost", async () => {
    const { timers, counting, run } = setup();
    const error = new RheoError('stale_lease', 'lease moved on');
    const pending = run.run(() => new Promise<HandlerOutcome>(() => {}), null, timers, counting);
    run.interrupt({ kind: 'lost', error });
    expect(await pending).toEqual({ kind: 'lost', error });
    expect(run.signal.reason).toBe(error);
  });

  it('a run interrupted before it started never calls the handler', () => {
    const { timers, gauge, counting, run } = setup();
    run.interrupt({ kind: 'stopping' });
    let called = false;
    const result = run.run(() => {
      called = true;
      return 'ack';
    }, 100, timers, counting);
    expect(called).toBe(false);
    expect(result).toMatchObject({ kind: 'nack', failure: { kind: 'stopped' } });
    expect(gauge).toEqual({ started: 0, settled: 0 });
    expect(timers.pendingDelays()).toEqual([]);
  });
});
