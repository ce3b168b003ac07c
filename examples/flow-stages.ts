/**
 * Part 2 of the pipelines notebook: map, reduce and window stages, and when
 * it is safe to settle. Map passes the lease along and the writer acks it;
 * reduce and window ack their leases only after the trigger has emitted.
 */
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  createMapTransform,
  createWindowTransform,
  type Lease,
  type Mapped,
  type Rheo,
} from '../src/index.js';
import { uniqueName, type Example, type Log } from './example-kit.js';

type Tick = { n: number };

export interface FlowStagesResult {
  /** [n, receipt] per lease, in order. */
  mapped: Array<[number, string]>;
  /** Size of the first reduce window (trigger every 3): 3, not the whole group. */
  reduceBatchSize: number;
  /** Window sizes with a trigger every 2 over 4 events. */
  windowBatches: number[];
}

async function seed(rheo: Rheo, name: string, count: number): Promise<string> {
  const stream = uniqueName(name);
  await rheo.createStream(stream, { partitions: 2 });
  await rheo.createGroup(stream, name);
  await rheo.appendBatch(
    stream,
    Array.from({ length: count }, (_, i) => ({ type: name, payload: { n: i + 1 }, key: 'same' })),
  );
  return stream;
}

function collect<C>(into: C[], write: (chunk: C) => Promise<void> | void = () => {}): Writable {
  return new Writable({
    objectMode: true,
    write(chunk: C, _encoding, callback) {
      into.push(chunk);
      Promise.resolve(write(chunk)).then(() => callback(), callback);
    },
  });
}

export async function run(rheo: Rheo, log: Log): Promise<FlowStagesResult> {
  // Map 1:1: the value travels with its lease, and the writer settles per lease.
  const mapStream = await seed(rheo, 'flow-map', 4);
  const mapProducer = rheo.producer<Tick>({ stream: mapStream, group: 'flow-map', maxDemand: 4 });
  const mapped: Array<Mapped<Tick, number>> = [];
  await pipeline(
    mapProducer,
    createMapTransform<Tick, number>({ concurrency: 2, map: (lease) => lease.event.payload.n }),
    collect(mapped, async (m) => {
      await mapProducer.ack(m.lease);
      if (mapped.length === 4) void mapProducer.drain();
    }),
  );
  log(`map: ${JSON.stringify(mapped.map((m) => m.value))}`);

  // Reduce: keep leases in the accumulator, ack them in the trigger's wake, every 3.
  const reduceStream = await seed(rheo, 'flow-reduce', 6);
  const reduceProducer = rheo.producer<Tick>({ stream: reduceStream, group: 'flow-reduce', maxDemand: 6 });
  const reduced: number[] = [];
  let reducedLeases = 0;
  await pipeline(
    reduceProducer,
    createWindowTransform<Tick, Lease<Tick>[], number>({
      producer: reduceProducer,
      every: 3,
      trigger: (leases) => {
        reducedLeases += leases.length;
        if (reducedLeases === 6) void reduceProducer.drain();
        return leases.length;
      },
    }),
    collect(reduced),
  );
  log(`reduce (trigger every 3): first window ${reduced[0]}, all windows ${JSON.stringify(reduced)}`);

  // Window: two flushes of two.
  const windowStream = await seed(rheo, 'flow-window', 4);
  const windowProducer = rheo.producer<Tick>({ stream: windowStream, group: 'flow-window', maxDemand: 4 });
  const windows: number[] = [];
  await pipeline(
    windowProducer,
    createWindowTransform<Tick, number, number>({
      producer: windowProducer,
      every: 2,
      initial: () => 0,
      reduce: (count) => count + 1,
      trigger: (count) => {
        if (windows.length === 1) void windowProducer.drain();
        return count;
      },
    }),
    collect(windows),
  );
  log(`window (trigger every 2 over 4 events): ${JSON.stringify(windows)}`);

  for (const [stream, group] of [
    [mapStream, 'flow-map'],
    [reduceStream, 'flow-reduce'],
    [windowStream, 'flow-window'],
  ] as const) {
    log(`${group}: lag ${(await rheo.lag(stream, group)).lag}`);
  }
  return {
    mapped: mapped.map((m) => [m.value, m.lease.receipt]),
    reduceBatchSize: reduced[0] ?? 0,
    windowBatches: windows,
  };
}

export const example: Example<FlowStagesResult> = {
  name: 'flow-stages',
  description: 'map / reduce / window stages that settle only when it is safe',
  run,
};
