/**
 * A bench child for the `processes` scenario: one member of a group on
 * PostgreSQL or Redis whose handler awaits a real timer (I/O-bound work),
 * until SIGTERM.
 *
 *     node --import tsx bench/lib/process-member.ts '<MemberConfig as JSON>'
 *
 * It prints `joining` right before it calls `rheo.consume` (the parent
 * times a join from that line), then `ready` in competing mode, or
 * `owned <n>` whenever its share changes in partition mode. With `idsFile`
 * it keeps the id of every event its handler ran (one entry per run, so a
 * redelivery shows twice) and writes them there, one per line, after its
 * consumer has stopped. It stops on SIGTERM or when its stdin ends (the
 * parent died). Before it exits it prints `timer <ms> <runs>`: the
 * time its handlers' timers really took in all, and how many ran (a timer
 * fires late when the process waits for a core).
 */
import diagnosticsChannel from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import type { RebalanceEvent } from '../../src/observability/lease-events.js';
import { loadRheo } from './rheo-entry.js';

const modules = await loadRheo();
const { createRheo } = modules.index;
const { postgresBackend } = modules.postgres;
const { redisBackend } = modules.redis;

export interface MemberConfig {
  backend: 'postgres' | 'redis';
  url: string;
  /** Redis key prefix (the parent's). */
  prefix?: string;
  stream: string;
  group: string;
  mode: 'competing' | 'partitions';
  /** What each handler awaits, in ms. */
  delayMs: number;
  concurrency: number;
  /** Competing mode only. */
  maxDemand: number;
  /** Partition mode only; omitted: the library's default (a third of sessionMs). */
  heartbeatMs?: number;
  idsFile?: string;
}

const raw = process.argv[2];
if (!raw) {
  process.stderr.write("usage: process-member '<json config>'\n");
  process.exit(2);
}
const config = JSON.parse(raw) as MemberConfig;

const backend =
  config.backend === 'postgres'
    ? postgresBackend({ connectionString: config.url, poolConfig: { max: 10 } })
    : redisBackend({ url: config.url }, { prefix: config.prefix });
const rheo = createRheo({ backend });
const handled: string[] | null = config.idsFile ? [] : null;
let timerMs = 0;
let timerRuns = 0;
const handler = async (event: { id: string }): Promise<void> => {
  const t0 = performance.now();
  await delay(config.delayMs);
  timerMs += performance.now() - t0;
  timerRuns++;
  handled?.push(event.id);
};

process.stdout.write('joining\n');
const consumer =
  config.mode === 'partitions'
    ? rheo.consume({
        stream: config.stream,
        group: config.group,
        assignment: 'partitions',
        orderBy: 'key',
        concurrency: config.concurrency,
        heartbeatMs: config.heartbeatMs,
        handler,
      })
    : rheo.consume({
        stream: config.stream,
        group: config.group,
        concurrency: config.concurrency,
        maxDemand: config.maxDemand,
        // The parent starts the clock with a resetGroup, which sends no notification: poll briskly.
        pollMs: 50,
        handler,
      });
if (config.mode === 'partitions') {
  diagnosticsChannel.subscribe('rheo:rebalance', (message) => {
    const m = message as RebalanceEvent;
    if ('memberId' in consumer && m.memberId === consumer.memberId) process.stdout.write(`owned ${m.owned.length}\n`);
  });
} else {
  process.stdout.write('ready\n');
}
let stopping = false;
const stop = (): void => {
  if (stopping) return;
  stopping = true;
  // A member whose backend is gone must still exit.
  setTimeout(() => process.exit(1), 15_000).unref();
  void consumer
    .stop({ timeoutMs: 5_000 })
    .then(() => rheo.close())
    .then(() => {
      if (handled && config.idsFile) writeFileSync(config.idsFile, handled.length > 0 ? `${handled.join('\n')}\n` : '');
      process.stdout.write(`timer ${timerMs} ${timerRuns}\n`, () => process.exit(0));
    })
    .catch(() => process.exit(1));
};
process.once('SIGTERM', stop);
// The parent holds our stdin open: when it ends, the parent is gone (killed, say) and nobody will send SIGTERM.
process.stdin.on('end', stop);
process.stdin.resume();
