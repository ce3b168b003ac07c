/**
 * A bench child: one competing consumer of a group (per-event leases,
 * `rheo.consume` without `assignment`) with a no-op handler, until SIGTERM.
 *
 *     node --import tsx bench/lib/competing-member.ts <url> <stream> <group> <maxDemand>
 */
import { loadRheo } from './rheo-entry.js';

const modules = await loadRheo();
const { createRheo } = modules.index;
const { postgresBackend } = modules.postgres;

const [url, stream, group, maxDemand] = process.argv.slice(2);
if (!url || !stream || !group || !maxDemand) {
  process.stderr.write('usage: competing-member <url> <stream> <group> <maxDemand>\n');
  process.exit(2);
}
const rheo = createRheo({ backend: postgresBackend({ connectionString: url, poolConfig: { max: 10 } }) });
const consumer = rheo.consume({
  stream,
  group,
  maxDemand: Number(maxDemand),
  concurrency: 16,
  handler: () => undefined,
});
process.once('SIGTERM', () => {
  void consumer.stop({ timeoutMs: 5_000 }).then(() => rheo.close()).then(() => process.exit(0));
});
