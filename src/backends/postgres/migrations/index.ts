import { migration001 } from './001_init.js';
import { migration002 } from './002_lease_ranges.js';
import { migration003 } from './003_event_size.js';
import { migration004 } from './004_replay_holds.js';
import { migration005 } from './005_partition_ownership.js';
import { migration006 } from './006_retention.js';
import { migration007 } from './007_sql_append.js';
import { migration009 } from './009_segments.js';

export interface Migration {
  readonly version: number;
  readonly name: string;
  /** SQL with `:schema` standing for the quoted schema name. */
  readonly sql: string;
}

/** Append-only, in version order. */
export const MIGRATIONS: readonly Migration[] = [migration001, migration002, migration003, migration004, migration005, migration006, migration007, migration009];

export const LATEST_VERSION = MIGRATIONS[MIGRATIONS.length - 1]?.version ?? 0;

export function renderMigration(migration: Migration, quotedSchema: string): string {
  return migration.sql.replaceAll(':schema', quotedSchema);
}
