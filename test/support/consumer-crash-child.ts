/**
 * Child process for the consumer crash test: consumes a group on PostgreSQL
 * with handlers that never finish, prints `holding <sequence> <attempt>` for
 * every lease it starts, and waits to be killed with SIGKILL (so nothing is
 * settled or released: the leases can only expire).
 *
 *     node --import tsx test/support/consumer-crash-child.ts <url> <schema> <stream> <group> <concurrency> <leaseMs>
 */
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { createRheo } from '../../src/rheo.js';

const [url, schema, stream, group, concurrency, leaseMs] = process.argv.slice(2);
if (!url || !schema || !stream || !group || !concurrency || !leaseMs) {
  process.stderr.write('usage: consumer-crash-child <url> <schema> <stream> <group> <concurrency> <leaseMs>\n');
  process.exit(2);
}

const rheo = createRheo({ backend: postgresBackend({ connectionString: url }, { schema }) });
rheo.consume({
  stream,
  group,
  consumerId: `doomed-${process.pid}`,
  concurrency: Number(concurrency),
  leaseMs: Number(leaseMs),
  pollMs: 20,
  handler: (event, { attempt }) => {
    process.stdout.write(`holding ${event.sequence} ${attempt}\n`);
    return new Promise(() => {}); // works forever, until the process dies
  },
});
