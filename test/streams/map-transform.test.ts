import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import { rejectLease } from '../../src/runtime/lease-outcome.js';
import { createMapTransform, type Mapped, type MapTransformOptions } from '../../src/transforms/map-transform.js';
import { FakeSettler, fakeLease } from '../support/fake-settler.js';
import { deferred, settleQueued, type Deferred } from '../support/deferred.js';
import { until } from './support/wait.js';

type Tick = { n: number };

/** A map whose every call waits for the test: `calls` in call order, each resolved or rejected by hand. */
function heldMap(): { calls: Array<{ lease: Lease<Tick>; signal: AbortSignal; result: Deferred<number> }>; map: MapTransformOptions<Tick, number>['map'] } {
  const calls: Array<{ lease: Lease<Tick>; signal: AbortSignal; result: Deferred<number> }> = [];
  return {
    calls,
    map: (lease, { signal }) => {
      const result = deferred<number>();
      calls.push({ lease, signal, result });
      return result.promise;
    },
  };
}

const sequences = (out: Array<Mapped<Tick, number>>): number[] => out.map((m) => m.lease.event.sequence);

describe('map transform: concurrency and order', () => {
  it('runs one map at a time by default', async () => {
    const { calls, map } = heldMap();
    const stage = createMapTransform<Tick, number>({ map });
    const out: Array<Mapped<Tick, number>> = [];
    stage.on('data', (m: Mapped<Tick, number>) => out.push(m));
    for (const n of [1, 2, 3]) stage.write(fakeLease(n));
    await settleQueued();
    expect(calls).toHaveLength(1);
    calls[0]!.result.resolve(10);
    await until(() => calls.length === 2, 'the second map started');
    expect(out.map((m) => m.value)).toEqual([10]);
  });

  it('never runs more than `concurrency` maps, even while a later one finished first', async () => {
    const { calls, map } = heldMap();
    const stage = createMapTransform<Tick, number>({ map, concurrency: 2 });
    const out: Array<Mapped<Tick, number>> = [];
    stage.on('data', (m: Mapped<Tick, number>) => out.push(m));
    for (const n of [1, 2, 3, 4]) stage.write(fakeLease(n));
    await settleQueued();
    expect(calls.map((c) => c.lease.event.sequence)).toEqual([1, 2]);
    // Lease 2 is done but waits behind lease 1 for its turn in the output: still two slots taken.
    calls[1]!.result.resolve(20);
    await settleQueued();
    expect(calls).toHaveLength(2);
    expect(out).toEqual([]);
    calls[0]!.result.resolve(10);
    await until(() => calls.length === 4, 'leases 3 and 4 started');
    expect(out.map((m) => [m.lease.event.sequence, m.value])).toEqual([
      [1, 10],
      [2, 20],
    ]);
    calls[3]!.result.resolve(40);
    calls[2]!.result.resolve(30);
    await until(() => out.length === 4, 'all four passed');
    expect(sequences(out)).toEqual([1, 2, 3, 4]);
  });
});

describe('map transform: the end of the stream', () => {
  it('ends at once when nothing is in flight', async () => {
    const stage = createMapTransform<Tick, number>({ map: () => 1 });
    stage.resume();
    stage.end();
    await until(() => stage.writableFinished && stage.readableEnded, 'the stage ended');
  });

  it('ends only after every map in flight has passed its value on, in order', async () => {
    const { calls, map } = heldMap();
    // Concurrency 3: both writes are taken at once, so the stream's end reaches the stage while both maps run.
    const stage = createMapTransform<Tick, number>({ map, concurrency: 3 });
    const out: Array<Mapped<Tick, number>> = [];
    const errors: unknown[] = [];
    stage.on('data', (m: Mapped<Tick, number>) => out.push(m));
    stage.on('error', (error) => errors.push(error));
    stage.write(fakeLease(1));
    stage.write(fakeLease(2));
    stage.end();
    await settleQueued();
    calls[1]!.result.resolve(20);
    await settleQueued();
    expect(stage.writableFinished).toBe(false);
    expect(out).toEqual([]);
    calls[0]!.result.resolve(10);
    await until(() => stage.readableEnded, 'the stage ended');
    expect(out.map((m) => m.value)).toEqual([10, 20]);
    expect(errors).toEqual([]);
  });

  it('ends only after the settles of failed maps are done', async () => {
    const settler = new FakeSettler();
    const nack = deferred();
    settler.answer = () => nack.promise;
    const stage = createMapTransform<Tick, number>({
      producer: settler,
      map: () => {
        throw new Error('bad payload');
      },
    });
    stage.resume();
    stage.write(fakeLease(1));
    stage.end();
    await until(() => settler.settles.length === 1, 'the nack was sent');
    await settleQueued();
    expect(stage.writableFinished).toBe(false);
    nack.resolve();
    await until(() => stage.writableFinished, 'the stage finished');
  });
});

