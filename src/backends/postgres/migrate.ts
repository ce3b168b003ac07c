import { RheoError } from '../../core/errors.js';
import { txQuery, type Database, type Queryable } from './connection.js';
import { sqlState } from './errors.js';
import { LATEST_VERSION, MIGRATIONS, renderMigration, type Migration } from './migrations/index.js';
import { ROUTINES, type Routine } from './routines.js';

/** First key of the two-key advisory lock; the second is hashtext(schema). */
const MIGRATE_LOCK_KEY = 0x72686530; // "rhe0"

/**
 * Applies pending migrations in one transaction under a transaction-scoped
 * advisory lock keyed by the schema name, so four processes racing here
 * serialise: the first applies, the others find the version recorded and do
 * nothing. A schema recorded at a version newer than this code knows is
 * refused (`schema_version`) rather than used with the wrong assumptions.
 * Then the functions of routines.ts this rheo calls are installed if missing.
 */
export async function migrate(db: Database, schema: string, quotedSchema: string): Promise<AppliedMigrations> {
  return db.transaction({ action: `migrate schema "${schema}"`, writes: true }, async (tx) => {
    await txQuery(tx, 'SELECT pg_advisory_xact_lock($1::int, hashtext($2))', [MIGRATE_LOCK_KEY, schema]);
    // DDL only for what is missing: CREATE SCHEMA IF NOT EXISTS checks the
    // database's CREATE privilege before it looks, so on an up-to-date schema
    // it would refuse a role that holds only the runtime privileges (docs/backends/postgres.md).
    // The catalogs are readable by every role; under the lock nothing else
    // creates them between this look and the CREATEs.
    const [found] = await txQuery<{ schema_exists: boolean; ledger_exists: boolean }>(
      tx,
      `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1) AS schema_exists,
              EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                      WHERE n.nspname = $1 AND c.relname = 'migrations') AS ledger_exists`,
      [schema],
    );
    if (!found?.schema_exists) await txQuery(tx, `CREATE SCHEMA IF NOT EXISTS ${quotedSchema}`, []);
    if (found?.ledger_exists) await checkLedger(tx, schema);
    else {
      await txQuery(
        tx,
        `CREATE TABLE IF NOT EXISTS ${quotedSchema}.migrations (
           version    integer PRIMARY KEY,
           name       text NOT NULL,
           applied_at timestamptz NOT NULL DEFAULT now()
         )`,
        [],
      );
    }
    const [row] = await txQuery<{ version: number | null }>(
      tx,
      `SELECT max(version) AS version FROM ${quotedSchema}.migrations`,
      [],
    );
    const current = row?.version ?? 0;
    if (current > LATEST_VERSION) throw newerSchema(schema, current);
    const applied: AppliedMigrations = { from: current, applied: [], routines: [] };
    await checkFreeNames(tx, schema, MIGRATIONS.filter((m) => m.version > current));
    for (const migration of MIGRATIONS) {
      if (migration.version <= current) continue;
      applied.applied.push({ version: migration.version, name: migration.name });
      try {
        await txQuery(tx, renderMigration(migration, quotedSchema), []);
      } catch (error) {
        if (!DUPLICATE_OBJECT_STATES.has(sqlState(error) ?? '')) throw error;
        throw schemaConflict(schema, `an object migration ${migration.version} (${migration.name}) creates: ${(error as Error).message}`, error);
      }
      await txQuery(tx, `INSERT INTO ${quotedSchema}.migrations (version, name) VALUES ($1, $2)`, [
        migration.version,
        migration.name,
      ]);
    }
    // This version's routines (routines.ts), under the same lock; names carry
    // a hash of the body, so only a changed or new one is created.
    const installed = await txQuery<InstalledRoutine>(tx, INSTALLED_ROUTINES_SQL, [schema, ROUTINE_NAMES]);
    for (const routine of missingRoutines(installed)) {
      await txQuery(tx, routine.definition(quotedSchema), []);
      applied.routines.push(routine.name);
    }
    return applied;
  });
}

/** What one `migrate()` changed, for the logger: nothing at all when the schema was current. */
export interface AppliedMigrations {
  /** Schema version found under the lock. */
  from: number;
  applied: Array<{ version: number; name: string }>;
  /** Routines (re)installed. */
  routines: string[];
}

