import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { Lease } from '../../src/core/types.js';
import { rejectLease } from '../../src/runtime/lease-outcome.js';
import {
  createWindowTransform,
  type WindowContext,
  type WindowTransformOptions,
} from '../../src/transforms/window-transform.js';
import { FakeSettler, fakeLease, type FakeProducer } from '../support/fake-settler.js';
import { thrown } from '../support/thrown.js';
import { deferred, settleQueued, type Deferred } from '../support/deferred.js';
import { ManualTimers } from './support/manual-timers.js';
import { until } from './support/wait.js';

type Tick = { n: number };

function keyed(sequence: number, key: string): Lease<Tick> {
  const lease = fakeLease(sequence);
  return { ...lease, event: { ...lease.event, key } };
}

/** A fake producer that holds at most `maxDemand` leases. */
function withDemand(maxDemand: number): FakeProducer {
  return Object.assign(new FakeSettler(), { maxDemand }).settler;
}

interface TriggerCall {
  accumulator: unknown;
  leases: number[];
  context: WindowContext;
  result: Deferred<unknown>;
}

/** A trigger whose every call waits for the test. */
function heldTrigger(): { calls: TriggerCall[]; trigger: WindowTransformOptions<Tick, unknown, unknown>['trigger'] } {
  const calls: TriggerCall[] = [];
  return {
    calls,
    trigger: (accumulator, leases, context) => {
      const result = deferred<unknown>();
      calls.push({ accumulator, leases: leases.map((l) => l.event.sequence), context, result });
      return result.promise;
    },
  };
}

/** FNV-1a of the key's UTF-16 code units, modulo the stages: the documented stage of a key. */
function stageOf(key: string, stages: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % stages;
}

describe('window transform: options', () => {
  const trigger = (): number => 1;

  it('refuses options without a producer or a trigger function', () => {
    const producer = new FakeSettler().settler;
    // A function is not an options object, even one that carries the options' fields.
    const fn = Object.assign(() => 1, { producer, trigger, every: 1 });
    for (const options of [null, 3, { producer }, { trigger }, { producer, trigger: 'x' }, { producer: null, trigger, every: 1 }, fn]) {
      const error = thrown(() => createWindowTransform(options as never));
      expect(error.code).toBe('invalid_argument');
      expect(error.message).toMatch(/createWindowTransform expects/);
    }
  });

  it('refuses a count window larger than the producer can ever hold, unless time closes it too', () => {
    const error = thrown(() => createWindowTransform({ producer: withDemand(2), every: 3, trigger }));
    expect(error.code).toBe('invalid_argument');
    expect(error.message).toMatch(/window every 3 can never fill: the producer holds at most maxDemand 2 leases/);
    expect(() => createWindowTransform({ producer: withDemand(2), every: 2, trigger })).not.toThrow();
    expect(() => createWindowTransform({ producer: withDemand(2), every: 3, everyMs: 100, trigger })).not.toThrow();
    expect(() => createWindowTransform({ producer: withDemand(2), everyMs: 100, trigger })).not.toThrow();
    expect(() => createWindowTransform({ producer: new FakeSettler().settler, every: 1000, trigger })).not.toThrow();
  });

  it('refuses a bad every, everyMs, key or stages at construction', () => {
    const producer = new FakeSettler().settler;
    const bad: Array<Partial<WindowTransformOptions<Tick, unknown, unknown>>> = [
      {},
      { every: 0 },
      { every: 1.5 },
      { everyMs: 0 },
      { every: 2, everyMs: -1 },
      { everyMs: 100, key: 'k' as never },
      { every: 2, key: () => 'k' },
      { everyMs: 100, key: () => 'k', stages: 0 },
      { everyMs: 100, key: () => 'k', stages: 1001 },
      { every: 2, stages: 2 },
      { every: 2, onFailure: 'drop' as never },
    ];
    for (const options of bad) expect(thrown(() => createWindowTransform({ producer, trigger, ...options })).code).toBe('invalid_argument');
    expect(thrown(() => createWindowTransform({ producer, trigger, everyMs: 100, key: 'k' as never })).message).toMatch(/key must be a function/);
    expect(thrown(() => createWindowTransform({ producer, trigger, every: 2, key: () => 'k' })).message).toMatch(/need everyMs/);
    expect(thrown(() => createWindowTransform({ producer, trigger, every: 2, stages: 2 })).message).toMatch(/stages needs key/);
    expect(thrown(() => createWindowTransform({ producer, trigger, everyMs: 100, key: () => 'k', stages: 0 })).message).toMatch(/^stages must be an integer/);
    expect(thrown(() => createWindowTransform({ producer, trigger, every: 2, onFailure: 'drop' as never })).message).toMatch(/^createWindowTransform: onFailure must be/);
    expect(thrown(() => createWindowTransform({ producer, trigger, every: 2, evry: 3 } as never)).message).toMatch(/^createWindowTransform options: unknown option "evry"/);
    expect(() => createWindowTransform({ producer, trigger, every: 2, stages: 1 })).not.toThrow();
    expect(() => createWindowTransform({ producer, trigger, everyMs: 100, key: () => 'k', stages: 1000 })).not.toThrow();
  });
});

