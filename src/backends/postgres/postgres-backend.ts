import pg from 'pg';
import type {
  AppendOutcome,
  Backend,
  BackendCapabilities,
  CommitOp,
  FetchRequest,
  GroupMembership,
  GroupSpec,
  GroupStart,
  GroupStorageStats,
  HeartbeatRequest,
  LeaseRef,
  MemberView,
  NormalizedQuery,
  NormalizedReplay,
  OwnedTransaction,
  OwnershipFence,
  PreparedAppend,
  RenewResult,
  RetentionPolicy,
  SettleOp,
  SettleOutcome,
  TransactionClient,
  TransactionScope,
  TrimReport,
  TrimRequest,
} from '../../core/backend.js';
import { isRheoError } from '../../core/errors.js';
import { log, silentLogger, type Logger } from '../../core/logger.js';
import type { DeadLetter, GroupInfo, LagReport, Lease, QueryResult, RheoEvent, StreamInfo } from '../../core/types.js';
import { Database } from './connection.js';
import { PostgresLeases } from './leases.js';
import { PostgresLog } from './log.js';
import { migrate, planMigration, type PlannedStatement } from './migrate.js';
import { LATEST_VERSION } from './migrations/index.js';
import { resolveOptions, type PostgresBackendConfig, type PostgresBackendOptions } from './options.js';
import { PostgresOwnership } from './ownership.js';
import { PostgresProgress } from './progress.js';
import { PostgresRetention } from './retention.js';
import { postgresStoreId } from './store-id.js';
import { PostgresStore } from './store.js';
import { beginOwnedTransaction, openTransactionScope, type ScopeDeps } from './transaction.js';

export type { PostgresBackendConfig, PostgresBackendOptions, PostgresConnection } from './options.js';

/**
 * A durable, distributed backend on PostgreSQL. Call `migrate()` once per
 * schema (it is idempotent and safe to race) before using it.
 *
 *     postgresBackend({ connectionString }, { schema: 'rheo' })
 *     postgresBackend({ pool })                // borrowed: never ended by rheo
 *     postgresBackend({ pool, schema: 'events', notify: false })
 *     postgresBackend({ connectionString: pgbouncerUrl, pooler: 'transaction', listenConnectionString: directUrl })
 */
export function postgresBackend(connection: PostgresBackendConfig, options: PostgresBackendOptions = {}): PostgresBackend {
  return new PostgresBackend(connection, options);
}

/**
 * The backend assembled from its concerns over one `PostgresStore`
 * (store.ts): log.ts (with notifications), leases.ts, progress.ts,
 * ownership.ts and retention.ts, each of which implements its part of the
 * contract, and transaction.ts; the lifecycle (migrate, ping, close) is here.
 */
export class PostgresBackend implements Backend {
  // 'pglite': the PGlite backend is this backend on PGlite's one session (backends/pglite).
  readonly name: 'postgres' | 'pglite' = 'postgres';
  readonly capabilities: BackendCapabilities = Object.freeze({
    durable: true,
    distributed: true,
    notifications: true,
    blockingFetch: false,
    transactions: true,
    partitionOwnership: true,
    retention: true,
    cluster: false,
  });
  readonly schema: string;
  readonly storeId: string;
  /** `'transaction'` when a transaction-mode pooler is in between (the option of that name). */
  readonly pooler: 'transaction' | 'none';
  /** The pool, statements, catalog, clock, segment roller and LISTEN connection every concern shares (store.ts). */
  readonly #store: PostgresStore;
  readonly #log: PostgresLog;
  readonly #leases: PostgresLeases;
  readonly #progress: PostgresProgress;
  readonly #ownership: PostgresOwnership;
  readonly #retention: PostgresRetention;
  readonly #scopeDeps: ScopeDeps;
  #logger: Logger = silentLogger;

