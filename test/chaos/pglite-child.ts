/**
 * The PGlite durability child: opens the data directory (taking over the
 * lock its killed predecessor left), then appends and consumes until it is
 * killed (it reports ready after its first whole round), writing down what it saw confirmed (records.ts: one synchronous
 * write before it goes on). Each round appends a batch under its own ids,
 * fetches, and acks about two leases in three and nacks the rest, so the
 * group holds acked, nacked, in-flight and unread events whenever the SIGKILL
 * lands. Before every settle it writes the intent (`settle` with `ok: false`,
 * `code: 'sent'`), so the checker can tell an ack that committed unconfirmed
 * from an event the frontier skipped.
 *
 *     node <compiled pglite-child.js> '<PgliteChildArgs as JSON>'
 */
import { randomUUID } from 'node:crypto';
import { isRheoError } from '../../src/core/errors.js';
import { pgliteBackend } from '../../src/backends/pglite/pglite-backend.js';
import { createRheo } from '../../src/rheo.js';
import { RecordWriter } from './records.js';

export interface PgliteChildArgs {
  dataDir: string;
  records: string;
  stream: string;
  group: string;
}

const args = JSON.parse(process.argv[2] ?? '{}') as PgliteChildArgs;
const records = new RecordWriter(args.records);
const rheo = createRheo({ backend: pgliteBackend({ dataDir: args.dataDir }), retention: { enabled: false } });
await rheo.migrate();
try {
  await rheo.createStream(args.stream, { partitions: 3 });
} catch (error) {
  if (!isRheoError(error, 'already_exists')) throw error;
}
try {
  await rheo.createGroup(args.stream, args.group, { maxAttempts: 1_000_000 });
} catch (error) {
  if (!isRheoError(error, 'already_exists')) throw error;
}
for (let round = 0; ; round++) {
  const inputs = Array.from({ length: 1 + (round % 7) }, (_, i) => ({ id: randomUUID(), key: `k${(round + i) % 13}`, payload: { round, i } }));
  const appended = round % 5 === 0 ? await Promise.all(inputs.map((input) => rheo.append(args.stream, input))) : await rheo.appendBatch(args.stream, inputs);
  records.writeAll(appended.map((e) => ({ k: 'appended', id: e.id, p: e.partition, s: e.sequence })));
  const leases = await rheo.fetch(args.stream, args.group, { limit: 8, leaseMs: 60_000, consumerId: `child-${process.pid}` });
  records.writeAll(leases.map((l) => ({ k: 'claim', id: l.event.id, lease: l.leaseId, attempt: l.attempt, t: l.leasedAt.getTime() })));
  const acks = leases.filter((_, i) => (round + i) % 3 !== 0);
  const nacks = leases.filter((_, i) => (round + i) % 3 === 0);
  records.writeAll(acks.map((l) => ({ k: 'settle', op: 'ack', id: l.event.id, lease: l.leaseId, ok: false, code: 'sent', t: Date.now() })));
  const answers = await rheo.ackMany(acks);
  records.writeAll(answers.map((a, i) => ({ k: 'settle', op: 'ack', id: acks[i]!.event.id, lease: acks[i]!.leaseId, ok: a.ok, code: a.ok ? null : a.error.code, t: Date.now() })));
  const nackAnswers = await rheo.nackMany(nacks);
  records.writeAll(nackAnswers.map((a, i) => ({ k: 'settle', op: 'nack', id: nacks[i]!.event.id, lease: nacks[i]!.leaseId, ok: a.ok, code: a.ok ? null : a.error.code, t: Date.now() })));
  // Ready once a whole round is confirmed: the runner's random kill then lands among appends and settles, not in start-up.
  if (round === 0) process.send?.('ready');
}
