/**
 * A consumer process for test/postgres/multiprocess.test.ts:
 *   node --import tsx test/support/consumer-child.ts <url> <schema> <stream> <group> <total>
 * Fetches and acks until the group's lag is 0 with `total` events appended,
 * then prints one JSON line: the `partition:sequence` of every event it acked.
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
const acked: string[] = [];
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
    const results = await rheo.ackMany(leases);
    leases.forEach((lease, i) => {
      if (results[i]?.ok) acked.push(`${lease.event.partition}:${lease.event.sequence}`);
    });
  }
  process.stdout.write(`${JSON.stringify(acked)}\n`);
} finally {
  await rheo.close();
}
