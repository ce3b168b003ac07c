import { describe, expect, it } from 'vitest';
import { resolveConsumeOptions, resolveStopTimeout } from '../../src/consumer/consume-options.js';
import type { ConsumeOptions } from '../../src/consumer/consumer-types.js';
import { resolvePartitionOptions, type PartitionConsumeOptions } from '../../src/consumer/partition-options.js';
import type { Lease } from '../../src/core/types.js';
import type { RheoDefaults } from '../../src/rheo.js';
import { ManualClock } from '../../src/core/clock.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { thrown } from '../support/thrown.js';

/*
 * `rheo.consume` options, both assignments: each default, both edges of every
 * limit, and a refusal that names the option (callers branch on the code,
 * people read the message).
 */

const DEFAULTS: Readonly<RheoDefaults> = Object.freeze({ leaseMs: 30_000, maxAttempts: 5, maxDemand: 10, pollMs: 200, maxFetchBytes: 1 << 20 });
const WEEK_MS = 7 * 24 * 3600_000;
const handler = (): 'ack' => 'ack';

function invalid(fn: () => unknown): string {
  const error = thrown(fn);
  expect(error.code).toBe('invalid_argument');
  return error.message;
}

const competing = (options: Record<string, unknown>) =>
  resolveConsumeOptions({ stream: 's', group: 'g', handler, ...options } as ConsumeOptions<unknown>, DEFAULTS, () => 'abc');
const partitioned = (options: Record<string, unknown>) =>
  resolvePartitionOptions({ stream: 's', group: 'g', handler, ...options } as unknown as PartitionConsumeOptions<unknown>, DEFAULTS, () => 'xyz');

function lease(key: string | null, partition = 2): Lease<unknown> {
  return { receipt: `r-${partition}`, event: { id: 'e1', key, partition } } as unknown as Lease<unknown>;
}

