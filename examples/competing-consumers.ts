/**
 * Two competing consumers of one group: each event goes to exactly one of
 * them (they share the group's leases), so the work they do is disjoint and
 * together it covers the stream.
 */
import type { Rheo } from '../src/index.js';
import { uniqueName, type Example, type Log } from './example-kit.js';

export interface CompetingConsumersResult {
  events: number;
  perConsumer: Record<string, number>;
  /** Events both consumers handled: 0 when the work is disjoint. */
  overlap: number;
  /** Distinct events handled by either. */
  covered: number;
  lag: number;
}

export async function run(rheo: Rheo, log: Log): Promise<CompetingConsumersResult> {
  const stream = uniqueName('jobs');
  await rheo.createStream(stream, { partitions: 2 });
  await rheo.createGroup(stream, 'workers');
  const total = 40;
  await rheo.appendBatch(stream, Array.from({ length: total }, (_, i) => ({ payload: { job: i + 1 } })));
  log(`appended ${total} jobs to ${stream}`);

  const handled: Record<string, string[]> = { 'worker-a': [], 'worker-b': [] };
  const consumers = Object.keys(handled).map((consumerId) =>
    rheo.consume({
      stream,
      group: 'workers',
      consumerId,
      concurrency: 2,
      maxDemand: 4, // small, so neither consumer claims everything in one fetch
      handler: async (event) => {
        await new Promise<void>((resolve) => setTimeout(resolve, 1));
        handled[consumerId]!.push(event.id);
      },
    }),
  );
  while ((await rheo.lag(stream, 'workers')).lag > 0) await new Promise((resolve) => setTimeout(resolve, 10));
  await Promise.all(consumers.map((c) => c.stop()));

  const a = new Set(handled['worker-a']);
  const overlap = handled['worker-b']!.filter((id) => a.has(id)).length;
  const covered = new Set([...handled['worker-a']!, ...handled['worker-b']!]).size;
  const perConsumer = Object.fromEntries(Object.entries(handled).map(([id, ids]) => [id, ids.length]));
  const lag = (await rheo.lag(stream, 'workers')).lag;
  log(`worker-a handled ${perConsumer['worker-a']}, worker-b ${perConsumer['worker-b']}: ${overlap} in common, ${covered} of ${total} covered, lag ${lag}`);
  return { events: total, perConsumer, overlap, covered, lag };
}

export const example: Example<CompetingConsumersResult> = {
  name: 'competing-consumers',
  description: 'two consumers of one group share the work: disjoint, and together complete',
  run,
};
