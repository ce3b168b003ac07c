/** The cases `npm run bench:compare` knows; each drains a pre-filled stream once per run, but the latency cases (see `latency`). */
export const COMPARE_CASES = {
  /** `rheo.consume`, competing consumers, on a 1-partition stream. */
  'consume-1': { backend: 'postgres', mode: 'consume', partitions: 1, maxDemand: 500, concurrency: 50 },
  /** The same on an 8-partition stream: spreading over partitions must not cost. */
  'consume-8': { backend: 'postgres', mode: 'consume', partitions: 8, maxDemand: 500, concurrency: 50 },
  /**
   * `consume-8` as most applications run it: `@opentelemetry/api` installed
   * (some dependency brings it) with no provider registered, telemetry left
   * on. Every other case turns telemetry off.
   */
  'consume-8-otel': { backend: 'postgres', mode: 'consume', partitions: 8, maxDemand: 500, concurrency: 50, telemetry: true },
  /** `assignment: 'partitions'` on 8 partitions (batchSize 500, concurrency 50). */
  'partitions-8': { backend: 'postgres', mode: 'partitions', partitions: 8, maxDemand: 500, concurrency: 50 },
  /** The streams adapter: RheoProducer piped into a no-op lease sink, 1 partition. */
  'producer-1': { backend: 'postgres', mode: 'producer', partitions: 1, maxDemand: 500, concurrency: 50 },
  /** `appendBatch` in chunks of 1,000 (one after another) into a new 1-partition stream; `maxDemand` and `concurrency` are unused. */
  'append-1': { backend: 'postgres', mode: 'append', partitions: 1, maxDemand: 0, concurrency: 0 },
  /** `rheo.consume` on Redis (one redis-server, AOF everysec), 1 partition. Skipped for a ref without the Redis backend. */
  'redis-consume-1': { backend: 'redis', mode: 'consume', partitions: 1, maxDemand: 500, concurrency: 50 },
  /** The same on 8 partitions. */
  'redis-consume-8': { backend: 'redis', mode: 'consume', partitions: 8, maxDemand: 500, concurrency: 50 },
  /** `append-1` on Redis. */
  'redis-append-1': { backend: 'redis', mode: 'append', partitions: 1, maxDemand: 0, concurrency: 0 },
  /**
   * Idle append → handler start, p50 in ms, `rheo.consume` (concurrency 1,
   * maxDemand 10) woken by NOTIFY: both builds in one process, appends
   * alternating between them one by one (latency.ts).
   */
  latency: { backend: 'postgres', mode: 'latency', partitions: 1, maxDemand: 10, concurrency: 1 },
  /** The same with `assignment: 'partitions'`. */
  'latency-partitions': { backend: 'postgres', mode: 'latency-partitions', partitions: 1, maxDemand: 10, concurrency: 1 },
  /** `latency` on Redis (a blocking fetch where the build has one, else woken by pub/sub). */
  'redis-latency': { backend: 'redis', mode: 'latency', partitions: 1, maxDemand: 10, concurrency: 1 },
  /** `redis-latency` on an 8-partition stream, each append to a partition of its own choice (no key). */
  'redis-latency-8': { backend: 'redis', mode: 'latency', partitions: 8, maxDemand: 10, concurrency: 1 },
  /** `latency-partitions` on Redis. */
  'redis-latency-partitions': { backend: 'redis', mode: 'latency-partitions', partitions: 1, maxDemand: 10, concurrency: 1 },
} as const satisfies Record<
  string,
  {
    backend: 'postgres' | 'redis';
    mode: 'consume' | 'partitions' | 'producer' | 'append' | 'latency' | 'latency-partitions';
    partitions: number;
    maxDemand: number;
    concurrency: number;
    telemetry?: boolean;
  }
>;

export type CompareCaseId = keyof typeof COMPARE_CASES;
export type CompareBackend = (typeof COMPARE_CASES)[CompareCaseId]['backend'];

/** Whether a case measures idle latency (latency.ts) rather than a drain or an append run (case.ts). */
export function isLatencyCase(id: CompareCaseId): boolean {
  const mode = COMPARE_CASES[id].mode;
  return mode === 'latency' || mode === 'latency-partitions';
}
