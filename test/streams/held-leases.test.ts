import { describe, expect, it } from 'vitest';
import { EventEmitter } from 'node:events';
import { ManualClock } from '../../src/core/clock.js';
import { RheoError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/types.js';
import { createBatchTransform } from '../../src/transforms/batch-transform.js';
import { createRateLimit, type RateLimitOptions } from '../../src/transforms/rate-limit.js';
import { leaseOfItem, releaseHeld } from '../../src/transforms/release-held.js';
import { FakeSettler, fakeLease } from '../support/fake-settler.js';
import { thrown } from '../support/thrown.js';
import { deferred, settleQueued } from '../support/deferred.js';
import { ManualTimers } from './support/manual-timers.js';
import { until } from './support/wait.js';

type Tick = { n: number };

describe('the lease an item carries (leaseOfItem)', () => {
  const lease = fakeLease(1);

  it('is the item itself or the lease of a { lease, value }', () => {
    expect(leaseOfItem(lease)).toBe(lease);
    expect(leaseOfItem({ lease, value: 10 })).toBe(lease);
    // An item with only one of the two lease fields is not a lease: its `lease` field is read.
    expect(leaseOfItem({ leaseId: 'x', lease })).toBe(lease);
    expect(leaseOfItem({ event: {}, lease })).toBe(lease);
  });

  it('is null for anything else, without throwing', () => {
    for (const item of [null, undefined, 7, 'lease', {}, { lease: null }, { lease: 'x' }, { lease: 3 }, { lease: { leaseId: 'x' } }, { lease: { event: {} } }]) {
      expect(leaseOfItem(item)).toBeNull();
    }
  });
});

describe('releaseHeld', () => {
  it('releases the lease of every item that carries one and skips the rest', async () => {
    const settler = new FakeSettler();
    const events = new EventEmitter();
    const failures: unknown[] = [];
    events.on('settle-error', (info) => failures.push(info));
    await releaseHeld(settler, [fakeLease(1), { lease: fakeLease(2), value: 'v' }, 5, null, { value: 3 }], events);
    expect(failures).toEqual([]);
    expect(settler.settles).toEqual([
      { kind: 'release', sequence: 1 },
      { kind: 'release', sequence: 2 },
    ]);
  });

  it('turns a failed release into an event, never a rejection', async () => {
    const settler = new FakeSettler();
    const stale = new RheoError('stale_lease', 'lease 1 is gone');
    const down = new RheoError('backend_unavailable', 'no connection');
    const plain = new Error('socket hang up');
    const failures = new Map<number, unknown>([
      [1, stale],
      [2, down],
      [3, plain],
    ]);
    settler.answer = (settle) => Promise.reject(failures.get(settle.sequence));
    const events = new EventEmitter();
    const lost: Array<{ lease: Lease<Tick>; error: RheoError }> = [];
    const errors: Array<{ lease: Lease<Tick>; op: string; error: RheoError }> = [];
    events.on('lease-lost', (info: { lease: Lease<Tick>; error: RheoError }) => lost.push(info));
    events.on('settle-error', (info: { lease: Lease<Tick>; op: string; error: RheoError }) => errors.push(info));
    await releaseHeld(settler, [fakeLease(1), fakeLease(2), fakeLease(3)], events);
    expect(lost.map((l) => [l.lease.event.sequence, l.error])).toEqual([[1, stale]]);
    expect(errors.map((e) => [e.lease.event.sequence, e.op])).toEqual([
      [2, 'release'],
      [3, 'release'],
    ]);
    expect(errors[0]!.error).toBe(down);
    // A plain error is wrapped: rheo reports RheoErrors only, the original rides along as cause.
    expect(errors[1]!.error).toBeInstanceOf(RheoError);
    expect(errors[1]!.error.code).toBe('internal');
    expect(errors[1]!.error.message).toBe('Error: socket hang up');
    expect(errors[1]!.error.cause).toBe(plain);
  });
});

describe('batch transform: options and teardown', () => {
  it('refuses options that are not an object', () => {
    for (const options of [null, 3, 'size']) {
      const error = thrown(() => createBatchTransform(options as never));
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toMatch(/createBatchTransform expects/);
    }
  });

  it('flushes a size batch and, later, the time batch of the next items', () => {
    const timers = new ManualTimers(new ManualClock());
    const batcher = createBatchTransform<number>({ size: 2, timeMs: 100, timers });
    const out: number[][] = [];
    batcher.on('data', (batch: number[]) => out.push(batch));
    batcher.write(1);
    batcher.write(2);
    batcher.write(3);
    expect(out).toEqual([[1, 2]]);
    expect(timers.pendingDelays()).toEqual([100]);
    timers.advance(100);
    expect(out).toEqual([[1, 2], [3]]);
  });

  it('closes at once when destroyed holding nothing to give back', () => {
    const settler = new FakeSettler();
    const timers = new ManualTimers(new ManualClock());
    const idle = createBatchTransform<Lease<Tick>>({ size: 5, timers, producer: settler });
    idle.destroy();
    expect(idle.closed).toBe(true);
    const noProducer = createBatchTransform<Lease<Tick>>({ size: 5, timeMs: 1000, timers });
    noProducer.write(fakeLease(1));
    noProducer.destroy();
    expect(noProducer.closed).toBe(true);
    expect(timers.pendingDelays()).toEqual([]);
    expect(settler.settles).toEqual([]);
  });

  it('closes only once the leases of its unfinished batch are released, with the error it was destroyed with', async () => {
    const settler = new FakeSettler();
    const release = deferred();
    settler.answer = () => release.promise;
    const batcher = createBatchTransform<unknown>({ size: 5, timeMs: 1000, timers: settler.timers, producer: settler });
    batcher.write(fakeLease(1));
    batcher.write({ lease: fakeLease(2), value: 'two' });
    const errors: unknown[] = [];
    batcher.on('error', (error) => errors.push(error));
    const boom = new Error('downstream gone');
    batcher.destroy(boom);
    expect(settler.settles).toEqual([
      { kind: 'release', sequence: 1 },
      { kind: 'release', sequence: 2 },
    ]);
    await settleQueued();
    expect(batcher.closed).toBe(false);
    release.resolve();
    await until(() => batcher.closed, 'the batcher closed');
    expect(errors).toEqual([boom]);
    expect(settler.timers.pendingDelays()).toEqual([]);
  });
});

describe('rate limit: options, sliding window and teardown', () => {
  const base = (): RateLimitOptions => ({ limit: 1, intervalMs: 1000 });

  it('refuses a missing, out-of-range or non-integer limit or interval, and options that are not an object', () => {
    const bad: unknown[] = [
      null,
      3,
      { intervalMs: 1000 },
      { limit: 1 },
      { ...base(), limit: 0 },
      { ...base(), limit: 1_000_001 },
      { ...base(), limit: 1.5 },
      { ...base(), intervalMs: 0 },
      { ...base(), intervalMs: 86_400_001 },
    ];
    for (const options of bad) expect(thrown(() => createRateLimit(options as RateLimitOptions)).code).toBe('invalid_argument');
    expect(thrown(() => createRateLimit(null as never)).message).toMatch(/createRateLimit expects/);
    expect(thrown(() => createRateLimit({ intervalMs: 1000 } as RateLimitOptions)).message).toMatch(/^limit must be an integer in 1\.\.1000000/);
    expect(thrown(() => createRateLimit({ limit: 1, intervalMs: 0 })).message).toMatch(/^intervalMs must be an integer in 1\.\.86400000/);
    expect(thrown(() => createRateLimit('x' as never)).message).toMatch(/createRateLimit expects/);
    const edge = createRateLimit({ limit: 1_000_000, intervalMs: 86_400_000 });
    expect([edge.limit, edge.intervalMs]).toEqual([1_000_000, 86_400_000]);
  });

  it('lets an item through exactly when the oldest pass leaves the window', async () => {
    const clock = new ManualClock(0);
    const timers = new ManualTimers(clock);
    const limiter = createRateLimit<number>({ limit: 2, intervalMs: 1000, clock, timers });
    const out: number[] = [];
    limiter.on('data', (n: number) => out.push(n));
    limiter.write(1);
    clock.set(600);
    limiter.write(2);
    limiter.write(3);
    limiter.write(4);
    await settleQueued();
    expect(out).toEqual([1, 2]);
    // Item 3 waits for item 1 (passed at 0) to leave the 1000 ms window: 400 ms from now.
    expect(timers.pendingDelays()).toEqual([400]);
    timers.advance(399);
    expect(out).toEqual([1, 2]);
    timers.advance(1);
    await until(() => out.length === 3, 'item 3 passed');
    // Item 4 waits for item 2 (passed at 600): until 1600.
    expect(timers.pendingDelays()).toEqual([600]);
    timers.advance(600);
    await until(() => out.length === 4, 'item 4 passed');
    expect(clock.now()).toBe(1600);
  });

  it('closes at once when destroyed holding nothing to give back, and stops its timer', async () => {
    const settler = new FakeSettler();
    const idle = createRateLimit<Lease<Tick>>({ ...base(), clock: settler.clock, timers: settler.timers, producer: settler });
    idle.destroy();
    expect(idle.closed).toBe(true);
    expect(idle.errored).toBeNull();

    const passed = createRateLimit<Lease<Tick>>({ ...base(), clock: settler.clock, timers: settler.timers, producer: settler });
    passed.resume();
    passed.write(fakeLease(1));
    await settleQueued();
    passed.destroy();
    expect(passed.closed).toBe(true);

    const noProducer = createRateLimit<Lease<Tick>>({ ...base(), clock: settler.clock, timers: settler.timers });
    noProducer.resume();
    noProducer.write(fakeLease(2));
    noProducer.write(fakeLease(3));
    await settleQueued();
    expect(settler.timers.pendingDelays()).toEqual([1000]);
    noProducer.destroy();
    expect(noProducer.closed).toBe(true);
    expect(settler.timers.pendingDelays()).toEqual([]);
    expect(settler.settles).toEqual([]);
  });

  it('closes only once the waiting lease is released', async () => {
    const settler = new FakeSettler();
    const release = deferred();
    settler.answer = () => release.promise;
    const limiter = createRateLimit<Lease<Tick>>({ ...base(), clock: settler.clock, timers: settler.timers, producer: settler });
    const out: number[] = [];
    limiter.on('data', (lease: Lease<Tick>) => out.push(lease.event.sequence));
    limiter.write(fakeLease(1));
    limiter.write(fakeLease(2));
    await settleQueued();
    expect(out).toEqual([1]);
    limiter.destroy();
    expect(settler.settles).toEqual([{ kind: 'release', sequence: 2 }]);
    await settleQueued();
    expect(limiter.closed).toBe(false);
    release.resolve();
    await until(() => limiter.closed, 'the limiter closed');
    settler.timers.advance(5000);
    expect(out).toEqual([1]);
  });
});
