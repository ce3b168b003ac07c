/**
 * A bench child: one member of a group in partition mode with a no-op
 * handler, until SIGTERM. Prints `owned <n>` whenever its share changes.
 *
 *     node --import tsx bench/lib/partition-member.ts <url> <stream> <group> <batchSize>
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { createRheo } from '../../src/index.js';
import { postgresBackend } from '../../src/postgres.js';
import type { RebalanceEvent } from '../../src/observability/lease-events.js';

const [url, stream, group, batchSize] = process.argv.slice(2);
if (!url || !stream || !group || !batchSize) {
  process.stderr.write('usage: partition-member <url> <stream> <group> <batchSize>\n');
  process.exit(2);
}
const rheo = createRheo({ backend: postgresBackend({ connectionString: url, poolConfig: { max: 10 } }) });
const consumer = rheo.consume({
  stream,
  group,
  assignment: 'partitions',
  batchSize: Number(batchSize),
  concurrency: 16,
  heartbeatMs: 200,
  rebalanceTimeoutMs: 2_000,
  handler: () => undefined,
});
diagnosticsChannel.subscribe('rheo:rebalance', (message) => {
  const m = message as RebalanceEvent;
  if (m.memberId === consumer.memberId) process.stdout.write(`owned ${m.owned.length}\n`);
});
process.once('SIGTERM', () => {
  void consumer.stop({ timeoutMs: 5_000 }).then(() => rheo.close()).then(() => process.exit(0));
});
