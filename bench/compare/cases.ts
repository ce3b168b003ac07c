/** The cases `npm run bench:compare` knows; each drains a pre-filled stream once per run. */
export const COMPARE_CASES = {
  /** `rheo.consume`, competing consumers, on a 1-partition stream. */
  'consume-1': { mode: 'consume', partitions: 1, maxDemand: 500, concurrency: 50 },
  /** The same on an 8-partition stream: spreading over partitions must not cost. */
  'consume-8': { mode: 'consume', partitions: 8, maxDemand: 500, concurrency: 50 },
  /** `assignment: 'partitions'` on 8 partitions (batchSize 500, concurrency 50). */
  'partitions-8': { mode: 'partitions', partitions: 8, maxDemand: 500, concurrency: 50 },
  /** The streams adapter: RheoProducer piped into a no-op lease sink, 1 partition. */
  'producer-1': { mode: 'producer', partitions: 1, maxDemand: 500, concurrency: 50 },
} as const satisfies Record<string, { mode: 'consume' | 'partitions' | 'producer'; partitions: number; maxDemand: number; concurrency: number }>;

export type CompareCaseId = keyof typeof COMPARE_CASES;
