// Mutation testing of the memory-backed core: `npm run test:mutation`.
// Not part of `npm test`; see docs/testing.md for the last score and the
// surviving mutants judged equivalent.
// scripts/mutation.sh runs one area at a time through RHEO_MUTATION_AREA.
const areas = {
  // The memory backend's data structures, judged by the conformance suite and unit tests only.
  'memory-structures': [
    'src/backends/memory/group-partition.ts',
    'src/backends/memory/min-heap.ts',
    'src/backends/memory/dead-letter-list.ts',
  ],
  memory: ['src/backends/memory/**/*.ts'],
  producer: ['src/producer/**/*.ts'],
  // What producer, sinks, transforms and consumer share: timers, backoff, the handler-run engine, queues.
  runtime: ['src/runtime/**/*.ts'],
  consumer: ['src/consumer/**/*.ts'],
  sinks: ['src/sinks/**/*.ts'],
  transforms: ['src/transforms/**/*.ts'],
  core: ['src/core/**/*.ts'],
};
const area = process.env.RHEO_MUTATION_AREA ?? 'all';
if (area !== 'all' && !areas[area]) throw new Error(`unknown RHEO_MUTATION_AREA ${area}`);

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts' },
  mutate: area === 'all' ? Object.values(areas).flat() : areas[area],
  // Two cores shared with other work: at most two sandboxes (RHEO_MUTATION_CONCURRENCY=1 for one).
  concurrency: Number(process.env.RHEO_MUTATION_CONCURRENCY ?? 2),
  coverageAnalysis: 'perTest',
  // A mutant that hangs a test is a timeout (counted as detected): keep the
  // wait short, since with one sandbox every timeout stalls the whole run.
  timeoutMS: 5_000,
  // Static mutants (module-level constants) would rerun every test each.
  ignoreStatic: true,
  reporters: ['clear-text', 'progress-append-only', 'json', 'html'],
  jsonReporter: { fileName: `reports/mutation/${area}.json` },
  htmlReporter: { fileName: `reports/mutation/${area}.html` },
  tempDirName: '.stryker-tmp',
  // examples/ stays in the sandbox: the example tests import it, and a copy outside would load
  // the original src/ beside the sandbox's (two RheoError classes, so instanceof fails).
  ignorePatterns: ['bench', 'dist', 'reports', '.stryker-tmp'],
  thresholds: { high: 90, low: 80, break: null },
};
