/**
 * Part 1 of the pipelines notebook: demand becomes leases. A plain consumer
 * takes four leases from a producer with maxDemand 4, then settles each one
 * through rheo and confirms it to the producer (`producer.ack` does both).
 */
import type { Lease, Rheo } from '../src/index.js';
import { take, uniqueName, type Example, type Log } from './example-kit.js';

export interface PlainConsumerResult {
  received: number;
  tickNumbers: number[];
  inflightBeforeConfirm: number;
  inflightAfterConfirm: number;
}

export async function run(rheo: Rheo, log: Log): Promise<PlainConsumerResult> {
  const stream = uniqueName('pipeline-events');
  await rheo.createStream(stream, { partitions: 2 });
  await rheo.createGroup(stream, 'genstage');
  await rheo.appendBatch(
    stream,
    Array.from({ length: 12 }, (_, i) => ({ type: 'tick', payload: { n: i + 1 }, key: `k-${(i + 1) % 3}` })),
  );
  log(`appended 12 ticks to ${stream} (2 partitions)`);

  const producer = rheo.producer<{ n: number }>({ stream, group: 'genstage', maxDemand: 4 });
  try {
    const leases = await take<Lease<{ n: number }>>(producer, 4);
    const inflightBeforeConfirm = producer.inflightCount;
    log(`received 4 leases; the producer holds ${inflightBeforeConfirm} (maxDemand 4), so it fetches no more`);
    for (const lease of leases) {
      // Prefer producer.ack(lease) in real code: it settles and confirms in one step.
      await rheo.ack(lease);
      producer.confirm(lease.leaseId);
    }
    // Confirming freed demand, so the producer fetched the next leases; count only ours.
    const inflightAfterConfirm = leases.filter((l) => producer.holds(l.leaseId)).length;
    log(`acked and confirmed them: ${inflightAfterConfirm} of them still held`);
    return {
      received: leases.length,
      tickNumbers: leases.map((l) => l.event.payload.n),
      inflightBeforeConfirm,
      inflightAfterConfirm,
    };
  } finally {
    // Releases whatever the producer fetched after the confirms, without spending attempts.
    await producer.close();
  }
}

export const example: Example<PlainConsumerResult> = {
  name: 'plain-consumer',
  description: 'a plain consumer with manual ack and confirm',
  run,
};
