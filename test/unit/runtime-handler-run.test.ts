import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { HandlerRun, type RunReading } from '../../src/runtime/handler-run.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { turns } from '../support/turns.js';

/*
 * The runtime's one handler-run engine, on its own: what the consumer, the
 * partition worker and the lease sink share (test/unit/handler-run.test.ts,
 * partition-worker.test.ts and lease-sink.test.ts cover each reading of it).
 */

type R = { how: string; value?: unknown };

const reading: RunReading<R> = {
  returned: (value) => ({ how: 'returned', value }),
  threw: (error) => ({ how: 'threw', value: (error as Error).message }),
  timedOut: (ms) => ({ result: { how: 'timeout', value: ms }, reason: `late after ${ms}` }),
};

function setup() {
  const timers = new ManualTimers(new ManualClock(0));
  const gauge = { started: 0, settled: 0 };
  const counting = { started: () => void gauge.started++, settled: () => void gauge.settled++ };
  return { timers, gauge, counting, run: new HandlerRun<R>(reading) };
}

describe('runtime HandlerRun', () => {
  it('answers a plain value or a throw synchronously, with no timer, and never calls the handler twice', () => {
    const { timers, gauge, counting, run } = setup();
    let calls = 0;
    expect(run.run(() => (calls++, 7), 1_000, timers, counting)).toEqual({ how: 'returned', value: 7 });
    expect(timers.pendingDelays()).toEqual([]);
    expect(run.run(() => calls++, 1_000, timers, counting)).toEqual({ how: 'returned', value: 7 });
    expect([calls, gauge.started, gauge.settled]).toEqual([1, 1, 1]);
    const other = setup();
    expect(other.run.run(() => { throw new Error('boom'); }, 1_000, other.timers)).toEqual({ how: 'threw', value: 'boom' });
    expect(other.timers.pendingDelays()).toEqual([]);
  });

  it('times out a promise that outlives timeoutMs: aborts the signal with the reading\'s reason, resolves at once, and the gauge still counts the handler', async () => {
    const { timers, gauge, counting, run } = setup();
    let finish!: (v: string) => void;
    const result = run.run(() => new Promise<string>((resolve) => (finish = resolve)), 50, timers, counting);
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([50]);
    timers.advance(50);
    await expect(result).resolves.toEqual({ how: 'timeout', value: 50 });
    expect([run.aborted, run.signal.reason]).toEqual([true, 'late after 50']);
    expect(gauge).toEqual({ started: 1, settled: 0 });
    finish('too late');
    await turns();
    expect(gauge).toEqual({ started: 1, settled: 1 });
    expect(run.result).toEqual({ how: 'timeout', value: 50 });
  });

  it('an interrupt ends a running handler at once and cancels its timer; the first result wins, and abortSignal alone ends nothing', async () => {
    const { timers, run } = setup();
    let finish!: (v: string) => void;
    const result = run.run(() => new Promise<string>((resolve) => (finish = resolve)), 50, timers);
    run.abortSignal('look out');
    expect([run.aborted, run.result]).toEqual([true, null]);
    run.interrupt({ how: 'interrupted' }, 'gone');
    run.interrupt({ how: 'again' }, 'twice');
    await expect(result).resolves.toEqual({ how: 'interrupted' });
    expect(run.signal.reason).toBe('look out');
    expect(timers.pendingDelays()).toEqual([]);
    finish('ignored');
    await turns();
    expect(run.result).toEqual({ how: 'interrupted' });
    const early = setup();
    early.run.interrupt({ how: 'before' }, 'early');
    let called = false;
    expect(early.run.run(() => (called = true), null, early.timers)).toEqual({ how: 'before' });
    expect(called).toBe(false);
  });

  it('a rejected promise is read as a throw', async () => {
    const { timers, run } = setup();
    await expect(run.run(() => Promise.reject(new Error('later')), null, timers)).resolves.toEqual({ how: 'threw', value: 'later' });
  });
});
