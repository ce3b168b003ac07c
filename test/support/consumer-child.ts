/**
 * A consumer process for test/postgres/multiprocess.test.ts:
 *   node --import tsx test/support/consumer-child.ts <url> <schema> <stream> <group> <total>
 * Fetches and acks until the group's lag is 0 with `total` events appended,
 * then prints one JSON line: the `partition:sequence` of every lease it was
 * handed (each one is a handler run, whether or not its ack then succeeded:
 * a duplicate whose second ack is fenced is still a duplicate).
 */
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { createRheo } from '../../src/rheo.js';

const [url, schema, stream, group, totalText] = process.argv.slice(2);
if (!url || !schema || !stream || !group || !totalText) {
  process.stderr.write('usage: consumer-child <url> <schema> <stream> <group> <total>\n');
  process.exit(2);
}
const total = Number(totalText);

const rheo = createRheo({ backend: postgresBackend({ connectionString: url, poolConfig: { max: 2 } }, { schema }) });
const handled: string[] = [];
try {
  for (;;) {
    const leases = await rheo.fetch(stream, group, { limit: 20, consumerId: `pid-${process.pid}`, leaseMs: 300_000 });
    if (leases.length === 0) {
      const lag = await rheo.lag(stream, group);
      const hw = Object.values(lag.partitions).reduce((n, p) => n + p.highWatermark, 0);
      if (hw >= total && lag.lag === 0) break;
      await rheo.backend.waitForAppend?.(stream, 50);
      continue;
    }
    for (const lease of leases) handled.push(`${lease.event.partition}:${lease.event.sequence}`);
    const results = await rheo.ackMany(leases);
    const failed = results.find((r) => !r.ok);
    if (failed && !failed.ok) throw failed.error;
  }
  process.stdout.write(`${JSON.stringify(handled)}\n`);
} finally {
  await rheo.close();
}
