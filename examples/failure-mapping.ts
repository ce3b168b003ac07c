/**
 * Failure mapping, as in Broadway: a handler's outcome decides the settle.
 * Returning nothing acks; `{ retry }` (or a throw) nacks, so the event comes
 * back with `attempt + 1`; `{ reject }` dead-letters at once. Batches map the
 * same way, one outcome per lease.
 */
import { pipeline } from 'node:stream/promises';
import { createBatchSink, createLeaseSink, type Rheo } from '../src/index.js';
import { uniqueName, type Example, type Log } from './example-kit.js';

type Job = { job: 'ok' | 'flaky' | 'crashy' | 'poison' };

export interface FailureMappingResult {
  /** Attempts each job took before it was settled for good. */
  attempts: Record<Job['job'], number>;
  deadLetters: Array<{ job: string; reason: string | null }>;
  lag: number;
  /** The batch variant: outcomes per lease in one batch. */
  batch: { deadLetters: string[]; retriedThenAcked: number; lag: number };
}

export async function run(rheo: Rheo, log: Log): Promise<FailureMappingResult> {
  const stream = uniqueName('jobs');
  await rheo.createStream(stream);
  await rheo.createGroup(stream, 'workers', { maxAttempts: 3 });
  await rheo.appendBatch(
    stream,
    (['ok', 'flaky', 'crashy', 'poison'] as const).map((job) => ({ type: 'job', payload: { job } })),
  );

  const producer = rheo.producer<Job>({ stream, group: 'workers', maxDemand: 4 });
  const attempts = { ok: 0, flaky: 0, crashy: 0, poison: 0 };
  let settledForGood = 0;
  const sink = createLeaseSink<Job>({
    producer,
    concurrency: 2,
    handler: (lease) => {
      const { job } = lease.event.payload;
      attempts[job] = lease.attempt;
      const last = job === 'ok' || job === 'poison' || lease.attempt >= 2;
      if (last && ++settledForGood === 4) void producer.drain();
      switch (job) {
        case 'ok':
          return undefined; // ack
        case 'flaky':
          return lease.attempt === 1 ? { retry: 'upstream timed out' } : 'ack';
        case 'crashy':
          if (lease.attempt === 1) throw new Error('worker crashed');
          return 'ack';
        case 'poison':
          return { reject: 'payload cannot be parsed' };
      }
    },
  });
  sink.on('handler-error', ({ lease, error }) => log(`handler threw on ${lease.receipt}: ${(error as Error).message} (nacked)`));
  await pipeline(producer, sink);

  const dead = await rheo.deadLetters<Job>(stream, 'workers');
  const lag = (await rheo.lag(stream, 'workers')).lag;
  log(`attempts ${JSON.stringify(attempts)}`);
  log(`dead letters ${JSON.stringify(dead.map((d) => [d.event.payload.job, d.reason]))}, lag ${lag}`);

  // The same mapping for a batch: one outcome per lease.
  const batchStream = uniqueName('rows');
  await rheo.createStream(batchStream);
  await rheo.createGroup(batchStream, 'writer');
  await rheo.appendBatch(batchStream, ['a', 'b', 'c'].map((row) => ({ type: 'row', payload: { row } })));
  const batchProducer = rheo.producer<{ row: string }>({ stream: batchStream, group: 'writer', maxDemand: 3 });
  let retriedThenAcked = 0;
  await pipeline(
    batchProducer,
    createBatchSink<{ row: string }>({
      producer: batchProducer,
      batchSize: 3,
      batchTimeoutMs: 50,
      handler: (leases) =>
        leases.map((lease) => {
          const { row } = lease.event.payload;
          if (row === 'c') return { reject: 'violates schema' };
          if (row === 'b' && lease.attempt === 1) return { retry: 'constraint busy' };
          if (row === 'b') {
            // The retried row is the last one outstanding.
            retriedThenAcked++;
            void batchProducer.drain();
          }
          return 'ack';
        }),
    }),
  );
  const batchDead = await rheo.deadLetters<{ row: string }>(batchStream, 'writer');
  const batchLag = (await rheo.lag(batchStream, 'writer')).lag;
  log(`batch: dead letters ${JSON.stringify(batchDead.map((d) => d.event.payload.row))}, lag ${batchLag}`);

  return {
    attempts,
    deadLetters: dead.map((d) => ({ job: d.event.payload.job, reason: d.reason })),
    lag,
    batch: { deadLetters: batchDead.map((d) => d.event.payload.row), retriedThenAcked, lag: batchLag },
  };
}

export const example: Example<FailureMappingResult> = {
  name: 'failure-mapping',
  description: 'retry then succeed, throw then succeed, reject to dead letters (per lease and per batch)',
  run,
};
