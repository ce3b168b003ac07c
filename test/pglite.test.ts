import { runConformanceSuite } from './conformance/suite.js';
import { makePgliteTestBackend } from './support/pglite.js';

// The whole backend-agnostic suite, every case, against PGlite (PostgreSQL in
// this process) with the suite's ManualClock as the time authority; a fresh
// schema per test on one shared instance.
runConformanceSuite('pglite', (clock) => makePgliteTestBackend(clock));
