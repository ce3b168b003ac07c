export { postgresBackend, PostgresBackend } from './backends/postgres/postgres-backend.js';
export type {
  PostgresBackendConfig,
  PostgresBackendOptions,
  PostgresConnection,
} from './backends/postgres/postgres-backend.js';
export type { PlannedStatement } from './backends/postgres/migrate.js';
