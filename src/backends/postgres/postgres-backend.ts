import pg from 'pg';
import type {
  Backend,
  AppendOutcome,
  BackendCapabilities,
  FetchRequest,
  GroupSpec,
  GroupStart,
  GroupStorageStats,
  LeaseRef,
  NormalizedQuery,
  NormalizedReplay,
  OwnedTransaction,
  PreparedAppend,
  RenewResult,
  SettleOp,
  SettleOutcome,
  TransactionClient,
} from '../../core/backend.js';
import type { Clock } from '../../core/clock.js';
import { RheoError, invalidArgument, isRheoError } from '../../core/errors.js';
import { encodeQueryCursor } from '../../core/query-cursor.js';
import type { DeadLetter, GroupInfo, LagReport, Lease, QueryResult, RheoEvent, StreamInfo } from '../../core/types.js';
import { appendEvents } from './append.js';
import { Catalog, checkPartitions } from './catalog.js';
import { Database } from './connection.js';
import {
  groupCounts,
  lagReport,
  listDeadLetters,
  redrive,
  replayGroup,
  resetGroup,
  startParams,
} from './group-admin.js';
import { fetchLeases, renewLeases, settleLeases, type LeaseContext } from './leases.js';
import { checkSchemaVersion, migrate, planMigration, type PlannedStatement } from './migrate.js';
import { AppendListener } from './notifications.js';
import { nowParam, toEvent, type EventRow } from './rows.js';
import { notifyChannel, quoteSchema } from './schema-name.js';
import { buildQuery } from './sql/query.js';
import { renderStatements, type Statements } from './statements.js';
import { PostgresOwnedTransaction, PostgresTransactionScope, type ScopeDeps } from './transaction.js';
import { classifyError } from './errors.js';
import { asError } from './connection.js';

/** Where rheo's connections come from: a connection string (rheo owns the pool) or a borrowed pool. */
export type PostgresConnection =
  | { connectionString: string; pool?: undefined; poolConfig?: Omit<pg.PoolConfig, 'connectionString'> }
  | { pool: pg.Pool; connectionString?: undefined; poolConfig?: undefined };

export interface PostgresBackendOptions {
  /** Schema holding rheo's tables; `^[a-z_][a-z0-9_]{0,62}$`. Default `rheo`. */
  schema?: string;
  /**
   * Time authority for leases, delays and dead-letter times. Default: the
   * database clock (`now()`), so workers with skewed clocks cannot steal live
   * leases. Inject a clock (e.g. `ManualClock`) only for tests or when every
   * process shares one trustworthy clock.
   */
  clock?: Clock;
  /** Send one NOTIFY per append call so `waitForAppend` wakes promptly. Default true. */
  notify?: boolean;
}

export type PostgresBackendConfig = PostgresConnection & PostgresBackendOptions;

/**
 * A durable, distributed backend on PostgreSQL. Call `migrate()` once per
 * schema (it is idempotent and safe to race) before using it.
 *
 *     postgresBackend({ connectionString }, { schema: 'rheo' })
 *     postgresBackend({ pool })                // borrowed: never ended by rheo
 *     postgresBackend({ pool, schema: 'events', notify: false })
 */
export function postgresBackend(connection: PostgresBackendConfig, options: PostgresBackendOptions = {}): PostgresBackend {
  return new PostgresBackend(connection, options);
}

export class PostgresBackend implements Backend {
  readonly name = 'postgres';
  readonly capabilities: BackendCapabilities = Object.freeze({
    durable: true,
    distributed: true,
    notifications: true,
    transactions: true,
    partitionOwnership: false,
    cluster: false,
  });
  readonly schema: string;
  readonly #db: Database;
  readonly #sql: Statements;
  readonly #quotedSchema: string;
  readonly #clock: Clock | null;
  readonly #notify: boolean;
  readonly #channel: string;
  readonly #catalog: Catalog;
  readonly #ctx: LeaseContext;
  readonly #listener: AppendListener;
  readonly #scopeDeps: ScopeDeps;
  #closing: Promise<void> | null = null;
  #schemaOk = false;
  #schemaCheck: Promise<void> | null = null;

