import { describe } from 'vitest';
import { registerBatchTests } from './batches.js';
import { registerCancellationTests } from './cancellation.js';
import { registerErrorTests } from './errors.js';
import { registerFetchTests } from './fetch.js';
import type { BackendFactory, ConformanceOptions } from './fixture.js';
import { registerFrontierTests } from './frontier.js';
import { registerHealthTests } from './health.js';
import { registerInputParityTests } from './input-parity.js';
import { registerLeaseTests } from './leases.js';
import { registerLimitTests } from './limits.js';
import { registerLineageTests } from './lineage.js';
import { registerLogTests } from './log.js';
import { registerOwnershipTests } from './ownership.js';
import { registerPartitionScopeTests } from './partition-scope.js';
import { registerPropertyTests } from './properties.js';
import { registerQueryAllTests } from './query-all.js';
import { registerQueryTests } from './query.js';
import { registerRenewTests } from './renew.js';
import { registerReplayTests } from './replay.js';
import { registerRetentionProperty } from './retention-property.js';
import { registerRetentionTests } from './retention.js';
import { registerStorageTests } from './storage.js';
import { registerTransactionTests } from './transactions.js';

export type { BackendFactory, ConformanceOptions } from './fixture.js';

/**
 * Registers the whole backend conformance suite. Every test gets a fresh
 * backend from `makeBackend`, driven by a `ManualClock` (lease expiry is
 * `clock.advance`, never a sleep), wrapped in `createRheo`, migrated, and
 * closed afterwards. Correctness cases are never skipped for any backend.
 */
export function runConformanceSuite(
  name: string,
  makeBackend: BackendFactory,
  options: ConformanceOptions = {},
): void {
  describe(`conformance: ${name}`, () => {
    registerLogTests(makeBackend);
    registerQueryTests(makeBackend);
    registerQueryAllTests(makeBackend);
    registerLineageTests(makeBackend);
    registerHealthTests(makeBackend);
    registerFetchTests(makeBackend);
    registerLeaseTests(makeBackend);
    registerBatchTests(makeBackend);
    registerRenewTests(makeBackend);
    registerFrontierTests(makeBackend);
    registerReplayTests(makeBackend);
    registerRetentionTests(makeBackend);
    registerRetentionProperty(makeBackend);
    registerPartitionScopeTests(makeBackend);
    registerCancellationTests(makeBackend);
    registerErrorTests(makeBackend);
    registerLimitTests(makeBackend);
    registerInputParityTests(makeBackend);
    registerStorageTests(makeBackend, options.storageEvents ?? 20_000);
    registerPropertyTests(makeBackend, options.propertyTimeoutMs);
    registerOwnershipTests(makeBackend);
    registerTransactionTests(makeBackend);
  });
}
