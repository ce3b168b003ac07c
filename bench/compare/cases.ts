/** The cases `npm run bench:compare` knows; each drains a pre-filled stream once per run. */
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
} as const satisfies Record<
  string,
  { backend: 'postgres' | 'redis'; mode: 'consume' | 'partitions' | 'producer' | 'append'; partitions: number; maxDemand: number; concurrency: number; telemetry?: boolean }
>;

export type CompareCaseId = keyof typeof COMPARE_CASES;
export type CompareBackend = (typeof COMPARE_CASES)[CompareCaseId]['backend'];