/** One statement `migrate()` would run, for review before it runs. */
export interface PlannedStatement {
  readonly kind: 'bookkeeping' | 'migration' | 'routine';
  /** `migration 2 (lease_ranges)`, `routine rheo_claim_…`, or `bookkeeping`. */
  readonly label: string;
  readonly sql: string;
}

/**
 * What `migrate()` would run now against this schema, in order, without
 * running it: the pending numbered migrations (each followed by the row that
 * records it) and the routines not yet installed. Read-only, so a DBA can
 * review the exact SQL before granting DDL to anyone.
 */
export async function planMigration(db: Database, schema: string, quotedSchema: string): Promise<PlannedStatement[]> {
  const action = { action: `plan the migration of schema "${schema}"`, writes: false };
  const [table] = await db.query<{ present: boolean }>(
    action,
    'SELECT to_regclass($1) IS NOT NULL AS present',
    [`${quotedSchema}.migrations`],
  );
  let current = 0;
  if (table?.present) {
    const [row] = await db.query<{ version: number | null }>(action, `SELECT max(version) AS version FROM ${quotedSchema}.migrations`, []);
    current = row?.version ?? 0;
  }
  if (current > LATEST_VERSION) throw newerSchema(schema, current);
  const plan: PlannedStatement[] = [];
  if (!table?.present) {
    plan.push({ kind: 'bookkeeping', label: 'bookkeeping', sql: `CREATE SCHEMA IF NOT EXISTS ${quotedSchema};` });
    plan.push({
      kind: 'bookkeeping',
      label: 'bookkeeping',
      sql: `CREATE TABLE IF NOT EXISTS ${quotedSchema}.migrations (\n  version    integer PRIMARY KEY,\n  name       text NOT NULL,\n  applied_at timestamptz NOT NULL DEFAULT now()\n);`,
    });
  }
  for (const migration of MIGRATIONS) {
    if (migration.version <= current) continue;
    plan.push({ kind: 'migration', label: `migration ${migration.version} (${migration.name})`, sql: renderMigration(migration, quotedSchema).trim() });
    plan.push({
      kind: 'bookkeeping',
      label: 'bookkeeping',
      sql: `INSERT INTO ${quotedSchema}.migrations (version, name) VALUES (${migration.version}, '${migration.name}');`,
    });
  }
  const installed = await db.query<InstalledRoutine>(action, INSTALLED_ROUTINES_SQL, [schema, ROUTINE_NAMES]);
  for (const routine of missingRoutines(installed)) {
    plan.push({ kind: 'routine', label: `routine ${routine.name}`, sql: `${routine.definition(quotedSchema).trim()};` });
  }
  return plan;
}

interface InstalledRoutine {
  proname: string;
}

/** Which of this version's routines (routines.ts) exist in the schema: `migrate()` and its plan ask alike. */
const INSTALLED_ROUTINES_SQL = `SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = $1 AND p.proname = ANY ($2::text[])`;
const ROUTINE_NAMES = ROUTINES.map((r) => r.name);

/** Routine names carry a hash of their body, so a missing name is a changed or new routine. */
function missingRoutines(installed: InstalledRoutine[]): readonly Routine[] {
  const present = new Set(installed.map((r) => r.proname));
  return ROUTINES.filter((routine) => !present.has(routine.name));
}

function newerSchema(schema: string, current: number): RheoError {
  return new RheoError(
    'schema_version',
    `schema "${schema}" is at migration ${current}, newer than this rheo knows (${LATEST_VERSION}); upgrade rheo before using it`,
  );
}

/**
 * The check a backend makes before its first statement when it did not run
 * migrate() itself: the schema must be at exactly this rheo's version. A
 * missing schema or migrations table is classified as `schema_version` too.
 */
export async function checkSchemaVersion(db: Database, schema: string, quotedSchema: string): Promise<void> {
  const [row] = await db.query<{ version: number | null }>(
    { action: `check the migration version of schema "${schema}"`, writes: false },
    `SELECT max(version) AS version FROM ${quotedSchema}.migrations`,
    [],
  );
  const current = row?.version ?? 0;
  if (current > LATEST_VERSION) throw newerSchema(schema, current);
  if (current < LATEST_VERSION) {
    throw new RheoError(
      'schema_version',
      `schema "${schema}" is at migration ${current} but this rheo needs ${LATEST_VERSION}; call rheo.migrate()`,
    );
  }
}

