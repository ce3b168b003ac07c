import { runConformanceSuite } from './conformance/suite.js';
import { makeTestBackend } from './support/postgres.js';

// The whole backend-agnostic suite, every case, against a real PostgreSQL with
// the suite's ManualClock as the time authority; a fresh schema per test.
runConformanceSuite('postgres', (clock) => makeTestBackend(clock));
