/**
 * Child process for the exactly-once fault test (test/chaos/exactly-once.ts):
 * consumes a group on PostgreSQL with `transaction: true`, as a competing
 * consumer (`leases`, the lease length given) or as a member of partition
 * ownership (`partitions`, the same number as its session); each handler
 * inserts one row keyed by the event id into the user table `effects`
 * (no unique constraint and no ON CONFLICT, so a duplicate effect would show
 * as a second row) and commits it with the ack. Runs until killed.
 *
 *     node --import tsx test/support/exactly-once-child.ts <url> <schema> <stream> <group> <leaseMs> [leases|partitions] [none|transaction <listen url>]
 */
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { createRheo } from '../../src/rheo.js';

const [url, schema, stream, group, leaseMs, assignment = 'leases', pooler = 'none', listenUrl] = process.argv.slice(2);
if (
  !url ||
  !schema ||
  !stream ||
  !group ||
  !leaseMs ||
  (assignment !== 'leases' && assignment !== 'partitions') ||
  (pooler !== 'none' && pooler !== 'transaction')
) {
  process.stderr.write('usage: exactly-once-child <url> <schema> <stream> <group> <leaseMs> [leases|partitions] [none|transaction <listen url>]\n');
  process.exit(2);
}

const rheo = createRheo({
  backend: postgresBackend(
    { connectionString: url, poolConfig: { max: 6, application_name: 'rheo-exactly-once' } },
    { schema, pooler, listenConnectionString: listenUrl },
  ),
});
const insert = `INSERT INTO "${schema}".effects (event_id, attempt, pid) VALUES ($1, $2, $3)`;
if (assignment === 'partitions') {
  const sessionMs = Number(leaseMs);
  rheo.consume({
    stream,
    group,
    assignment: 'partitions',
    memberId: `eo-${process.pid}`,
    sessionMs,
    heartbeatMs: Math.max(50, Math.floor(sessionMs / 5)),
    rebalanceTimeoutMs: sessionMs,
    batchSize: 50,
    pollMs: 50,
    transaction: true,
    handler: async (event, { client, attempt }) => {
      await client!.query(insert, [event.id, attempt, process.pid]);
    },
  });
} else {
  rheo.consume({
    stream,
    group,
    consumerId: `eo-${process.pid}`,
    concurrency: 4,
    leaseMs: Number(leaseMs),
    pollMs: 50,
    transaction: true,
    handler: async (event, { client, attempt }) => {
      await client!.query(insert, [event.id, attempt, process.pid]);
    },
  });
}
process.stdout.write('ready\n');