/**
 * SQLSTATEs of a CREATE that met an object of the same name: duplicate
 * table (relations and indexes share one namespace), duplicate object,
 * duplicate function.
 */
const DUPLICATE_OBJECT_STATES = new Set(['42P07', '42710', '42723']);

/**
 * Before a migration's DDL: relations (tables, indexes) of the names the
 * pending migrations create that already exist in the schema, so the error
 * names every such object, not only the first one PostgreSQL would hit. A
 * function of a taken name and signature is caught when it is created.
 */
async function checkFreeNames(tx: Queryable, schema: string, pending: readonly Migration[]): Promise<void> {
  const wanted = pending.flatMap((migration) => createdNames(migration).relations);
  if (wanted.length === 0) return;
  const taken = await txQuery<{ relname: string; kind: string }>(
    tx,
    `SELECT c.relname, CASE c.relkind WHEN 'r' THEN 'table' WHEN 'p' THEN 'table' WHEN 'i' THEN 'index' WHEN 'I' THEN 'index'
            WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'S' THEN 'sequence' ELSE 'relation' END AS kind
       FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = ANY ($2::text[])
      ORDER BY c.relname`,
    [schema, wanted],
  );
  if (taken.length > 0) {
    throw schemaConflict(schema, taken.map((t) => `${t.kind} "${t.relname}"`).join(', '));
  }
}

/**
 * Tables, indexes and functions a migration creates by name, read from its
 * SQL. Names PostgreSQL picks itself (primary keys, identity sequences)
 * step around existing ones and cannot collide. A name the same migration
 * first renames away (migration 9 renames rheo's own `events` to `events_0`,
 * then creates the partitioned `events`) is its own object, not a conflict.
 */
function createdNames(migration: Migration): { relations: string[]; functions: string[] } {
  const renamed = new Set(
    [...migration.sql.matchAll(/ALTER\s+(?:TABLE|INDEX)\s+(?::schema\.)?([a-z_][a-z0-9_]*)\s+RENAME\s+TO\b/gi)].map((m) => m[1]!),
  );
  const relations: string[] = [];
  const functions: string[] = [];
  for (const m of migration.sql.matchAll(/CREATE\s+(?:UNIQUE\s+)?(TABLE|INDEX|FUNCTION)\s+(?::schema\.)?([a-z_][a-z0-9_]*)/gi)) {
    if (m[1]!.toUpperCase() === 'FUNCTION') functions.push(m[2]!);
    else if (!renamed.has(m[2]!)) relations.push(m[2]!);
  }
  return { relations, functions };
}

/**
 * A `migrations` table rheo did not create (another tool's ledger in a
 * shared schema such as `public`) must not be read as rheo's: its columns
 * are checked before its rows are.
 */
async function checkLedger(tx: Queryable, schema: string): Promise<void> {
  const columns = await txQuery<{ attname: string; type: string }>(
    tx,
    `SELECT a.attname, format_type(a.atttypid, a.atttypmod) AS type
       FROM pg_catalog.pg_attribute a
       JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = 'migrations' AND a.attnum > 0 AND NOT a.attisdropped`,
    [schema],
  );
  const found = new Map(columns.map((c) => [c.attname, c.type]));
  const rheoShape =
    columns.length === 3 &&
    found.get('version') === 'integer' &&
    found.get('name') === 'text' &&
    found.get('applied_at') === 'timestamp with time zone';
  if (!rheoShape) throw schemaConflict(schema, 'table "migrations" (not rheo\'s migration ledger)');
}

/**
 * The schema already holds objects of names rheo creates (`schema:
 * 'public'` beside an application's own `events` table, say). Nothing is
 * written: the migration's transaction rolls back whole.
 */
function schemaConflict(schema: string, objects: string, cause?: unknown): RheoError {
  return new RheoError(
    'schema_conflict',
    `cannot migrate schema "${schema}": it already holds ${objects}, and rheo creates objects of those names. rheo needs a schema of its own: pass another \`schema\` (the default is "rheo"), or move those objects; nothing was changed`,
    { cause },
  );
}
