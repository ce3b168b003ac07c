/**
 * A chaos worker: consumes one group with `rheo.consume` (PostgreSQL or Redis) and
 * records every claim, every finished handler run and every settle answer
 * (see records.ts). It runs until SIGTERM, then drains and exits 0; any other
 * exit is a crash unless the scenario killed it.
 *
 *     node <compiled worker-child.js> '<WorkerArgs as JSON>'   (see child-bundle.ts)
 */
import { setTimeout as delay } from 'node:timers/promises';
import { createRheo } from '../../src/rheo.js';
import { childBackend, type ChildBackendArgs } from './chaos-backend.js';
import { RecordWriter } from './records.js';
import { recordingBackend } from './recording-backend.js';

export interface WorkerArgs extends ChildBackendArgs {
  stream: string;
  group: string;
  records: string;
  consumerId: string;
  concurrency: number;
  leaseMs: number;
  /** Each handler waits between 0 and twice this long, so leases are held while a fault strikes. */
  handlerMs: number;
}

const args = JSON.parse(process.argv[2] ?? '{}') as WorkerArgs;
const records = new RecordWriter(args.records);
const backend = childBackend(args, args.consumerId, { poolSize: 4, notify: true });
const rheo = createRheo({ backend: recordingBackend(backend, records) });
const consumer = rheo.consume({
  stream: args.stream,
  group: args.group,
  consumerId: args.consumerId,
  concurrency: args.concurrency,
  leaseMs: args.leaseMs,
  pollMs: 50,
  handler: async (event, { lease }) => {
    if (args.handlerMs > 0) await delay(Math.floor(Math.random() * 2 * args.handlerMs));
    records.write({ k: 'handled', id: event.id, lease: lease.leaseId, attempt: lease.attempt });
  },
});

process.once('SIGTERM', () => {
  void consumer
    .stop({ timeoutMs: 10_000 })
    .then(() => rheo.close())
    .then(() => {
      records.close();
      process.exit(0);
    });
});
process.send?.('ready');