describe('window transform: windows and their triggers', () => {
  it('folds into a fresh accumulator per window and tells the trigger why the window closed', async () => {
    const settler = new FakeSettler();
    const calls: Array<{ sum: number; leases: number[]; context: WindowContext }> = [];
    const windows = createWindowTransform<Tick, number, number>({
      producer: settler.settler,
      every: 2,
      everyMs: 1000,
      initial: () => 0,
      reduce: (sum, lease) => sum + lease.event.payload.n,
      trigger: (sum, leases, context) => {
        calls.push({ sum, leases: leases.map((l) => l.event.sequence), context });
        return sum;
      },
    });
    const out: unknown[] = [];
    windows.on('data', (value) => out.push(value));
    for (const n of [1, 2, 3]) windows.write(fakeLease(n));
    expect(windows.openWindows).toBe(1);
    settler.timers.advance(1000);
    windows.write(fakeLease(4));
    windows.end();
    await until(() => windows.readableEnded, 'the stage ended');
    expect(calls.map((c) => [c.sum, c.leases, c.context.reason])).toEqual([
      [3, [1, 2], 'size'],
      [3, [3], 'time'],
      [4, [4], 'end'],
    ]);
    // Without `key`, the context has no key at all.
    expect(calls.every((c) => !('key' in c.context))).toBe(true);
    expect(out).toEqual([3, 3, 4]);
    expect(windows.openWindows).toBe(0);
    expect(settler.settles.map((s) => [s.kind, s.sequence])).toEqual([
      ['ack', 1],
      ['ack', 2],
      ['ack', 3],
      ['ack', 4],
    ]);
  });

  it('by default accumulates the window’s leases, and pushes nothing for an undefined result (but still acks)', async () => {
    const settler = new FakeSettler();
    const seen: unknown[] = [];
    const windows = createWindowTransform<Tick>({
      producer: settler.settler,
      every: 2,
      trigger: (accumulator) => {
        seen.push(accumulator.map((l) => l.event.sequence));
        return undefined;
      },
    });
    const out: unknown[] = [];
    windows.on('data', (value) => out.push(value));
    for (const n of [1, 2, 3, 4]) windows.write(fakeLease(n));
    windows.end();
    await until(() => windows.readableEnded, 'the stage ended');
    expect(seen).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(out).toEqual([]);
    expect(settler.settles.map((s) => s.kind)).toEqual(['ack', 'ack', 'ack', 'ack']);
  });

  it('runs triggers one at a time, in window order, and acks a window only after its output was pushed', async () => {
    const settler = new FakeSettler();
    const { calls, trigger } = heldTrigger();
    const windows = createWindowTransform<Tick, unknown, unknown>({ producer: settler.settler, every: 1, trigger });
    const log: string[] = [];
    windows.on('data', (value) => log.push(`pushed ${String(value)} acks=${settler.settles.length}`));
    windows.write(fakeLease(1));
    windows.write(fakeLease(2));
    await settleQueued();
    expect(calls).toHaveLength(1);
    calls[0]!.result.resolve('w1');
    await until(() => calls.length === 2, 'the second trigger ran');
    calls[1]!.result.resolve('w2');
    await until(() => settler.settles.length === 2, 'both acked');
    expect(log).toEqual(['pushed w1 acks=0', 'pushed w2 acks=1']);
  });

  it('uses its own timers when given, not the producer’s', () => {
    const settler = new FakeSettler();
    const timers = new ManualTimers(new ManualClock(0));
    const windows = createWindowTransform<Tick>({ producer: settler.settler, everyMs: 100, timers, trigger: () => undefined });
    windows.write(fakeLease(1));
    expect(settler.timers.pendingDelays()).toEqual([]);
    expect(timers.pendingDelays()).toEqual([100]);
    timers.advance(100);
    expect(windows.openWindows).toBe(0);
  });

  it('ends only after the triggers of the last windows have run', async () => {
    const settler = new FakeSettler();
    const { calls, trigger } = heldTrigger();
    const windows = createWindowTransform<Tick, unknown, unknown>({ producer: settler.settler, every: 5, trigger });
    windows.resume();
    windows.write(fakeLease(1));
    windows.end();
    await until(() => calls.length === 1, 'the end trigger ran');
    await settleQueued();
    expect(windows.writableFinished).toBe(false);
    calls[0]!.result.resolve(undefined);
    await until(() => windows.readableEnded, 'the stage ended');
  });
});

