import { describe } from 'vitest';
import { runConformanceSuite } from './conformance/suite.js';
import { makePgbouncerTestBackend, pgbouncerUrl } from './support/postgres.js';

// The whole backend-agnostic suite through PgBouncer in transaction pooling
// mode (`pooler: 'transaction'`, LISTEN on a direct connection); skipped only
// when an external database is used without RHEO_TEST_PGBOUNCER_URL.
if (pgbouncerUrl() === '') describe.skip('postgres through pgbouncer (no RHEO_TEST_PGBOUNCER_URL)', () => {});
else runConformanceSuite('postgres through pgbouncer (transaction pooling)', (clock) => makePgbouncerTestBackend(clock));
