import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import { rejectLease } from '../../src/runtime/lease-outcome.js';
import {
  createKeyOrderedTransform,
  defaultLeaseKey,
  type KeyOrderedTransformOptions,
} from '../../src/transforms/key-ordered-transform.js';
import type { Mapped } from '../../src/transforms/map-transform.js';
import { FakeSettler, fakeLease } from '../support/fake-settler.js';
import { deferred, settleQueued, type Deferred } from '../support/deferred.js';
import { until } from './support/wait.js';

type Tick = { n: number };

/** Lease `sequence` with event key `key` (null: keyed by its partition). */
function keyed(sequence: number, key: string | null, partition = 0): Lease<Tick> {
  const lease = fakeLease(sequence);
  return { ...lease, event: { ...lease.event, key, partition } };
}

interface HeldCall {
  lease: Lease<Tick>;
  signal: AbortSignal;
  result: Deferred<string>;
}

/** A map whose every call waits for the test to resolve or reject it. */
function heldMap(): { calls: HeldCall[]; map: KeyOrderedTransformOptions<Tick, string>['map']; started: () => number[] } {
  const calls: HeldCall[] = [];
  return {
    calls,
    map: (lease, { signal }) => {
      const result = deferred<string>();
      calls.push({ lease, signal, result });
      return result.promise;
    },
    started: () => calls.map((c) => c.lease.event.sequence),
  };
}

const call = (calls: HeldCall[], sequence: number): HeldCall => calls.find((c) => c.lease.event.sequence === sequence)!;

describe('key-ordered transform: options and keys', () => {
  it('keys a lease by its event key, else by its partition', () => {
    expect(defaultLeaseKey(keyed(1, 'user-7'))).toBe('key:user-7');
    expect(defaultLeaseKey(keyed(1, null, 3))).toBe('partition:3');
    // A key that reads like a partition key is still another key.
    expect(defaultLeaseKey(keyed(1, '3'))).not.toBe(defaultLeaseKey(keyed(2, null, 3)));
  });

  it('uses keyOf when given', async () => {
    const { calls, map, started } = heldMap();
    const stage = createKeyOrderedTransform<Tick, string>({ map, concurrency: 2, keyOf: (lease) => (lease.event.sequence % 2 === 0 ? 'even' : 'odd') });
    stage.resume();
    for (const n of [1, 3, 2]) stage.write(keyed(n, 'same'));
    await settleQueued();
    // By the event key all three would wait for lease 1; by keyOf, lease 2 runs beside it.
    expect(started()).toEqual([1, 2]);
    call(calls, 1).result.resolve('a');
    await until(() => calls.length === 3, 'lease 3 started');
  });
});

describe('key-ordered transform: scheduling', () => {
  it('runs the leases of one key one at a time, in arrival order, and keys side by side up to concurrency', async () => {
    const { calls, map, started } = heldMap();
    const stage = createKeyOrderedTransform<Tick, string>({ map, concurrency: 2 });
    const out: Array<Mapped<Tick, string>> = [];
    stage.on('data', (m: Mapped<Tick, string>) => out.push(m));
    // a1 a2 b3 a4 c5 b6
    for (const [n, key] of [
      [1, 'a'],
      [2, 'a'],
      [3, 'b'],
      [4, 'a'],
      [5, 'c'],
      [6, 'b'],
    ] as const) {
      stage.write(keyed(n, key));
    }
    await settleQueued();
    expect(started()).toEqual([1, 3]);
    expect(stage.activeCount).toBe(2);
    call(calls, 3).result.resolve('b3');
    // Key b is free: the next key in first-arrival order with a waiting lease (a is busy) is c.
    await until(() => calls.length === 3, 'a third map started');
    expect(started()).toEqual([1, 3, 5]);
    call(calls, 1).result.resolve('a1');
    await until(() => calls.length === 4, 'a fourth map started');
    expect(started()).toEqual([1, 3, 5, 2]);
    call(calls, 5).result.resolve('c5');
    await until(() => calls.length === 5, 'a fifth map started');
    expect(started()).toEqual([1, 3, 5, 2, 6]);
    call(calls, 2).result.resolve('a2');
    await until(() => calls.length === 6, 'the sixth map started');
    call(calls, 6).result.resolve('b6');
    call(calls, 4).result.resolve('a4');
    await until(() => out.length === 6, 'all six passed');
    expect(out.map((m) => m.value)).toEqual(['b3', 'a1', 'c5', 'a2', 'b6', 'a4']);
    expect(out.map((m) => m.lease.event.sequence)).toEqual([3, 1, 5, 2, 6, 4]);
    expect(stage.maxActiveCount).toBe(2);
    expect(stage.activeCount).toBe(0);
  });

  it('keeps every lease of a key that waits behind a busy one', async () => {
    const { calls, map, started } = heldMap();
    const stage = createKeyOrderedTransform<Tick, string>({ map, concurrency: 3 });
    stage.resume();
    for (const n of [1, 2, 3, 4]) stage.write(keyed(n, 'k'));
    await settleQueued();
    expect(started()).toEqual([1]);
    expect(stage.maxActiveCount).toBe(1);
    for (const n of [1, 2, 3]) {
      call(calls, n).result.resolve(`v${n}`);
      await until(() => calls.length === n + 1, `lease ${n + 1} started`);
    }
    expect(started()).toEqual([1, 2, 3, 4]);
    expect(stage.maxActiveCount).toBe(1);
  });

  it('ends only after every lease, including those still waiting for their key, has passed', async () => {
    const { calls, map } = heldMap();
    const stage = createKeyOrderedTransform<Tick, string>({ map });
    const out: string[] = [];
    const errors: unknown[] = [];
    stage.on('data', (m: Mapped<Tick, string>) => out.push(m.value));
    stage.on('error', (error) => errors.push(error));
    stage.write(keyed(1, 'k'));
    stage.write(keyed(2, 'k'));
    stage.end();
    await settleQueued();
    expect(stage.writableFinished).toBe(false);
    call(calls, 1).result.resolve('one');
    await until(() => calls.length === 2, 'lease 2 started');
    await settleQueued();
    expect(stage.writableFinished).toBe(false);
    call(calls, 2).result.resolve('two');
    await until(() => stage.readableEnded, 'the stage ended');
    expect(out).toEqual(['one', 'two']);
    expect(errors).toEqual([]);
  });

  it('ends at once when nothing is in flight', async () => {
    const stage = createKeyOrderedTransform<Tick, string>({ map: () => 'v' });
    stage.resume();
    stage.write(keyed(1, 'k'));
    await settleQueued();
    stage.end();
    await until(() => stage.readableEnded, 'the stage ended');
  });
});