describe('competing consume options', () => {
  it('fills every default', () => {
    const o = competing({});
    expect(o).toMatchObject({
      concurrency: 1,
      maxDemand: 10,
      leaseMs: 30_000,
      pollMs: 200,
      consumerId: 'consumer-abc',
      partitions: undefined,
      handlerTimeoutMs: null,
      orderKey: null,
      stopTimeoutMs: 30_000,
      timers: undefined,
      minDemand: undefined,
      fetchBackoff: undefined,
      transaction: false,
    });
    expect(competing({ concurrency: 25 }).maxDemand).toBe(25);
    expect(competing({ transaction: true }).transaction).toBe(true);
    expect(competing({ consumerId: 'w1' }).consumerId).toBe('w1');
  });

  it('accepts every limit at its edge and refuses one past it, naming the option', () => {
    const ok = (options: Record<string, unknown>): void => void competing(options);
    const refused = (options: Record<string, unknown>): string => invalid(() => competing(options));
    ok({ concurrency: 10_000, maxDemand: 10_000 });
    expect(refused({ concurrency: 0 })).toMatch(/^concurrency/);
    expect(refused({ concurrency: 10_001 })).toMatch(/^concurrency/);
    ok({ maxDemand: 1 });
    expect(refused({ maxDemand: 0 })).toMatch(/^maxDemand/);
    expect(refused({ maxDemand: 10_001 })).toMatch(/^maxDemand/);
    expect(refused({ concurrency: 4, maxDemand: 3 })).toBe(
      'maxDemand (3) must be at least concurrency (4): with fewer leases held, 4 handlers can never run at once',
    );
    ok({ leaseMs: 1 });
    ok({ leaseMs: WEEK_MS });
    expect(refused({ leaseMs: 0 })).toMatch(/^leaseMs/);
    expect(refused({ leaseMs: WEEK_MS + 1 })).toMatch(/^leaseMs/);
    ok({ pollMs: 1 });
    ok({ pollMs: 3600_000 });
    expect(refused({ pollMs: 0 })).toMatch(/^pollMs/);
    expect(refused({ pollMs: 3600_001 })).toMatch(/^pollMs/);
    ok({ handlerTimeoutMs: 1 });
    ok({ handlerTimeoutMs: WEEK_MS });
    expect(refused({ handlerTimeoutMs: 0 })).toMatch(/^handlerTimeoutMs/);
    expect(refused({ handlerTimeoutMs: WEEK_MS + 1 })).toMatch(/^handlerTimeoutMs/);
    expect(competing({ stopTimeoutMs: 0 }).stopTimeoutMs).toBe(0);
    ok({ stopTimeoutMs: WEEK_MS });
    expect(refused({ stopTimeoutMs: -1 })).toMatch(/^stopTimeoutMs/);
    expect(refused({ stopTimeoutMs: WEEK_MS + 1 })).toMatch(/^stopTimeoutMs/);
    expect(competing({ maxDemand: 20, minDemand: 20 }).minDemand).toBe(20);
    expect(competing({ minDemand: 1 }).minDemand).toBe(1);
    expect(refused({ maxDemand: 20, minDemand: 21 })).toMatch(/^minDemand/);
    expect(refused({ minDemand: 0 })).toMatch(/^minDemand/);
  });

  it('copies partitions and checks each; refuses bad consumerId, signal, timers and transaction', () => {
    const given = [0, 4096];
    const o = competing({ partitions: given });
    given.push(5);
    expect(o.partitions).toEqual([0, 4096]);
    expect(invalid(() => competing({ partitions: [] }))).toBe('partitions must be a non-empty array of partition numbers, got an array');
    expect(invalid(() => competing({ partitions: 3 }))).toMatch(/^partitions must be a non-empty array/);
    expect(invalid(() => competing({ partitions: [4097] }))).toMatch(/^partitions\[\]/);
    expect(invalid(() => competing({ consumerId: 5 }))).toMatch(/^consumerId/);
    expect(invalid(() => competing({ signal: {} }))).toMatch(/^signal must be an AbortSignal/);
    const signal = new AbortController().signal;
    expect(competing({ signal }).signal).toBe(signal);
    expect(invalid(() => competing({ timers: null }))).toBe('timers must be an object with schedule(ms, callback), got null');
    expect(invalid(() => competing({ timers: {} }))).toMatch(/^timers must be an object with schedule/);
    const timers = new ManualTimers(new ManualClock(0));
    expect(competing({ timers }).timers).toBe(timers);
    expect(invalid(() => competing({ transaction: 'yes' }))).toBe('transaction must be true or false, got "yes"');
    expect(invalid(() => competing({ handler: 'h' }))).toMatch(/^consume handler must be a function/);
    expect(invalid(() => competing({ group: '' }))).toMatch(/group/);
  });

  it('orders by key (a keyless event by its own receipt), by partition, or by a function that must return a string', () => {
    const byKey = competing({ orderBy: 'key' }).orderKey!;
    expect(byKey(lease('cust-1'))).toBe('k:cust-1');
    expect(byKey(lease(null, 3))).toBe('\u0000r-3');
    expect(competing({ orderBy: 'partition' }).orderKey!(lease('a', 7))).toBe('p:7');
    const custom = competing({ orderBy: (l: Lease<unknown>) => (l.event.key === 'bad' ? 42 : `c:${l.event.key}`) }).orderKey!;
    expect(custom(lease('x'))).toBe('c:x');
    expect(invalid(() => custom(lease('bad')))).toBe('orderBy function must return a string, got 42 for event e1');
    expect(invalid(() => competing({ orderBy: 'time' }))).toMatch(/^orderBy must be 'key', 'partition' or a function/);
  });

  it('stop timeoutMs: the fallback when no options, both edges, and named refusals', () => {
    expect(resolveStopTimeout(undefined, 123)).toBe(123);
    expect(resolveStopTimeout({}, 123)).toBe(123);
    expect(resolveStopTimeout({ timeoutMs: 0 }, 123)).toBe(0);
    expect(resolveStopTimeout({ timeoutMs: WEEK_MS }, 123)).toBe(WEEK_MS);
    expect(invalid(() => resolveStopTimeout({ timeoutMs: WEEK_MS + 1 }, 1))).toMatch(/^stop timeoutMs/);
    expect(invalid(() => resolveStopTimeout('soon', 1))).toMatch(/^stop options/);
  });
});

