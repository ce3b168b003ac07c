import type { Consumer } from '../../src/consumer/consumer.js';
import type { ConsumeOptions } from '../../src/consumer/consumer-types.js';
import type { JsonValue, RheoEvent } from '../../src/core/types.js';
import { createRheo, type Rheo, type RheoDefaults } from '../../src/index.js';
import { postgresBackend } from '../../src/postgres.js';
import { interleavedLatency, type LatencySubject } from './interleaved-latency.js';
import { now, sleep, waitUntil } from './stats.js';
import { inChunks, payload, EVENT_TYPE } from './workload.js';

export type BackendKind = 'memory' | 'postgres';

export interface RheoSetup {
  /** PostgreSQL URL; required for `postgres`. */
  url?: string;
  /** Send a NOTIFY per append call (the default) or poll only. */
  notify?: boolean;
  defaults?: Partial<RheoDefaults>;
}

/** A migrated rheo on the given backend. The caller closes it. */
export async function openRheo(kind: BackendKind, setup: RheoSetup = {}): Promise<Rheo> {
  if (kind === 'memory') return createRheo({ defaults: setup.defaults });
  if (!setup.url) throw new Error('openRheo("postgres") needs a database URL');
  const backend = postgresBackend({ connectionString: setup.url }, { notify: setup.notify ?? true });
  const rheo = createRheo({ backend, defaults: setup.defaults });
  await rheo.migrate();
  return rheo;
}

/** Appends `count` bench events in `appendBatch` calls of `chunk`. */
/**
 * Appends `count` events in chunks. With `partitions` > 1 they are spread
 * round-robin over that many partitions (an event without a key or a
 * partition goes to partition 0, so a multi-partition case filled without
 * it would drain one partition).
 */
export async function fill(rheo: Rheo, stream: string, count: number, chunk = 1000, offset = 0, partitions = 1): Promise<void> {
  await inChunks(count, chunk, async (start, end) => {
    const inputs = [];
    for (let i = start; i < end; i++) inputs.push({ type: EVENT_TYPE, payload: payload(offset + i), partition: (offset + i) % partitions });
    await rheo.appendBatch(stream, inputs);
  });
}

/** Whether every partition's frontier has reached its high watermark. */
export async function caughtUp(rheo: Rheo, stream: string, group: string): Promise<boolean> {
  const report = await rheo.lag(stream, group);
  return report.lag === 0;
}

/** `rheo.consume(options)` in competing mode. */
export function consume<T extends JsonValue = JsonValue>(rheo: Rheo, options: ConsumeOptions<T>): Consumer<T> {
  return rheo.consume<T>(options);
}

/** How an idle-latency case consumes: competing `rheo.consume`, or partition ownership. */
export type ConsumeMode = 'competing' | 'partitions';

/**
 * One idle consumer of `stream` (group `g`) with a single handler slot, in
 * either mode, resolved once it waits for appends: in partition mode once
 * it owns the partition, then (both modes) after it had time to reach its
 * idle wait and open its LISTEN or subscriber connection.
 */
export async function idleConsumer<T extends JsonValue>(
  rheo: Rheo,
  stream: string,
  mode: ConsumeMode,
  handler: (event: RheoEvent<T>) => void,
): Promise<{ stop(): Promise<void> }> {
  if (mode === 'competing') {
    const consumer = rheo.consume<T>({ stream, group: 'g', concurrency: 1, maxDemand: 10, handler });
    await sleep(300);
    return consumer;
  }
  const consumer = rheo.consume<T>({ stream, group: 'g', assignment: 'partitions', concurrency: 1, heartbeatMs: 1_000, handler });
  await waitUntil(`${stream} partition owned`, () => consumer.stats().owned.length > 0, 30_000, 5);
  await sleep(300);
  return consumer;
}

/** An idle consumer of a new `stream` on `rheo` (`idleConsumer`), for `interleavedLatency`: `send` appends one event through `appender`. */
export async function idleConsumerSubject(rheo: Rheo, appender: Rheo, stream: string, mode: ConsumeMode): Promise<LatencySubject> {
  await rheo.createStream(stream);
  await rheo.createGroup(stream, 'g');
  const latencies: number[] = [];
  const consumer = await idleConsumer<{ at: number }>(rheo, stream, mode, (event) => {
    latencies.push(now() - event.payload.at);
  });
  return {
    name: `rheo ${mode}`,
    latencies,
    send: async (at) => {
      await appender.append(stream, { type: EVENT_TYPE, payload: { at } });
    },
    stop: () => consumer.stop(),
  };
}

/**
 * Idle append → handler p50 of both consumption modes and of a peer, in
 * turns (`interleavedLatency`): each rheo consumer on an instance of its own
 * (`open`), appends through a third, so a consumer learns of an append only
 * through the backend's notifications. Streams `${name}-competing` and
 * `${name}-partitions`. Stops and closes everything it started.
 */
export async function modesInTurnsWith(
  open: () => Promise<Rheo>,
  name: string,
  peer: () => Promise<LatencySubject>,
  samples: number,
): Promise<{ competing: number; partitions: number; peer: number }> {
  const instances: Rheo[] = [];
  const subjects: LatencySubject[] = [];
  try {
    for (let i = 0; i < 3; i++) instances.push(await open());
    const [appender, competingRheo, ownedRheo] = instances as [Rheo, Rheo, Rheo];
    subjects.push(await idleConsumerSubject(competingRheo, appender, `${name}-competing`, 'competing'));
    subjects.push(await idleConsumerSubject(ownedRheo, appender, `${name}-partitions`, 'partitions'));
    subjects.push(await peer());
    const [competing, partitions, theirs] = await interleavedLatency(subjects, samples);
    return { competing: competing!, partitions: partitions!, peer: theirs! };
  } finally {
    for (const subject of subjects) await subject.stop();
    for (const rheo of instances) await rheo.close();
  }
}