describe('map transform: a map that throws', () => {
  it('with a producer settles the lease by the failure policy, reports it and passes the others on', async () => {
    const settler = new FakeSettler();
    const boom = new Error('bad payload');
    const run = async (options: Partial<MapTransformOptions<Tick, number>>): Promise<number[]> => {
      const stage = createMapTransform<Tick, number>({
        producer: settler,
        concurrency: 3,
        map: (lease) => {
          // A synchronous throw counts as a failed map too.
          if (lease.event.sequence === 2) throw boom;
          if (lease.event.sequence === 3) throw rejectLease('unparseable');
          return lease.event.sequence * 10;
        },
        ...options,
      });
      const out: Array<Mapped<Tick, number>> = [];
      const handlerErrors: Array<{ lease: Lease<Tick>; error: unknown }> = [];
      stage.on('data', (m: Mapped<Tick, number>) => out.push(m));
      stage.on('handler-error', (info) => handlerErrors.push(info));
      for (const n of [1, 2, 3, 4]) stage.write(fakeLease(n));
      stage.end();
      await until(() => stage.readableEnded, 'the stage ended');
      expect(handlerErrors.map((h) => h.lease.event.sequence)).toEqual([2, 3]);
      expect(handlerErrors[0]!.error).toBe(boom);
      return out.map((m) => m.value);
    };
    expect(await run({})).toEqual([10, 40]);
    expect(settler.settles).toEqual([
      { kind: 'nack', sequence: 2, reason: 'bad payload', delayMs: 0 },
      { kind: 'reject', sequence: 3, reason: 'unparseable' },
    ]);
    settler.settles.length = 0;
    expect(await run({ onFailure: 'reject' })).toEqual([10, 40]);
    expect(settler.settles).toEqual([
      { kind: 'reject', sequence: 2, reason: 'bad payload' },
      { kind: 'reject', sequence: 3, reason: 'unparseable' },
    ]);
  });
});

describe('map transform: destroy', () => {
  it('closes at once when it holds nothing to give back', async () => {
    const settler = new FakeSettler();
    const idle = createMapTransform<Tick, number>({ map: () => 1, producer: settler });
    idle.destroy();
    expect(idle.closed).toBe(true);
    const { map } = heldMap();
    const noProducer = createMapTransform<Tick, number>({ map });
    noProducer.write(fakeLease(1));
    await settleQueued();
    noProducer.destroy();
    expect(noProducer.closed).toBe(true);
    expect(settler.settles).toEqual([]);
  });

  it('releases the leases not yet passed on, and closes once they are released', async () => {
    const settler = new FakeSettler();
    const release = deferred();
    settler.answer = () => release.promise;
    const { calls, map } = heldMap();
    const stage = createMapTransform<Tick, number>({ map, concurrency: 3, producer: settler });
    const out: Array<Mapped<Tick, number>> = [];
    stage.on('data', (m: Mapped<Tick, number>) => out.push(m));
    for (const n of [1, 2, 3]) stage.write(fakeLease(n));
    await settleQueued();
    calls[0]!.result.resolve(10);
    calls[2]!.result.resolve(30);
    await until(() => out.length === 1, 'lease 1 passed on');
    stage.destroy();
    // Lease 2 is still mapping, lease 3 is done but waits behind it: both are given back.
    expect(settler.settles).toEqual([
      { kind: 'release', sequence: 2 },
      { kind: 'release', sequence: 3 },
    ]);
    await settleQueued();
    expect(stage.closed).toBe(false);
    release.resolve();
    await until(() => stage.closed, 'the stage closed');
    calls[1]!.result.resolve(20);
    await settleQueued();
    expect(sequences(out)).toEqual([1]);
  });
});