describe('key-ordered transform: a map that throws', () => {
  it('with a producer settles the lease by the failure policy, reports it, and frees its key', async () => {
    const settler = new FakeSettler();
    const boom = new Error('bad payload');
    const run = async (options: Partial<KeyOrderedTransformOptions<Tick, string>>): Promise<string[]> => {
      const stage = createKeyOrderedTransform<Tick, string>({
        producer: settler,
        map: (lease) => {
          if (lease.event.sequence === 1) throw boom;
          if (lease.event.sequence === 2) throw rejectLease('unparseable');
          return `v${lease.event.sequence}`;
        },
        ...options,
      });
      const out: string[] = [];
      const handlerErrors: Array<{ lease: Lease<Tick>; error: unknown }> = [];
      stage.on('data', (m: Mapped<Tick, string>) => out.push(m.value));
      stage.on('handler-error', (info) => handlerErrors.push(info));
      for (const n of [1, 2, 3]) stage.write(keyed(n, 'k'));
      stage.end();
      await until(() => stage.readableEnded, 'the stage ended');
      expect(handlerErrors.map((h) => h.lease.event.sequence)).toEqual([1, 2]);
      expect(handlerErrors[0]!.error).toBe(boom);
      return out;
    };
    expect(await run({})).toEqual(['v3']);
    expect(settler.settles).toEqual([
      { kind: 'nack', sequence: 1, reason: 'bad payload', delayMs: 0 },
      { kind: 'reject', sequence: 2, reason: 'unparseable' },
    ]);
    settler.settles.length = 0;
    expect(await run({ onFailure: 'reject' })).toEqual(['v3']);
    expect(settler.settles).toEqual([
      { kind: 'reject', sequence: 1, reason: 'bad payload' },
      { kind: 'reject', sequence: 2, reason: 'unparseable' },
    ]);
  });
});

describe('key-ordered transform: destroy', () => {
  it('closes at once when no lease waits for its key', async () => {
    const settler = new FakeSettler();
    const { map } = heldMap();
    const busy = createKeyOrderedTransform<Tick, string>({ map, producer: settler });
    busy.write(keyed(1, 'k'));
    await settleQueued();
    busy.destroy();
    expect(busy.closed).toBe(true);
    const noProducer = createKeyOrderedTransform<Tick, string>({ map });
    noProducer.write(keyed(1, 'k'));
    noProducer.write(keyed(2, 'k'));
    await settleQueued();
    noProducer.destroy();
    expect(noProducer.closed).toBe(true);
    expect(settler.settles).toEqual([]);
  });

  it('releases the leases waiting for their key, closes once they are released, and starts nothing after', async () => {
    const settler = new FakeSettler();
    const release = deferred();
    settler.answer = () => release.promise;
    const { calls, map, started } = heldMap();
    const stage = createKeyOrderedTransform<Tick, string>({ map, concurrency: 2, producer: settler });
    const out: string[] = [];
    stage.on('data', (m: Mapped<Tick, string>) => out.push(m.value));
    for (const [n, key] of [
      [1, 'a'],
      [2, 'a'],
      [3, 'b'],
      [4, 'b'],
      [5, 'a'],
    ] as const) {
      stage.write(keyed(n, key));
    }
    await settleQueued();
    expect(started()).toEqual([1, 3]);
    stage.destroy();
    expect(settler.settles).toEqual([
      { kind: 'release', sequence: 2 },
      { kind: 'release', sequence: 5 },
      { kind: 'release', sequence: 4 },
    ]);
    await settleQueued();
    expect(stage.closed).toBe(false);
    release.resolve();
    await until(() => stage.closed, 'the stage closed');
    call(calls, 1).result.resolve('late');
    await settleQueued();
    expect(started()).toEqual([1, 3]);
    expect(out).toEqual([]);
  });
});