describe('window transform: failures', () => {
  it('a throwing reduce settles that lease by the failure policy, reports it, and keeps it out of the window', async () => {
    const settler = new FakeSettler();
    const boom = new Error('bad payload');
    const { calls, trigger } = heldTrigger();
    const windows = createWindowTransform<Tick, unknown, unknown>({
      producer: settler.settler,
      every: 2,
      trigger,
      reduce: (acc, lease) => {
        if (lease.event.sequence === 2) throw boom;
        if (lease.event.sequence === 3) throw rejectLease('unparseable');
        return [...(acc as Lease<Tick>[]), lease];
      },
    });
    const handlerErrors: Array<{ lease: Lease<Tick>; error: unknown }> = [];
    windows.on('handler-error', (info) => handlerErrors.push(info));
    for (const n of [1, 2, 3, 4]) windows.write(fakeLease(n));
    await until(() => calls.length === 1, 'the window of 1 and 4 closed');
    expect(calls[0]!.leases).toEqual([1, 4]);
    expect(handlerErrors.map((h) => [h.lease.event.sequence, h.error])).toEqual([
      [2, boom],
      [3, expect.objectContaining({ reason: 'unparseable' })],
    ]);
    expect(settler.settles).toEqual([
      { kind: 'nack', sequence: 2, reason: 'bad payload', delayMs: 0 },
      { kind: 'reject', sequence: 3, reason: 'unparseable' },
    ]);
  });

  it('a key that is not a string is a failed lease, not a crash', async () => {
    const settler = new FakeSettler();
    const windows = createWindowTransform<Tick>({
      producer: settler.settler,
      everyMs: 100,
      key: () => 7 as never,
      onFailure: 'reject',
      trigger: () => undefined,
    });
    const handlerErrors: unknown[] = [];
    windows.on('handler-error', (info: { error: unknown }) => handlerErrors.push(info.error));
    windows.write(fakeLease(1));
    await until(() => settler.settles.length === 1, 'the lease was settled');
    expect(settler.settles).toEqual([{ kind: 'reject', sequence: 1, reason: 'createWindowTransform: key must return a string, got number' }]);
    expect(handlerErrors).toEqual([expect.objectContaining({ code: 'invalid_argument' })]);
    expect(windows.openWindows).toBe(0);
  });

  it('a throwing trigger settles the window’s leases by the failure policy and reports trigger-error', async () => {
    const settler = new FakeSettler();
    const boom = new Error('aggregate store down');
    const windows = createWindowTransform<Tick>({
      producer: settler.settler,
      every: 2,
      onFailure: 'reject',
      trigger: (leases) => {
        if (leases[0]!.event.sequence === 3) throw rejectLease('poison window');
        throw boom;
      },
    });
    const errors: Array<{ leases: number[]; error: unknown }> = [];
    windows.on('trigger-error', (info) => errors.push({ leases: info.leases.map((l) => l.event.sequence), error: info.error }));
    for (const n of [1, 2, 3, 4]) windows.write(fakeLease(n));
    windows.end();
    windows.resume();
    await until(() => windows.readableEnded, 'the stage ended');
    expect(errors).toEqual([
      { leases: [1, 2], error: boom },
      { leases: [3, 4], error: expect.objectContaining({ reason: 'poison window' }) },
    ]);
    expect(settler.settles).toEqual([
      { kind: 'reject', sequence: 1, reason: 'aggregate store down' },
      { kind: 'reject', sequence: 2, reason: 'aggregate store down' },
      { kind: 'reject', sequence: 3, reason: 'poison window' },
      { kind: 'reject', sequence: 4, reason: 'poison window' },
    ]);
  });
});

