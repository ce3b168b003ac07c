/**
 * A bench child: one member of a group with a no-op handler, until SIGTERM.
 * In partition mode (the default) it consumes by partition ownership and
 * prints `owned <n>` whenever its share changes; in competing mode it runs
 * `rheo.consume` on leases (maxDemand 500, concurrency 50, pollMs 50) and
 * prints `ready` once its consumer has started.
 *
 *     node --import tsx bench/lib/partition-member.ts <url> <stream> <group> <batchSize> [partitions|competing]
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import type { RebalanceEvent } from '../../src/observability/lease-events.js';
import { loadRheo } from './rheo-entry.js';

const modules = await loadRheo();
const { createRheo } = modules.index;
const { postgresBackend } = modules.postgres;

const [url, stream, group, batchSize, mode = 'partitions'] = process.argv.slice(2);
if (!url || !stream || !group || !batchSize || (mode !== 'partitions' && mode !== 'competing')) {
  process.stderr.write('usage: partition-member <url> <stream> <group> <batchSize> [partitions|competing]\n');
  process.exit(2);
}
const rheo = createRheo({ backend: postgresBackend({ connectionString: url, poolConfig: { max: 10 } }) });
const consumer =
  mode === 'partitions'
    ? rheo.consume({
        stream,
        group,
        assignment: 'partitions',
        batchSize: Number(batchSize),
        concurrency: 16,
        heartbeatMs: 200,
        rebalanceTimeoutMs: 2_000,
        handler: () => undefined,
      })
    : rheo.consume({
        stream,
        group,
        maxDemand: Number(batchSize),
        concurrency: 50,
        // The clock starts with a resetGroup, which sends no notification: poll briskly.
        pollMs: 50,
        handler: () => undefined,
      });
if (mode === 'partitions') {
  diagnosticsChannel.subscribe('rheo:rebalance', (message) => {
    const m = message as RebalanceEvent;
    if ('memberId' in consumer && m.memberId === consumer.memberId) process.stdout.write(`owned ${m.owned.length}\n`);
  });
} else {
  process.stdout.write('ready\n');
}
process.once('SIGTERM', () => {
  void consumer.stop({ timeoutMs: 5_000 }).then(() => rheo.close()).then(() => process.exit(0));
});
