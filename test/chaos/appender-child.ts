/**
 * A chaos appender: appends the events `${prefix}-${n}` for n in
 * [from, from + count) in batches, paced to about `perSecond`, and records
 * each acknowledged event. A batch whose outcome is unknown (`ambiguous`) or
 * that could not reach the database (`backend_unavailable`) is sent again
 * with the same ids until it is acknowledged, as a producer should; any other
 * error ends the process with code 3.
 *
 * It reports `ready` over IPC and starts on the runner's `go`.
 *
 *     node <compiled appender-child.js> '<AppenderArgs as JSON>'   (see child-bundle.ts)
 */
import { setTimeout as delay } from 'node:timers/promises';
import { isRheoError } from '../../src/core/errors.js';
import { createRheo } from '../../src/rheo.js';
import { childBackend, type ChildBackendArgs } from './chaos-backend.js';
import { RecordWriter } from './records.js';

export interface AppenderArgs extends ChildBackendArgs {
  stream: string;
  records: string;
  name: string;
  prefix: string;
  from: number;
  count: number;
  batch: number;
  perSecond: number;
}

const RETRYABLE = new Set(['ambiguous', 'backend_unavailable']);

const args = JSON.parse(process.argv[2] ?? '{}') as AppenderArgs;
const records = new RecordWriter(args.records);
const rheo = createRheo({ backend: childBackend(args, args.name, { poolSize: 2, notify: true }) });

// Started together with the workers (start-up is slow on a loaded machine); the runner says when to begin.
await new Promise<void>((resolve) => {
  process.once('message', () => resolve());
  process.send?.('ready');
});
process.disconnect?.();
const started = Date.now();
let retries = 0;
for (let n = args.from; n < args.from + args.count; n += args.batch) {
  const size = Math.min(args.batch, args.from + args.count - n);
  const inputs = Array.from({ length: size }, (_, i) => {
    const id = `${args.prefix}-${n + i}`;
    return { id, key: `k${(n + i) % 61}`, type: 'chaos', payload: { n: n + i } };
  });
  for (let failures = 0; ; failures++) {
    try {
      const events = await rheo.appendBatch(args.stream, inputs);
      records.writeAll(events.map((e) => ({ k: 'appended', id: e.id, p: e.partition, s: e.sequence })));
      break;
    } catch (error) {
      if (!isRheoError(error) || !RETRYABLE.has(error.code)) {
        process.stderr.write(`append failed for good: ${String(error)}\n`);
        process.exit(3);
      }
      retries++;
      await delay(Math.min(1000, 20 * 2 ** Math.min(failures, 6)));
    }
  }
  // Pacing spreads the appends over the fault window; it shapes load and synchronises nothing.
  const due = started + ((n + size - args.from) / args.perSecond) * 1000;
  if (due > Date.now()) await delay(due - Date.now());
}
records.close();
await rheo.close();
process.stdout.write(`${JSON.stringify({ retries })}\n`);
