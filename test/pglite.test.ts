import { runConformanceSuite } from './conformance/suite.js';
import { makePgliteTestBackend } from './support/pglite.js';

// The whole backend-agnostic suite, every case, against PGlite (PostgreSQL in
// this process) with the suite's ManualClock as the time authority; a fresh
// schema per test on one shared instance.
// 5,000 events for bounded storage: the point is that acked state is deleted, and
// PGlite's single session appends and acks the 20,000 of PostgreSQL's run in
// minutes on a loaded 2-core machine.
// Its property tests (30 random scenarios each, every statement through the
// one session) took 28-33 s on CI's machine, against vitest's 30 s default.
runConformanceSuite('pglite', (clock) => makePgliteTestBackend(clock), { storageEvents: 5_000, propertyTimeoutMs: 120_000 });