describe('partition consume options', () => {
  it('fills every default', () => {
    expect(partitioned({})).toMatchObject({
      byKey: false,
      concurrency: 10,
      batchSize: 100,
      onFailure: 'dead-letter',
      maxAttempts: null,
      retryBackoff: { initialMs: 100, maxMs: 30_000 },
      memberId: 'member-xyz',
      sessionMs: 10_000,
      heartbeatMs: 3_333,
      rebalanceTimeoutMs: 30_000,
      pollMs: 200,
      handlerTimeoutMs: null,
      stopTimeoutMs: 30_000,
      transaction: false,
    });
    expect(partitioned({ retryBackoff: { initialMs: 60_000 } }).retryBackoff).toEqual({ initialMs: 60_000, maxMs: 60_000 });
    expect(partitioned({ sessionMs: 3 }).heartbeatMs).toBe(1);
    expect(partitioned({ orderBy: 'key', onFailure: 'block', memberId: 'm1' })).toMatchObject({ byKey: true, onFailure: 'block', memberId: 'm1' });
    expect(partitioned({ transaction: true }).transaction).toBe(true);
    expect(partitioned({ maxAttempts: 1 }).maxAttempts).toBe(1);
    expect(partitioned({ handlerTimeoutMs: 1 }).handlerTimeoutMs).toBe(1);
  });

  it('accepts every limit at its edge and refuses one past it, naming the option', () => {
    const ok = (options: Record<string, unknown>): void => void partitioned(options);
    const refused = (options: Record<string, unknown>): string => invalid(() => partitioned(options));
    for (const [name, low, high] of [
      ['concurrency', 1, 10_000],
      ['batchSize', 1, 10_000],
      ['maxAttempts', 1, 1_000_000],
      ['rebalanceTimeoutMs', 0, WEEK_MS],
      ['pollMs', 1, 3600_000],
      ['handlerTimeoutMs', 1, WEEK_MS],
      ['stopTimeoutMs', 0, WEEK_MS],
      ['sessionMs', 3, WEEK_MS],
    ] as const) {
      ok({ [name]: low });
      ok({ [name]: high });
      expect(refused({ [name]: low - 1 })).toMatch(new RegExp(`^${name}`));
      expect(refused({ [name]: high + 1 })).toMatch(new RegExp(`^${name}`));
    }
    ok({ sessionMs: 30, heartbeatMs: 29 });
    expect(refused({ sessionMs: 30, heartbeatMs: 30 })).toMatch(/^heartbeatMs/);
    expect(refused({ heartbeatMs: 0 })).toMatch(/^heartbeatMs/);
    ok({ retryBackoff: { initialMs: 1, maxMs: 1 } });
    ok({ retryBackoff: { initialMs: 3600_000, maxMs: 3600_000 } });
    expect(refused({ retryBackoff: { initialMs: 0 } })).toMatch(/^retryBackoff\.initialMs/);
    expect(refused({ retryBackoff: { initialMs: 3600_001 } })).toMatch(/^retryBackoff\.initialMs/);
    expect(refused({ retryBackoff: { initialMs: 10, maxMs: 9 } })).toMatch(/^retryBackoff\.maxMs/);
    expect(refused({ retryBackoff: { maxMs: 3600_001 } })).toMatch(/^retryBackoff\.maxMs/);
    expect(refused({ retryBackoff: 5 })).toMatch(/^retryBackoff/);
  });

  it('refuses a bad handler, orderBy, onFailure, transaction, memberId, signal and timers with messages that say what is allowed', () => {
    const refused = (options: Record<string, unknown>): string => invalid(() => partitioned(options));
    expect(refused({ handler: null })).toBe('consume handler must be a function (event, { attempt, partition, signal }) => outcome, got null');
    expect(refused({ orderBy: 'time' })).toBe(`with assignment 'partitions', orderBy must be 'partition' or 'key', got "time"`);
    expect(refused({ onFailure: 'drop' })).toBe(`onFailure must be 'dead-letter' or 'block', got "drop"`);
    expect(refused({ transaction: 1 })).toBe('transaction must be true or false, got 1');
    expect(refused({ transaction: true, orderBy: 'key' })).toMatch(/^transaction: true needs orderBy: 'partition'/);
    expect(partitioned({ transaction: false, orderBy: 'key' }).byKey).toBe(true);
    expect(refused({ memberId: 9 })).toMatch(/^memberId/);
    expect(refused({ signal: 'stop' })).toBe('signal must be an AbortSignal, got "stop"');
    expect(refused({ timers: null })).toBe('timers must be an object with schedule(ms, callback), got null');
    expect(refused({ timers: { schedule: 1 } })).toMatch(/^timers must be an object/);
    const signal = new AbortController().signal;
    const timers = new ManualTimers(new ManualClock(0));
    expect(partitioned({ signal, timers })).toMatchObject({ signal, timers });
    expect(refused({ stream: '' })).toMatch(/stream/);
  });
});
