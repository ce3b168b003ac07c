/**
 * `rheo.consume` in both modes on one stream. Competing consumers (the
 * default) lease events one by one, so the fastest free handler takes the
 * next one; partition ownership (`assignment: 'partitions'`) owns whole
 * partitions, handles each in sequence order and commits once per batch.
 * Two groups read the same events, one per mode.
 */
import type { Rheo } from '../src/index.js';
import { uniqueName, type Example, type Log } from './example-kit.js';

type Order = { order: number };

export interface ConsumeModesResult {
  events: number;
  competingHandled: number;
  partitionHandled: number;
  /** Partition mode: was every partition handled in sequence order? */
  partitionsInOrder: boolean;
  competingLag: number;
  partitionLag: number;
}

export async function run(rheo: Rheo, log: Log): Promise<ConsumeModesResult> {
  const stream = uniqueName('orders');
  await rheo.createStream(stream, { partitions: 3 });
  await rheo.createGroup(stream, 'emails'); // competing consumers
  await rheo.createGroup(stream, 'ledger'); // partition ownership
  const total = 30;
  await rheo.appendBatch(stream, Array.from({ length: total }, (_, i) => ({ key: `customer-${i % 5}`, payload: { order: i + 1 } })));
  log(`appended ${total} orders to ${stream} (3 partitions)`);

  let competingHandled = 0;
  const emails = rheo.consume<Order>({
    stream,
    group: 'emails',
    concurrency: 4,
    handler: async () => {
      await new Promise<void>((resolve) => setImmediate(resolve));
      competingHandled++;
    },
  });

  const seen = new Map<number, number[]>();
  const ledger = rheo.consume<Order>({
    stream,
    group: 'ledger',
    assignment: 'partitions',
    handler: (event, { partition }) => {
      const sequences = seen.get(partition) ?? [];
      sequences.push(event.sequence);
      seen.set(partition, sequences);
    },
  });

  while ((await rheo.lag(stream, 'emails')).lag > 0 || (await rheo.lag(stream, 'ledger')).lag > 0) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await Promise.all([emails.stop(), ledger.stop()]);

  const partitionHandled = [...seen.values()].reduce((n, s) => n + s.length, 0);
  const partitionsInOrder = [...seen.values()].every((s) => s.every((seq, i) => i === 0 || seq > s[i - 1]!));
  const [competingLag, partitionLag] = await Promise.all([rheo.lag(stream, 'emails'), rheo.lag(stream, 'ledger')]);
  log(`competing consumers (group emails): ${competingHandled} handled by 4 concurrent handlers, lag ${competingLag.lag}`);
  for (const [partition, sequences] of [...seen.entries()].sort((a, b) => a[0] - b[0])) {
    log(`partition ownership (group ledger): partition ${partition} handled in order ${JSON.stringify(sequences)}`);
  }
  return {
    events: total,
    competingHandled,
    partitionHandled,
    partitionsInOrder,
    competingLag: competingLag.lag,
    partitionLag: partitionLag.lag,
  };
}

export const example: Example<ConsumeModesResult> = {
  name: 'consume-modes',
  description: 'rheo.consume as competing consumers and as partition owners, over the same events',
  run,
};
