export { postgresBackend, PostgresBackend } from './backends/postgres/postgres-backend.js';
export type {
  PostgresBackendConfig,
  PostgresBackendOptions,
  PostgresConnection,
} from './backends/postgres/postgres-backend.js';
export type { PlannedStatement } from './backends/postgres/migrate.js';
// The contract types its signatures use, so this entry's declarations are
// self-contained whichever chunks the declaration bundler shares between entries.
export type * from './core/types.js';
export type * from './core/backend.js';
export type { Clock } from './core/clock.js';
export type { Logger, LogFields, LogLevel } from './core/logger.js';