describe('window transform: destroy', () => {
  it('releases the leases of open windows, and closes once they are released', async () => {
    const settler = new FakeSettler();
    const release = deferred();
    settler.answer = () => release.promise;
    const windows = createWindowTransform<Tick>({ producer: settler.settler, everyMs: 1000, key: (l) => l.event.key ?? '', trigger: () => undefined });
    windows.write(keyed(1, 'a'));
    windows.write(keyed(2, 'b'));
    windows.write(keyed(3, 'a'));
    expect(windows.openWindows).toBe(2);
    windows.destroy();
    expect(windows.openWindows).toBe(0);
    expect(settler.settles.map((s) => [s.kind, s.sequence])).toEqual([
      ['release', 1],
      ['release', 3],
      ['release', 2],
    ]);
    expect(settler.timers.pendingDelays()).toEqual([]);
    await settleQueued();
    expect(windows.closed).toBe(false);
    release.resolve();
    await until(() => windows.closed, 'the stage closed');
  });

  it('a trigger running when the stage is destroyed: its signal aborts and its leases are released, not acked, whatever it returns', async () => {
    const settler = new FakeSettler();
    const { calls, trigger } = heldTrigger();
    const windows = createWindowTransform<Tick, unknown, unknown>({ producer: settler.settler, every: 1, trigger });
    const errors: unknown[] = [];
    windows.on('trigger-error', (info) => errors.push(info));
    windows.write(fakeLease(1));
    windows.write(fakeLease(2));
    await settleQueued();
    windows.destroy();
    const signal = calls[0]!.context.signal;
    expect(signal.aborted).toBe(true);
    expect((signal.reason as Error).message).toBe('window transform destroyed');
    // The first trigger ignores the abort and returns a value; the second fails because of it.
    calls[0]!.result.resolve('late');
    await until(() => calls.length === 2, 'the second trigger ran');
    calls[1]!.result.reject(signal.reason);
    await until(() => settler.settles.length === 2, 'both released');
    expect(settler.settles.map((s) => [s.kind, s.sequence])).toEqual([
      ['release', 1],
      ['release', 2],
    ]);
    expect(errors).toEqual([]);
  });

  it('aborts the triggers’ signal with the error it was destroyed with', async () => {
    const settler = new FakeSettler();
    const { calls, trigger } = heldTrigger();
    const windows = createWindowTransform<Tick, unknown, unknown>({ producer: settler.settler, every: 1, trigger });
    windows.on('error', () => undefined);
    windows.write(fakeLease(1));
    await settleQueued();
    const boom = new Error('downstream gone');
    windows.destroy(boom);
    expect(calls[0]!.context.signal.reason).toBe(boom);
  });
});

