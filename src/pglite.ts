export { pgliteBackend, PgliteBackend, pgliteDataDir } from './backends/pglite/pglite-backend.js';
export type { PgliteBackendConfig, PgliteBackendOptions, PgliteConnection, PGliteLike } from './backends/pglite/pglite-backend.js';
// The class PgliteBackend extends: the PostgreSQL backend on PGlite's session.
export type { PostgresBackend } from './backends/postgres/postgres-backend.js';
// The contract types its signatures use, so this entry's declarations are
// self-contained whichever chunks the declaration bundler shares between entries.
export type * from './core/types.js';
export type * from './core/backend.js';
export type { Clock } from './core/clock.js';
