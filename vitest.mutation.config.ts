import { defineConfig } from 'vitest/config';

/**
 * The vitest run StrykerJS uses (`npm run test:mutation`): only the tests that
 * exercise the memory backend, the producer, sinks, transforms and consumer.
 * RHEO_MEMORY_ONLY drops the postgres entry of `backendFactories`, so the
 * shared stream and consumer files run on memory.
 *
 * The consumer area also runs the PostgreSQL tests of `transaction: true`
 * (the memory backend refuses that option, so no memory test reaches that
 * code), with the usual throwaway cluster of global-setup.ts: one per
 * Stryker sandbox.
 */
process.env.RHEO_MEMORY_ONLY = '1';
const area = process.env.RHEO_MUTATION_AREA;
const transactionTests =
  area === 'consumer' ? ['test/postgres/transactional-consume.test.ts', 'test/postgres/partition-transactions.test.ts'] : [];

export default defineConfig({
  test: {
    // The memory backend is judged by the conformance suite and the
    // differential model test (memory against the reference model); the
    // stream and consumer tests only add minutes per mutant there.
    include:
      area === 'memory-structures' || area === 'memory'
        ? ['test/memory.test.ts', 'test/model/**/*.test.ts', 'test/unit/**/*.test.ts']
        : [
            'test/memory.test.ts',
            'test/model/**/*.test.ts',
            'test/unit/**/*.test.ts',
            'test/streams/**/*.test.ts',
            'test/consumer/**/*.test.ts',
            // The OpenTelemetry paths of the producer, sinks and consumer
            // (logger.test.ts needs PostgreSQL for its migration logs).
            'test/observability/otel.test.ts',
            ...transactionTests,
          ],
    globalSetup: transactionTests.length > 0 ? ['test/support/global-setup.ts'] : [],
    // These run the code in child processes, where Stryker sees no coverage
    // (close-exit also needs PostgreSQL).
    exclude: ['test/consumer/crash.test.ts', 'test/consumer/readme.test.ts', 'test/streams/close-exit.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
