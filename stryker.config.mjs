// Mutation testing of the memory-backed core: `npm run test:mutation`.
// Not part of `npm test`; see docs/testing.md for the last score and the
// surviving mutants judged equivalent.
/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutation.config.ts' },
  mutate: [
    'src/core/**/*.ts',
    'src/producer/**/*.ts',
    'src/sinks/**/*.ts',
    'src/consumer/**/*.ts',
    'src/backends/memory/**/*.ts',
  ],
  // Two cores shared with other work: one sandbox at a time.
  concurrency: 1,
  coverageAnalysis: 'perTest',
  timeoutMS: 20_000,
  reporters: ['clear-text', 'progress-append-only', 'json', 'html'],
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  tempDirName: '.stryker-tmp',
  ignorePatterns: ['bench', 'examples', 'dist', 'reports', '.stryker-tmp'],
  thresholds: { high: 90, low: 80, break: null },
};
