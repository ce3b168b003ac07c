/**
 * Part 3 of the pipelines notebook: a Broadway-like topology. One producer
 * (maxDemand 20) feeds four concurrent processors, a batcher groups their
 * results by 5 or by 50 ms, and a batch writer stores each batch and then
 * acks its leases (one coalesced settle call per batch). The run ends when
 * the frontier of every partition has reached its high watermark.
 */
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  createBatchTransform,
  createMapTransform,
  type Mapped,
  type Rheo,
} from '../src/index.js';
import { uniqueName, type Example, type Log } from './example-kit.js';

type Tick = { n: number };

/** What the processors compute and the writer stores. */
export interface WarehouseRow {
  partition: number;
  sequence: number;
  attempt: number;
}

export interface BroadwayResult {
  processed: number;
  sample: WarehouseRow[];
  batchSizes: number[];
  frontiers: Record<number, number>;
  lag: number;
}

export async function run(rheo: Rheo, log: Log): Promise<BroadwayResult> {
  const stream = uniqueName('pipeline-events');
  await rheo.createStream(stream, { partitions: 2 });
  await rheo.createGroup(stream, 'broadway');
  const total = 12;
  await rheo.appendBatch(
    stream,
    Array.from({ length: total }, (_, i) => ({ type: 'tick', payload: { n: i + 1 }, key: `k-${(i + 1) % 3}` })),
  );
  log(`appended ${total} ticks to ${stream} (2 partitions)`);

  const producer = rheo.producer<Tick>({ stream, group: 'broadway', maxDemand: 20 });
  const warehouse: WarehouseRow[] = [];
  const batchSizes: number[] = [];

  const processors = createMapTransform<Tick, WarehouseRow>({
    concurrency: 4,
    map: async (lease) => {
      await new Promise<void>((resolve) => setImmediate(resolve)); // some work
      return { partition: lease.event.partition, sequence: lease.event.sequence, attempt: lease.attempt };
    },
  });
  const batcher = createBatchTransform<Mapped<Tick, WarehouseRow>>({ size: 5, timeMs: 50 });
  const writer = new Writable({
    objectMode: true,
    write(batch: Array<Mapped<Tick, WarehouseRow>>, _encoding, callback) {
      warehouse.push(...batch.map((m) => m.value)); // the durable write comes first...
      batchSizes.push(batch.length);
      // ...then the leases are settled (the producer coalesces these into one call).
      Promise.all(batch.map((m) => producer.ack(m.lease))).then(() => {
        if (warehouse.length === total) void producer.drain();
        callback();
      }, callback);
    },
  });
  await pipeline(producer, processors, batcher, writer);

  const lag = await rheo.lag(stream, 'broadway');
  const frontiers = Object.fromEntries(Object.entries(lag.partitions).map(([p, info]) => [Number(p), info.frontier]));
  log(`processed ${warehouse.length} in batches ${JSON.stringify(batchSizes)}`);
  log(`sample (partition, sequence, attempt): ${JSON.stringify(warehouse.slice(0, 5))}`);
  log(`frontiers ${JSON.stringify(frontiers)}, lag ${lag.lag}`);
  return { processed: warehouse.length, sample: warehouse.slice(0, 5), batchSizes, frontiers, lag: lag.lag };
}

export const example: Example<BroadwayResult> = {
  name: 'broadway-pipeline',
  description: 'concurrent processors, a batcher and a batch writer; frontiers and lag reach zero',
  run,
};
