import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { RheoError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/types.js';
import { attachTelemetry, type RheoTelemetry } from '../../src/observability/telemetry.js';
import type { HandlerErrorInfo, LeaseOutcome } from '../../src/runtime/lease-outcome.js';
import { createLeaseSink } from '../../src/sinks/lease-sink.js';
import { FakeSettler, fakeLease } from '../support/fake-settler.js';
import { until } from '../streams/support/wait.js';
import { turns } from '../support/turns.js';

type L = Lease<{ n: number }>;

const leases = (n: number): L[] => Array.from({ length: n }, (_, i) => fakeLease(i + 1));

/** A handler whose leases finish only when the test says so, in any order. */
function gated(): {
  handler: (lease: L, context: { signal: AbortSignal }) => Promise<LeaseOutcome>;
  started: number[];
  signals: Map<number, AbortSignal>;
  finish(sequence: number, outcome?: LeaseOutcome): void;
  fail(sequence: number, error: unknown): void;
} {
  const started: number[] = [];
  const signals = new Map<number, AbortSignal>();
  const gates = new Map<number, { resolve: (outcome: LeaseOutcome) => void; reject: (error: unknown) => void }>();
  return {
    started,
    signals,
    handler: (lease, context) => {
      started.push(lease.event.sequence);
      signals.set(lease.event.sequence, context.signal);
      return new Promise<LeaseOutcome>((resolve, reject) => gates.set(lease.event.sequence, { resolve, reject }));
    },
    finish: (sequence, outcome) => gates.get(sequence)!.resolve(outcome),
    fail: (sequence, error) => gates.get(sequence)!.reject(error),
  };
}

describe('lease sink', () => {
  it('refuses bad tuning naming the option, and defaults to one handler at a time', () => {
    const producer = new FakeSettler();
    const handler = (): void => {};
    expect(() => createLeaseSink({ producer: producer.settler, handler, concurrency: 0 })).toThrow(/concurrency/);
    expect(() => createLeaseSink({ producer: producer.settler, handler, maxQueued: -1 })).toThrow(/maxQueued/);
    // Both ends of each range are named, and the values just inside them are taken.
    expect(() => createLeaseSink({ producer: producer.settler, handler, concurrency: 10_001 })).toThrow(/concurrency.*10000/);
    expect(() => createLeaseSink({ producer: producer.settler, handler, maxQueued: 1_000_001 })).toThrow(/maxQueued.*1000000/);
    expect(createLeaseSink({ producer: producer.settler, handler, concurrency: 10_000 }).concurrency).toBe(10_000);
    expect(() => createLeaseSink({ producer: producer.settler, handler, maxQueued: 1_000_000 })).not.toThrow();
    expect(() => createLeaseSink({ handler } as never)).toThrow(/createLeaseSink expects \{ producer, handler/);
    expect(createLeaseSink({ producer: producer.settler, handler }).concurrency).toBe(1);
  });

  it('takes its handler as `handler` only: the removed older name `handle` is no handler', () => {
    const producer = new FakeSettler();
    expect(() => createLeaseSink({ producer: producer.settler, handle: () => {} } as never)).toThrow(
      expect.objectContaining({ code: 'invalid_argument', message: expect.stringMatching(/^createLeaseSink options: unknown option "handle"; did you mean "handler"\?/) }),
    );
  });

  it('holds writes once more than maxQueued leases wait, and resumes them as handlers start', async () => {
    const producer = new FakeSettler();
    const work = gated();
    const sink = createLeaseSink<{ n: number }>({ producer: producer.settler, concurrency: 1, maxQueued: 2, handler: work.handler });
    const peaks: number[] = [];
    for (const lease of leases(7)) sink.write(lease);
    const ended = new Promise<void>((resolve) => sink.end(resolve));
    await until(() => work.started.length === 1, 'the first handler runs');
    await turns();
    // One runs; at most maxQueued + 1 wait (the write over the bound is held, not refused).
    expect([sink.activeCount, sink.queuedCount]).toEqual([1, 3]);
    expect(sink.writableLength).toBe(4); // lease 4's write is held, and 5, 6, 7 are buffered behind it
    for (let next = 1; next <= 7; next++) {
      peaks.push(sink.queuedCount);
      work.finish(next);
      if (next < 7) await until(() => work.started.length === next + 1, `handler ${next + 1} starts`);
      await turns(3);
    }
    await ended;
    expect(Math.max(...peaks)).toBe(3);
    expect(work.started).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(producer.settles.map((s) => s.kind)).toEqual(Array(7).fill('ack'));
  });

  it('maxQueued: 0 hands each write over only once its lease started', async () => {
    const producer = new FakeSettler();
    const work = gated();
    const sink = createLeaseSink<{ n: number }>({ producer: producer.settler, concurrency: 1, maxQueued: 0, handler: work.handler });
    for (const lease of leases(3)) sink.write(lease);
    await until(() => work.started.length === 1, 'the first handler runs');
    await turns();
    expect([sink.activeCount, sink.queuedCount, sink.writableLength]).toEqual([1, 1, 2]); // lease 2's write is held, 3 behind it
    work.finish(1);
    await until(() => work.started.length === 2, 'the second handler runs');
    work.finish(2);
    await until(() => work.started.length === 3, 'the third handler runs');
    work.finish(3);
    await new Promise<void>((resolve) => sink.end(resolve));
    expect(producer.settles.map((s) => s.sequence)).toEqual([1, 2, 3]);
  });

  it('a lease lost while running has its signal aborted with the error; one lost while queued is dropped and frees room', async () => {
    const producer = new FakeSettler();
    const work = gated();
    const sink = createLeaseSink<{ n: number }>({ producer: producer.settler, concurrency: 1, maxQueued: 1, handler: work.handler });
    const [a, b, c, d] = leases(4);
    for (const lease of [a, b, c, d]) sink.write(lease);
    await until(() => work.started.length === 1, 'the first handler runs');
    await turns();
    expect([sink.queuedCount, sink.writableLength]).toEqual([2, 2]); // b and c wait; c's write and d are held
    const signal = work.signals.get(1)!;
    expect(signal.aborted).toBe(false);
    const lostRunning = new RheoError('stale_lease', 'a was taken');
    producer.lose(a!, lostRunning);
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe(lostRunning);
    producer.lose(b!, new RheoError('stale_lease', 'b was taken'));
    await turns();
    // b is gone from the queue: c's write completes and d is accepted (and held in turn).
    expect([sink.queuedCount, sink.writableLength]).toEqual([2, 1]);
    producer.lose(fakeLease(9), new RheoError('stale_lease', 'never written'));
    expect(sink.queuedCount).toBe(2);
    work.finish(1);
    await until(() => work.started.length === 2, 'c starts');
    work.finish(3);
    await until(() => work.started.length === 3, 'd starts');
    work.finish(4);
    // The sink stops listening by the time it finishes (not only once it is destroyed after).
    const listening = await new Promise<number>((resolve) => sink.end(() => resolve(producer.listenerCount('lease-lost'))));
    expect(listening).toBe(0);
    expect(work.started).toEqual([1, 3, 4]);
    expect(producer.settles.map((s) => [s.kind, s.sequence])).toEqual([
      ['ack', 1],
      ['ack', 3],
      ['ack', 4],
    ]);
  });

  it('a handler that throws or rejects is a handler-error and nacks with the message (the name when it has none)', async () => {
    const producer = new FakeSettler();
    const thrown = [new Error('sync boom'), new Error('async boom'), new TypeError(''), 'plain string'];
    const sink = createLeaseSink<{ n: number }>({
      producer: producer.settler,
      handler: (lease) => {
        const n = lease.event.payload.n;
        if (n === 1) throw thrown[0];
        if (n === 2) return Promise.reject(thrown[1]);
        if (n === 3) throw thrown[2];
        if (n === 4) return Promise.reject(thrown[3]);
        return n === 5 ? { retry: 'later', delayMs: 30 } : { reject: 'poison' };
      },
    });
    const errors: HandlerErrorInfo<unknown>[] = [];
    sink.on('handler-error', (info) => errors.push(info));
    await pipeline(Readable.from(leases(6)), sink);
    expect(errors.map((e) => [e.lease.event.sequence, e.error])).toEqual(thrown.map((error, i) => [i + 1, error]));
    expect(producer.settles).toEqual([
      { kind: 'nack', sequence: 1, reason: 'sync boom', delayMs: 0 },
      { kind: 'nack', sequence: 2, reason: 'async boom', delayMs: 0 },
      { kind: 'nack', sequence: 3, reason: 'TypeError', delayMs: 0 },
      { kind: 'nack', sequence: 4, reason: 'plain string', delayMs: 0 },
      { kind: 'nack', sequence: 5, reason: 'later', delayMs: 30 },
      { kind: 'reject', sequence: 6, reason: 'poison' },
    ]);
  });

  it('an invalid outcome nacks with a reason that says what came back', async () => {
    const producer = new FakeSettler();
    const sink = createLeaseSink({ producer: producer.settler, handler: () => ({ retry: 'x', delayMs: -1 }) as never });
    await pipeline(Readable.from(leases(1)), sink);
    expect(producer.settles).toEqual([
      { kind: 'nack', sequence: 1, reason: 'invalid handler outcome: retry delayMs must be an integer in 0..604800000, got -1', delayMs: 0 },
    ]);
  });

  it('end waits for the settles of finished handlers before it finishes', async () => {
    const producer = new FakeSettler();
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    producer.answer = () => answered;
    const sink = createLeaseSink({ producer: producer.settler, concurrency: 2, handler: () => {} });
    for (const lease of leases(3)) sink.write(lease);
    let finished = false;
    let listening = -1;
    sink.end(() => {
      finished = true;
      listening = producer.listenerCount('lease-lost');
    });
    await until(() => producer.settles.length === 3, 'three acks sent');
    await turns();
    expect(finished).toBe(false);
    expect(producer.listenerCount('lease-lost')).toBe(1);
    answer();
    await until(() => finished, 'the sink finishes');
    expect(listening).toBe(0);
  });

  it('end waits for every settle, not only the first one answered', async () => {
    const producer = new FakeSettler();
    const answers = new Map<number, () => void>();
    producer.answer = (s) => new Promise<void>((resolve) => answers.set(s.sequence, resolve));
    const sink = createLeaseSink({ producer: producer.settler, concurrency: 2, handler: () => {} });
    for (const lease of leases(2)) sink.write(lease);
    let finished = false;
    sink.end(() => (finished = true));
    await until(() => answers.size === 2, 'both acks sent');
    answers.get(1)!();
    await turns();
    expect(finished).toBe(false);
    answers.get(2)!();
    await until(() => finished, 'the sink finishes');
  });

  it('ends when the only lease left waiting is lost before it started', async () => {
    const producer = new FakeSettler();
    const started: number[] = [];
    const sink = createLeaseSink<{ n: number }>({ producer: producer.settler, handler: (lease) => void started.push(lease.event.sequence) });
    const lease = fakeLease(1);
    sink.write(lease);
    let finished = false;
    sink.end(() => (finished = true));
    producer.lose(lease, new RheoError('stale_lease', 'gone'));
    await until(() => finished, 'the sink finishes');
    expect(started).toEqual([]);
    expect(producer.settles).toEqual([]);
  });

  it('destroy aborts running handlers with its reason, releases the queue, and a handler failing afterwards releases its lease', async () => {
    const producer = new FakeSettler();
    const work = gated();
    const sink = createLeaseSink<{ n: number }>({ producer: producer.settler, concurrency: 2, handler: work.handler });
    sink.on('error', () => {});
    const errors: unknown[] = [];
    sink.on('handler-error', (info) => errors.push(info.error));
    for (const lease of leases(4)) sink.write(lease);
    await until(() => work.started.length === 2 && sink.queuedCount === 2, 'two run, two wait');
    sink.destroy();
    for (const n of [1, 2]) {
      expect(work.signals.get(n)!.aborted).toBe(true);
      expect((work.signals.get(n)!.reason as Error).message).toBe('lease sink destroyed');
    }
    expect(producer.listenerCount('lease-lost')).toBe(0);
    await until(() => producer.settles.length === 2, 'the queued leases are released');
    work.fail(1, new Error('aborted'));
    work.finish(2, 'ack');
    await until(() => producer.settles.length === 4, 'the running leases are settled');
    expect(producer.settles.map((s) => [s.kind, s.sequence])).toEqual([
      ['release', 3],
      ['release', 4],
      ['release', 1],
      ['ack', 2],
    ]);
    expect(errors).toEqual([]);
    expect(work.started).toEqual([1, 2]);
  });

  it('destroy with an error aborts the signals with that error', async () => {
    const producer = new FakeSettler();
    const work = gated();
    const sink = createLeaseSink<{ n: number }>({ producer: producer.settler, handler: work.handler });
    sink.on('error', () => {});
    sink.write(fakeLease(1));
    await until(() => work.started.length === 1, 'the handler runs');
    const reason = new Error('shutting down');
    sink.destroy(reason);
    expect(work.signals.get(1)!.reason).toBe(reason);
  });

  it('reports every lease to telemetry: run around the handler, handled with the settle and any failure, settled after it', async () => {
    const producer = new FakeSettler();
    const calls: string[] = [];
    const telemetry = {
      process: (lease: L) => {
        const n = lease.event.sequence;
        return {
          run: <R>(fn: () => R): R => {
            calls.push(`run ${n}`);
            return fn();
          },
          handled: (settle: string, failure?: unknown) =>
            calls.push(failure === undefined ? `handled ${n} ${settle}` : `handled ${n} ${settle} ${(failure as Error).message}`),
          settled: () => calls.push(`settled ${n}`),
        };
      },
    } as unknown as RheoTelemetry;
    attachTelemetry(producer, telemetry);
    const sink = createLeaseSink<{ n: number }>({
      producer: producer.settler,
      handler: (lease) => {
        if (lease.event.sequence === 2) throw new Error('boom');
        if (lease.event.sequence === 3) return Promise.reject(new Error('later boom'));
        return lease.event.sequence === 4 ? Promise.resolve({ reject: 'bad' }) : undefined;
      },
    });
    sink.on('handler-error', () => {});
    await pipeline(Readable.from(leases(4)), sink);
    expect(calls.filter((c) => !c.startsWith('settled'))).toEqual([
      'run 1',
      'handled 1 ack',
      'run 2',
      'handled 2 nack boom',
      'run 3',
      'handled 3 nack later boom',
      'run 4',
      'handled 4 reject',
    ]);
    expect(calls.filter((c) => c.startsWith('settled')).sort()).toEqual(['settled 1', 'settled 2', 'settled 3', 'settled 4']);
    for (const n of [1, 2, 3, 4]) expect(calls.indexOf(`settled ${n}`)).toBeGreaterThan(calls.indexOf(`run ${n}`) + 1);
  });
});
