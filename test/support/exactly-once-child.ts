/**
 * Child process for the exactly-once fault test (test/chaos/exactly-once.ts):
 * consumes a group on PostgreSQL with `transaction: true`; each handler
 * inserts one row keyed by the event id into the user table `effects`
 * (no unique constraint and no ON CONFLICT, so a duplicate effect would show
 * as a second row) and commits it with the ack. Runs until killed.
 *
 *     node --import tsx test/support/exactly-once-child.ts <url> <schema> <stream> <group> <leaseMs>
 */
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { createRheo } from '../../src/rheo.js';

const [url, schema, stream, group, leaseMs] = process.argv.slice(2);
if (!url || !schema || !stream || !group || !leaseMs) {
  process.stderr.write('usage: exactly-once-child <url> <schema> <stream> <group> <leaseMs>\n');
  process.exit(2);
}

const rheo = createRheo({
  backend: postgresBackend({ connectionString: url, poolConfig: { max: 6, application_name: 'rheo-exactly-once' } }, { schema }),
});
rheo.consume({
  stream,
  group,
  consumerId: `eo-${process.pid}`,
  concurrency: 4,
  leaseMs: Number(leaseMs),
  pollMs: 50,
  transaction: true,
  handler: async (event, { client, attempt }) => {
    await client!.query(`INSERT INTO "${schema}".effects (event_id, attempt, pid) VALUES ($1, $2, $3)`, [event.id, attempt, process.pid]);
  },
});
process.stdout.write('ready\n');