  constructor(connection: PostgresBackendConfig, options: PostgresBackendOptions = {}) {
    const resolved = resolveOptions(connection, options);
    const { schema, pooler, clientConfig, listenUrl } = resolved;
    this.schema = schema;
    this.pooler = pooler;
    const db =
      resolved.borrowedPool !== null
        ? new Database(resolved.borrowedPool, false)
        : new Database(new pg.Pool({ application_name: 'rheo', ...resolved.poolConfig }), true);
    this.storeId = postgresStoreId(clientConfig, schema);
    const listenConfig: pg.ClientConfig | null =
      listenUrl !== undefined ? { connectionString: listenUrl } : pooler === 'transaction' ? null : clientConfig;
    const store = new PostgresStore({
      db,
      schema,
      quotedSchema: resolved.quotedSchema,
      clock: resolved.clock,
      notify: resolved.notify,
      segmentEvents: resolved.segmentEvents,
      genericPlanSegments: resolved.genericPlanSegments,
      named: pooler !== 'transaction',
      listenClient:
        resolved.listenClient ?? (listenConfig && (() => new pg.Client({ ...listenConfig, application_name: `rheo-listen:${schema}` }))),
    });
    this.#store = store;
    this.#log = new PostgresLog(store);
    this.#leases = new PostgresLeases(store);
    this.#progress = new PostgresProgress(store);
    this.#ownership = new PostgresOwnership(store);
    this.#retention = new PostgresRetention(store);
    this.#scopeDeps = { ctx: store, catalog: store.catalog, target: store.target, ensureSchema: () => store.ensureSchema() };
  }

  /** The connection pool in use (borrowed or owned). */
  get pool(): pg.Pool {
    return this.#store.db.pool;
  }

  /** True while the LISTEN connection is up. */
  get listening(): boolean {
    return this.#store.listener.listening;
  }

  /** Opens the LISTEN connection now rather than on the first waitForAppend. */
  listen(): Promise<void> {
    return this.#store.listener.ready();
  }

  // ---- lifecycle -----------------------------------------------------------

  async migrate(): Promise<void> {
    const changed = await migrate(this.#store.db, this.schema, this.#store.quotedSchema);
    this.#store.migrated();
    if (changed.applied.length > 0 || changed.routines.length > 0) {
      log(this.#logger, 'info', {
        schema: this.schema,
        fromVersion: changed.from,
        migrations: changed.applied.map((m) => `${m.version}_${m.name}`),
        routines: changed.routines,
      }, `rheo migrated schema "${this.schema}" from version ${changed.from} to ${LATEST_VERSION}`);
    } else {
      log(this.#logger, 'debug', { schema: this.schema, version: changed.from }, `rheo schema "${this.schema}" is up to date`);
    }
  }

  useLogger(logger: Logger): void {
    this.#logger = logger;
    this.#store.listener.useLogger(logger, this.schema);
  }

  /** The SQL `migrate()` would run now, in order, without running it (`rheo migrate --print-sql`). */
  planMigration(): Promise<PlannedStatement[]> {
    return planMigration(this.#store.db, this.schema, this.#store.quotedSchema);
  }

  /**
   * One statement, without the schema check (ping must answer for an
   * unmigrated schema too): a missing schema or ledger is version `null`.
   */
  async ping(): Promise<number | null> {
    try {
      const [row] = await this.#store.db.query<{ version: number | null }>(
        { action: `ping schema "${this.schema}"`, writes: false },
        `SELECT max(version) AS version FROM ${this.#store.quotedSchema}.migrations`,
        [],
      );
      return row?.version ?? null;
    } catch (error) {
      if (isRheoError(error, 'schema_version')) return null;
      throw error;
    }
  }

  close(): Promise<void> {
    return this.#store.close();
  }

  // ---- the log (log.ts) ------------------------------------------------------

  createStream(name: string, partitions: number, retention: RetentionPolicy | null = null): Promise<void> {
    return this.#log.createStream(name, partitions, retention);
  }

  listStreams(): Promise<StreamInfo[]> {
    return this.#log.listStreams();
  }

  append(stream: string, inputs: PreparedAppend[]): Promise<AppendOutcome[]> {
    return this.#log.append(stream, inputs);
  }

  read(stream: string, partition: number, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    return this.#log.read(stream, partition, after, limit, maxBytes);
  }

  query(stream: string, query: NormalizedQuery): Promise<QueryResult> {
    return this.#log.query(stream, query);
  }

  waitForAppend(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    return this.#log.waitForAppend(stream, timeoutMs, signal);
  }

  // ---- groups and leases (leases.ts) -------------------------------------------

  createGroup(stream: string, group: string, spec: GroupSpec): Promise<void> {
    return this.#leases.createGroup(stream, group, spec);
  }

  listGroups(stream: string): Promise<string[]> {
    return this.#leases.listGroups(stream);
  }

  fetch(stream: string, group: string, request: FetchRequest): Promise<Lease[]> {
    return this.#leases.fetch(stream, group, request);
  }

  renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    return this.#leases.renew(refs, leaseMs);
  }

  settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    return this.#leases.settle(ops);
  }

  // ---- progress (progress.ts) ----------------------------------------------------

  lag(stream: string, group: string, partitions: number[] | null = null): Promise<LagReport> {
    return this.#progress.lag(stream, group, partitions);
  }

  replay(stream: string, group: string, spec: NormalizedReplay, partitions: number[] | null): Promise<void> {
    return this.#progress.replay(stream, group, spec, partitions);
  }

  resetGroup(stream: string, group: string, start: GroupStart, partitions: number[] | null = null): Promise<void> {
    return this.#progress.resetGroup(stream, group, start, partitions);
  }

  groupInfo(stream: string, group: string): Promise<GroupInfo> {
    return this.#progress.groupInfo(stream, group);
  }

  deadLetters(stream: string, group: string, limit: number, after: string | null, maxBytes: number): Promise<DeadLetter[]> {
    return this.#progress.deadLetters(stream, group, limit, after, maxBytes);
  }

  redrive(stream: string, group: string, eventIds: string[] | null): Promise<number> {
    return this.#progress.redrive(stream, group, eventIds);
  }

  storageStats(stream: string, group: string): Promise<GroupStorageStats> {
    return this.#progress.storageStats(stream, group);
  }

  // ---- retention and deletion (retention.ts) -------------------------------------

  setRetention(stream: string, retention: RetentionPolicy | null): Promise<void> {
    return this.#retention.setRetention(stream, retention);
  }

  trim(stream: string, request: TrimRequest): Promise<TrimReport> {
    return this.#retention.trim(stream, request);
  }

  deleteGroup(stream: string, group: string): Promise<void> {
    return this.#retention.deleteGroup(stream, group);
  }

  deleteStream(stream: string): Promise<void> {
    return this.#retention.deleteStream(stream);
  }

  // ---- partition ownership (ownership.ts) -----------------------------------------

  heartbeat(stream: string, group: string, request: HeartbeatRequest): Promise<MemberView> {
    return this.#ownership.heartbeat(stream, group, request);
  }

  leaveGroup(stream: string, group: string, memberId: string): Promise<void> {
    return this.#ownership.leaveGroup(stream, group, memberId);
  }

  releasePartitions(fences: OwnershipFence[]): Promise<SettleOutcome[]> {
    return this.#ownership.releasePartitions(fences);
  }

  readOwned(fence: OwnershipFence, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    return this.#ownership.readOwned(fence, after, limit, maxBytes);
  }

  commit(ops: CommitOp[]): Promise<SettleOutcome[]> {
    return this.#ownership.commit(ops);
  }

  members(stream: string, group: string): Promise<GroupMembership> {
    return this.#ownership.members(stream, group);
  }

  // ---- transactions (transaction.ts) ---------------------------------------

  /**
   * Binds append and settle to `client`, a `pg` client (`pg.Client` or a
   * checked-out `pg.PoolClient`) on which the application ran BEGIN. See
   * transaction.ts for what the locks taken there mean for other callers.
   */
  transaction(client: TransactionClient): TransactionScope {
    return openTransactionScope(client, this.#scopeDeps);
  }

  /** BEGIN on a connection of rheo's pool; commit() or rollback() gives it back. */
  beginTransaction(): Promise<OwnedTransaction> {
    return beginOwnedTransaction(this.#scopeDeps, (streams) => {
      for (const stream of streams) this.#store.listener.wake(stream);
    });
  }
}