  constructor(connection: PostgresBackendConfig, options: PostgresBackendOptions = {}) {
    if (connection === null || typeof connection !== 'object') {
      throw invalidArgument('postgresBackend expects { connectionString } or { pool }');
    }
    const merged: PostgresBackendOptions = {
      schema: options.schema ?? connection.schema,
      clock: options.clock ?? connection.clock,
      notify: options.notify ?? connection.notify,
    };
    this.schema = merged.schema ?? 'rheo';
    this.#quotedSchema = quoteSchema(this.schema);
    if (merged.clock !== undefined && (merged.clock === null || typeof merged.clock.now !== 'function')) {
      throw invalidArgument('postgresBackend clock must have a now() method returning epoch milliseconds');
    }
    this.#clock = merged.clock ?? null;
    this.#notify = merged.notify ?? true;
    this.#channel = notifyChannel(this.schema);

    let clientConfig: pg.ClientConfig;
    if (connection.pool !== undefined) {
      if (!(connection.pool instanceof pg.Pool) && typeof (connection.pool as { connect?: unknown }).connect !== 'function') {
        throw invalidArgument('postgresBackend pool must be a pg.Pool');
      }
      if (connection.connectionString !== undefined) {
        throw invalidArgument('postgresBackend takes either connectionString or pool, not both');
      }
      this.#db = new Database(connection.pool, false);
      clientConfig = { ...(connection.pool.options as pg.ClientConfig) };
    } else if (typeof connection.connectionString === 'string' && connection.connectionString.length > 0) {
      clientConfig = { ...connection.poolConfig, connectionString: connection.connectionString };
      this.#db = new Database(new pg.Pool({ application_name: 'rheo', ...clientConfig }), true);
    } else {
      throw invalidArgument('postgresBackend expects { connectionString } or { pool }');
    }

    this.#sql = renderStatements(this.#quotedSchema);
    this.#catalog = new Catalog(this.#db, this.#sql);
    const clock = this.#clock;
    this.#ctx = {
      db: this.#db,
      sql: this.#sql,
      catalog: this.#catalog,
      now: () => nowParam(clock ? clock.now() : null),
      rotation: new Map(),
    };
    this.#scopeDeps = {
      ctx: this.#ctx,
      catalog: this.#catalog,
      target: { clock: this.#clock, channel: this.#channel, notify: this.#notify },
      ensureSchema: () => this.#ensureSchema(),
    };
    this.#listener = new AppendListener(
      () => new pg.Client({ ...clientConfig, application_name: `rheo-listen:${this.schema}` }),
      `"${this.#channel}"`,
    );
  }

  /** The connection pool in use (borrowed or owned). */
  get pool(): pg.Pool {
    return this.#db.pool;
  }

  /** True while the LISTEN connection is up. */
  get listening(): boolean {
    return this.#listener.listening;
  }

  /** Opens the LISTEN connection now rather than on the first waitForAppend. */
  listen(): Promise<void> {
    return this.#listener.ready();
  }

  async migrate(): Promise<void> {
    await migrate(this.#db, this.schema, this.#quotedSchema);
    this.#schemaOk = true;
  }

  /** The SQL `migrate()` would run now, in order, without running it (`rheo migrate --print-sql`). */
  planMigration(): Promise<PlannedStatement[]> {
    return planMigration(this.#db, this.schema, this.#quotedSchema);
  }

  /**
   * Before its first statement, a backend that did not migrate the schema
   * itself checks that the schema is at the version this rheo was written
   * for (one query, once): a newer rheo's schema may hold state this code
   * would misread, and an older one lacks tables and routines it needs.
   * A failed check is repeated on the next call.
   */
  #ensureSchema(): Promise<void> {
    if (this.#schemaOk) return Promise.resolve();
    const check =
      this.#schemaCheck ??
      checkSchemaVersion(this.#db, this.schema, this.#quotedSchema).then(
        () => {
          this.#schemaOk = true;
        },
        (error: unknown) => {
          this.#schemaCheck = null;
          throw error;
        },
      );
    this.#schemaCheck = check;
    return check;
  }

  /**
   * One statement, without the schema check (ping must answer for an
   * unmigrated schema too): a missing schema or ledger is version `null`.
   */
  async ping(): Promise<number | null> {
    try {
      const [row] = await this.#db.query<{ version: number | null }>(
        { action: `ping schema "${this.schema}"`, writes: false },
        `SELECT max(version) AS version FROM ${this.#quotedSchema}.migrations`,
        [],
      );
      return row?.version ?? null;
    } catch (error) {
      if (isRheoError(error, 'schema_version')) return null;
      throw error;
    }
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#listener.close();
      await this.#db.end();
    })();
    return this.#closing;
  }

  async createStream(name: string, partitions: number): Promise<void> {
    await this.#ensureSchema();
    const rows = await this.#db.query(
      { action: `create stream "${name}"`, stream: name, writes: true },
      this.#sql.createStream,
      [name, partitions, this.#ctx.now()],
    );
    if (rows.length === 0) {
      throw new RheoError('already_exists', `stream "${name}" already exists`, { stream: name });
    }
  }

  async listStreams(): Promise<StreamInfo[]> {
    await this.#ensureSchema();
    const rows = await this.#db.query<{ name: string; partitions: number; created_at_ms: number }>(
      { action: 'list streams', writes: false },
      this.#sql.listStreams,
      [],
    );
    return rows.map((r) => ({ name: r.name, partitions: r.partitions, createdAt: new Date(r.created_at_ms) }));
  }

  async createGroup(stream: string, group: string, spec: GroupSpec): Promise<void> {
    await this.#ensureSchema();
    const s = await this.#catalog.stream(stream);
    const start = startParams(s, spec.start);
    const rows = await this.#db.query(
      { action: `create group "${group}" on stream "${stream}"`, stream, group, writes: true },
      this.#sql.createGroup,
      [s.id, group, spec.maxAttempts, this.#ctx.now(), ...start],
    );
    if (rows.length === 0) {
      throw new RheoError('already_exists', `group "${group}" already exists on stream "${stream}"`, { stream, group });
    }
  }

  async listGroups(stream: string): Promise<string[]> {
    await this.#ensureSchema();
    const s = await this.#catalog.stream(stream);
    const rows = await this.#db.query<{ name: string }>(
      { action: `list groups of stream "${stream}"`, stream, writes: false },
      this.#sql.listGroups,
      [s.id],
    );
    return rows.map((r) => r.name);
  }

  async append(stream: string, inputs: PreparedAppend[]): Promise<AppendOutcome[]> {
    await this.#ensureSchema();
    const s = await this.#catalog.stream(stream);
    const { outcomes, wrote } = await appendEvents(this.#ctx, s, inputs, {
      clock: this.#clock,
      channel: this.#channel,
      notify: this.#notify,
    });
    if (wrote) this.#listener.wake(stream);
    return outcomes;
  }

  async read(stream: string, partition: number, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    await this.#ensureSchema();
    const s = await this.#catalog.stream(stream);
    checkPartitions(s, [partition]);
    const rows = await this.#db.query<EventRow>(
      { action: `read stream "${stream}"`, stream, writes: false },
      this.#sql.read,
      [s.id, partition, after, limit, maxBytes],
    );
    return rows.map((r) => toEvent(stream, r));
  }

  async query(stream: string, query: NormalizedQuery): Promise<QueryResult> {
    await this.#ensureSchema();
    const s = await this.#catalog.stream(stream);
    if (query.partition !== null) checkPartitions(s, [query.partition]);
    const { text, values } = buildQuery(this.#quotedSchema, s.id, query);
    const rows = await this.#db.query<EventRow & { matched: string }>(
      { action: `query stream "${stream}"`, stream, writes: false },
      text,
      values,
    );
    const events = rows.map((r) => toEvent(stream, r));
    const last = events[events.length - 1];
    // Cut by the limit, or by the byte budget before all matched rows of the page.
    const cut = events.length === query.limit || (rows.length > 0 && events.length < Number(rows[0]!.matched));
    const nextCursor =
      last && cut
        ? encodeQueryCursor({ timestampMs: last.timestamp.getTime(), partition: last.partition, sequence: last.sequence })
        : null;
    return { events, nextCursor };
  }

  fetch(stream: string, group: string, request: FetchRequest): Promise<Lease[]> {
    return this.#schemaOk ? fetchLeases(this.#ctx, stream, group, request) : this.#ensureSchema().then(() => fetchLeases(this.#ctx, stream, group, request));
  }

  renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    return this.#schemaOk ? renewLeases(this.#ctx, refs, leaseMs) : this.#ensureSchema().then(() => renewLeases(this.#ctx, refs, leaseMs));
  }

  settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    return this.#schemaOk ? settleLeases(this.#ctx, ops) : this.#ensureSchema().then(() => settleLeases(this.#ctx, ops));
  }

  async lag(stream: string, group: string): Promise<LagReport> {
    await this.#ensureSchema();
    return lagReport(this.#ctx, await this.#catalog.group(stream, group));
  }

  async replay(stream: string, group: string, spec: NormalizedReplay, partitions: number[] | null): Promise<void> {
    await this.#ensureSchema();
    await replayGroup(this.#ctx, await this.#catalog.group(stream, group), spec, partitions);
  }

  async resetGroup(stream: string, group: string, start: GroupStart): Promise<void> {
    await this.#ensureSchema();
    await resetGroup(this.#ctx, await this.#catalog.group(stream, group), start);
  }

  async groupInfo(stream: string, group: string): Promise<GroupInfo> {
    await this.#ensureSchema();
    const g = await this.#catalog.group(stream, group);
    const lag = await lagReport(this.#ctx, g);
    const counts = await groupCounts(this.#ctx, g);
    return { stream, group, maxAttempts: g.maxAttempts, lag, inflight: counts.inflight, deadLetters: counts.dead_letters };
  }

  async deadLetters(stream: string, group: string, limit: number, after: string | null, maxBytes: number): Promise<DeadLetter[]> {
    await this.#ensureSchema();
    return listDeadLetters(this.#ctx, await this.#catalog.group(stream, group), limit, after, maxBytes);
  }

  async redrive(stream: string, group: string, eventIds: string[] | null): Promise<number> {
    await this.#ensureSchema();
    return redrive(this.#ctx, await this.#catalog.group(stream, group), eventIds);
  }

  /**
   * Binds append and settle to `client`, a `pg` client (`pg.Client` or a
   * checked-out `pg.PoolClient`) on which the application ran BEGIN. See
   * transaction.ts for what the locks taken there mean for other callers.
   */
  transaction(client: TransactionClient): PostgresTransactionScope {
    if (client === null || typeof client !== 'object' || typeof (client as { query?: unknown }).query !== 'function') {
      throw invalidArgument('transaction expects a pg client (pg.Client or a checked-out pg.PoolClient) with a transaction begun on it');
    }
    return new PostgresTransactionScope(client, this.#scopeDeps);
  }

  /** BEGIN on a connection of rheo's pool; commit() or rollback() gives it back. */
  async beginTransaction(): Promise<OwnedTransaction> {
    await this.#ensureSchema();
    const ctx = { action: 'begin a transaction', writes: false };
    const held = await this.#db.connect(ctx);
    try {
      await held.connection.query('BEGIN');
    } catch (error) {
      held.release(asError(error));
      throw classifyError(error, { ...ctx, sent: true });
    }
    return new PostgresOwnedTransaction(held, this.#scopeDeps, (streams) => {
      for (const stream of streams) this.#listener.wake(stream);
    });
  }

  waitForAppend(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.#closing) return Promise.resolve(false);
    return this.#listener.wait(stream, timeoutMs, signal);
  }

  async storageStats(stream: string, group: string): Promise<GroupStorageStats> {
    await this.#ensureSchema();
    const counts = await groupCounts(this.#ctx, await this.#catalog.group(stream, group));
    return { deliveries: counts.deliveries, deadLetters: counts.dead_letters };
  }
}
