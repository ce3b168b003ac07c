/**
 * Child process for the partition-ownership process tests: one member of a
 * group on PostgreSQL (`rheo.consume({ assignment: 'partitions' })`). Prints
 * one line per happening, each with a wall-clock timestamp in ms (the same
 * machine clock for every child, so lines of different children compare):
 *
 *     ready
 *     handled <t> <partition> <sequence> <key> <generation>
 *     commit <t> <partition> <upTo> <generation> ok|<code> <sentAt>
 *     owned <t> <generation> <p,p,...>
 *     stopped
 *
 * SIGTERM stops it gracefully (finish, commit, leave) and exits 0.
 *
 *     node --import tsx test/support/partition-member-child.ts <url> <schema> <stream> <group> <memberId> <sessionMs> <handlerMs>
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import type { CommitInput } from '../../src/core/ownership-arguments.js';
import type { RebalanceEvent } from '../../src/observability/lease-events.js';
import { createRheo } from '../../src/rheo.js';

const [url, schema, stream, group, memberId, sessionMs, handlerMs] = process.argv.slice(2);
if (!url || !schema || !stream || !group || !memberId || !sessionMs || !handlerMs) {
  process.stderr.write('usage: partition-member-child <url> <schema> <stream> <group> <memberId> <sessionMs> <handlerMs>\n');
  process.exit(2);
}

const now = (): string => (performance.timeOrigin + performance.now()).toFixed(3);
const line = (text: string): void => void process.stdout.write(`${text}\n`);

const rheo = createRheo({ backend: postgresBackend({ connectionString: url, poolConfig: { max: 4 } }, { schema }) });

// Every commit and its outcome, as the consumer sends it through the facade.
const commit = rheo.commit.bind(rheo);
rheo.commit = async (ops: CommitInput[]) => {
  const sentAt = now();
  const results = await commit(ops);
  ops.forEach((op, i) => {
    const r = results[i];
    line(`commit ${now()} ${op.partition} ${op.upTo} ${op.generation} ${r?.ok ? 'ok' : (r?.error.code ?? 'none')} ${sentAt}`);
  });
  return results;
};

diagnosticsChannel.subscribe('rheo:rebalance', (message) => {
  const m = message as RebalanceEvent;
  if (m.memberId === memberId) line(`owned ${now()} ${m.groupGeneration} ${m.owned.join(',')}`);
});

const delay = Number(handlerMs);
const consumer = rheo.consume({
  stream,
  group,
  assignment: 'partitions',
  memberId,
  sessionMs: Number(sessionMs),
  heartbeatMs: Math.max(50, Math.floor(Number(sessionMs) / 5)),
  rebalanceTimeoutMs: Number(sessionMs),
  batchSize: 20,
  pollMs: 20,
  handler: async (event, { generation }) => {
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
    line(`handled ${now()} ${event.partition} ${event.sequence} ${event.key ?? '-'} ${generation}`);
  },
});
line('ready');

process.once('SIGTERM', () => {
  void consumer
    .stop({ timeoutMs: 5_000 })
    .then(() => rheo.close())
    .then(() => {
      line('stopped');
      process.exit(0);
    });
});