describe('window transform: windows per key and stages', () => {
  it('keeps one window and accumulator per key, and passes the key to the trigger', async () => {
    const settler = new FakeSettler();
    const { calls, trigger } = heldTrigger();
    const windows = createWindowTransform<Tick, unknown, unknown>({
      producer: settler.settler,
      every: 2,
      everyMs: 1000,
      key: (lease) => lease.event.key!,
      initial: () => 0,
      reduce: (count) => (count as number) + 1,
      trigger,
    });
    windows.resume();
    for (const [n, key] of [
      [1, 'a'],
      [2, 'b'],
      [3, 'a'],
      [4, 'a'],
    ] as const) {
      windows.write(keyed(n, key));
    }
    await until(() => calls.length === 1, 'key a closed at 2 leases');
    expect(calls[0]!.leases).toEqual([1, 3]);
    expect(calls[0]!.context).toStrictEqual({ signal: calls[0]!.context.signal, reason: 'size', key: 'a' });
    expect(windows.openWindows).toBe(2);
    calls[0]!.result.resolve(undefined);
    // Only key a's leases are acked: b's window is still open.
    await until(() => settler.settles.length === 2, 'a acked');
    expect(settler.settles.map((s) => s.sequence)).toEqual([1, 3]);
    windows.end();
    await until(() => calls.length === 2, 'the next window closed at the end');
    calls[1]!.result.resolve(undefined);
    await until(() => calls.length === 3, 'the last window closed at the end');
    calls[2]!.result.resolve(undefined);
    await until(() => windows.readableEnded, 'the stage ended');
    expect(calls.slice(1).map((c) => [c.context.key, c.accumulator, c.leases, c.context.reason])).toEqual([
      ['b', 1, [2], 'end'],
      ['a', 1, [4], 'end'],
    ]);
  });

  it('runs the triggers of keys on different stages side by side, of one stage one at a time', async () => {
    const keys = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta'];
    const stages = 3;
    const byStage = new Map<number, string[]>();
    for (const key of keys) byStage.set(stageOf(key, stages), [...(byStage.get(stageOf(key, stages)) ?? []), key]);
    // The keys cover every stage, and at least one stage holds several keys.
    expect(byStage.size).toBe(stages);
    expect([...byStage.values()].some((group) => group.length > 1)).toBe(true);

    const settler = new FakeSettler();
    const { calls, trigger } = heldTrigger();
    const windows = createWindowTransform<Tick, unknown, unknown>({
      producer: settler.settler,
      every: 1,
      everyMs: 1000,
      key: (lease) => lease.event.key!,
      stages,
      trigger,
    });
    windows.resume();
    keys.forEach((key, i) => windows.write(keyed(i + 1, key)));
    await settleQueued();
    const running = (): string[] => calls.filter((c) => !done.has(c)).map((c) => c.context.key!);
    const done = new Set<TriggerCall>();
    // The first key of each stage runs; the others wait for the key before them on their stage.
    expect(running().sort()).toEqual([...byStage.values()].map((group) => group[0]!).sort());
    for (let round = 1; done.size < keys.length; round++) {
      for (const c of calls.filter((c) => !done.has(c))) {
        c.result.resolve(undefined);
        done.add(c);
      }
      await settleQueued();
      const expected = [...byStage.values()].filter((group) => group.length > round).map((group) => group[round]!);
      expect(running().sort()).toEqual(expected.sort());
    }
    expect(calls.map((c) => c.context.key).sort()).toEqual([...keys].sort());
  });
});
