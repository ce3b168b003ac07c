/**
 * A process for test/streams/close-exit.test.ts:
 *   node --import tsx test/support/close-child.ts memory
 *   node --import tsx test/support/close-child.ts <url> <schema>
 * Runs a producer pipeline and a consumer with real timers, closes rheo while
 * both hold leases, prints one JSON line with how each ended, and then does
 * nothing: the process must exit on its own, with nothing of rheo's left to
 * keep the event loop alive.
 */
import { pipeline } from 'node:stream/promises';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { isRheoError } from '../../src/core/errors.js';
import { createRheo } from '../../src/rheo.js';
import { createLeaseSink } from '../../src/sinks/lease-sink.js';

const [where, schema] = process.argv.slice(2);
const rheo = createRheo({
  backend: where === 'memory' || !where ? undefined : postgresBackend({ connectionString: where, poolConfig: { max: 3 } }, { schema }),
  defaults: { pollMs: 100_000, leaseMs: 60_000 },
});
await rheo.migrate();
await rheo.createStream('s');
await rheo.createGroup('s', 'piped');
await rheo.createGroup('s', 'consumed');
await rheo.appendBatch('s', Array.from({ length: 4 }, (_, n) => ({ payload: { n } })));

let startedPiped!: () => void;
const pipedStarted = new Promise<void>((resolve) => (startedPiped = resolve));
const producer = rheo.producer({ stream: 's', group: 'piped', maxDemand: 4 });
const sink = createLeaseSink({
  producer,
  handler: async (_lease, { signal }) => {
    startedPiped();
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
  },
});
const piped = pipeline(producer, sink).then(
  () => 'ended',
  (error: unknown) => (isRheoError(error) ? error.code : String(error)),
);

let startedConsumed!: () => void;
const consumedStarted = new Promise<void>((resolve) => (startedConsumed = resolve));
const consumer = rheo.consume({
  stream: 's',
  group: 'consumed',
  handler: (_event, { signal }) => {
    startedConsumed();
    return new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  },
});

await Promise.all([pipedStarted, consumedStarted]);
await rheo.close();
const result = { piped: await piped, consumer: await consumer.done.then(() => consumer.state) };
process.stdout.write(`${JSON.stringify(result)}\n`);
