import { assertKnownKeys, optionKeys } from '../../core/option-keys.js';
import pg from 'pg';
import type {
  Backend,
  AppendOutcome,
  BackendCapabilities,
  CommitOp,
  FetchRequest,
  GroupMembership,
  HeartbeatRequest,
  MemberView,
  OwnershipFence,
  GroupSpec,
  GroupStart,
  GroupStorageStats,
  LeaseRef,
  NormalizedQuery,
  NormalizedReplay,
  OwnedTransaction,
  PreparedAppend,
  RenewResult,
  RetentionPolicy,
  SettleOp,
  SettleOutcome,
  TrimReport,
  TrimRequest,
  TransactionClient,
  TransactionScope,
} from '../../core/backend.js';
import type { Clock } from '../../core/clock.js';
import { RheoError, invalidArgument, isRheoError } from '../../core/errors.js';
import { encodeQueryCursor } from '../../core/query-cursor.js';
import type { DeadLetter, GroupInfo, LagReport, Lease, QueryResult, RheoEvent, StreamInfo } from '../../core/types.js';
import { appendEvents } from './append.js';
import { DEFAULT_SEGMENT_EVENTS, SegmentRoller } from './segments.js';
import { checkStartScope } from '../../core/partition-scope.js';
import { Catalog, checkPartitions } from './catalog.js';
import { Database } from './connection.js';
import {
  groupCounts,
  lagReport,
  listDeadLetters,
  partitionCounts,
  redrive,
  replayGroup,
  resetGroup,
  startParams,
} from './group-admin.js';
import { fetchLeases, renewLeases, settleLeases, type LeaseContext } from './leases.js';
import { checkSchemaVersion, migrate, planMigration, type PlannedStatement } from './migrate.js';
import { AppendListener } from './notifications.js';
import * as ownership from './ownership.js';
import { log, silentLogger, type Logger } from '../../core/logger.js';
import { LATEST_VERSION } from './migrations/index.js';
import { nowParam, toEvent, type EventRow } from './rows.js';
import { notifyChannel, quoteSchema } from './schema-name.js';
import { buildQuery } from './sql/query.js';
import { renderRetentionStatements } from './sql/retention.js';
import {
  deleteGroup,
  deleteStream,
  purgeLeftovers,
  setRetention,
  trimStream,
  type RetentionContext,
} from './retention.js';
import { renderStatements, type Statements } from './statements.js';
import { postgresStoreId } from './store-id.js';
import { PostgresOwnedTransaction, PostgresTransactionScope, type ScopeDeps } from './transaction.js';
import { classifyError } from './errors.js';
import { asError } from './connection.js';

/** Where rheo's connections come from: a connection string (rheo owns the pool) or a borrowed pool. */
export type PostgresConnection =
  | { connectionString: string; pool?: undefined; poolConfig?: Omit<pg.PoolConfig, 'connectionString'>; listenClient?: undefined }
  | {
      pool: pg.Pool;
      connectionString?: undefined;
      poolConfig?: undefined;
      /**
       * Opens the connection that LISTENs for appends. Default: a `pg.Client`
       * with the pool's config. For a pool whose connections are not sockets
       * of their own (the PGlite backend's one in-process session).
       */
      listenClient?: () => pg.Client;
    };

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
  /**
   * Server-side bound on every statement rheo runs (PostgreSQL's
   * `statement_timeout`, set when rheo's pool opens a connection). A
   * statement that runs past it is rolled back whole and the call fails with
   * code `timeout`: nothing was written, reads and writes alike, so it is
   * safe to retry (docs/semantics.md, "Cancellation"). Only for a pool rheo
   * creates: for a borrowed pool, set `statement_timeout` in its config
   * (failures are classified the same way). Default: the server's setting.
   */
  statementTimeoutMs?: number;
  /**
   * The largest segment of the log, in events per partition (docs/storage.md).
   * A stream with `retention.maxEvents` uses a quarter of that (at least 256)
   * when smaller. Default 1,048,576.
   */
  segmentEvents?: number;
  /**
   * `'transaction'` when a transaction-mode connection pooler (PgBouncer with
   * `pool_mode = transaction`, Supavisor, RDS Proxy) sits between rheo and
   * PostgreSQL: consecutive statements may then run on different server
   * connections, so rheo sends no named prepared statements and keeps no
   * session state, and LISTEN (which needs a session) moves to
   * `listenConnectionString`. Default `'none'`: rheo talks to PostgreSQL
   * directly or through a session-mode pooler (docs/connection-poolers.md).
   */
  pooler?: 'transaction' | 'none';
  /**
   * Where the LISTEN connection goes, one per backend: a connection string
   * that reaches PostgreSQL directly (or through a session-mode pooler).
   * Default: the pool's own settings, except with `pooler: 'transaction'`,
   * where a LISTEN through the pooler would be lost with its server
   * connection: without this option rheo then logs a warning once and
   * consumers find new events by polling (`pollMs`).
   */
  listenConnectionString?: string;
}

export type PostgresBackendConfig = PostgresConnection & PostgresBackendOptions;

/** The keys of a `PostgresConnection` (one of `connectionString` and `pool`, with `poolConfig` or `listenClient`), and of the options; any other is refused. */
const CONNECTION_KEYS = ['connectionString', 'pool', 'poolConfig', 'listenClient'] as const;
const OPTION_KEYS = optionKeys<PostgresBackendOptions>()(
  'schema',
  'clock',
  'notify',
  'statementTimeoutMs',
  'segmentEvents',
  'pooler',
  'listenConnectionString',
);

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

export class PostgresBackend implements Backend {
  // 'pglite': the PGlite backend is this backend on PGlite's one session (backends/pglite).
  readonly name: 'postgres' | 'pglite' = 'postgres';
  readonly capabilities: BackendCapabilities = Object.freeze({
    durable: true,
    distributed: true,
    notifications: true,
    transactions: true,
    partitionOwnership: true,
    retention: true,
    cluster: false,
  });
  readonly schema: string;
  readonly storeId: string;
  /** `'transaction'` when a transaction-mode pooler is in between (the option of that name). */
  readonly pooler: 'transaction' | 'none';
  readonly #db: Database;
  readonly #segments: SegmentRoller;
  readonly #sql: Statements;
  readonly #quotedSchema: string;
  readonly #clock: Clock | null;
  readonly #notify: boolean;
  readonly #channel: string;
  readonly #catalog: Catalog;
  readonly #ctx: LeaseContext;
  readonly #rctx: RetentionContext;
  readonly #listener: AppendListener;
  #logger: Logger = silentLogger;
  readonly #scopeDeps: ScopeDeps;
  #closing: Promise<void> | null = null;
  #schemaOk = false;
  #schemaCheck: Promise<void> | null = null;

  constructor(connection: PostgresBackendConfig, options: PostgresBackendOptions = {}) {
    if (connection === null || typeof connection !== 'object') {
      throw invalidArgument('postgresBackend expects { connectionString } or { pool }');
    }
    assertKnownKeys('postgresBackend connection', connection, [...CONNECTION_KEYS, ...OPTION_KEYS]);
    assertKnownKeys('postgresBackend options', options, OPTION_KEYS);
    const merged: PostgresBackendOptions = {
      schema: options.schema ?? connection.schema,
      clock: options.clock ?? connection.clock,
      notify: options.notify ?? connection.notify,
      statementTimeoutMs: options.statementTimeoutMs ?? connection.statementTimeoutMs,
      segmentEvents: options.segmentEvents ?? connection.segmentEvents,
      pooler: options.pooler ?? connection.pooler,
      listenConnectionString: options.listenConnectionString ?? connection.listenConnectionString,
    };
    const segmentEvents = merged.segmentEvents ?? DEFAULT_SEGMENT_EVENTS;
    if (!Number.isSafeInteger(segmentEvents) || segmentEvents < 256 || segmentEvents > 2 ** 40) {
      throw invalidArgument(`postgresBackend segmentEvents must be an integer from 256 to 2^40, got ${String(merged.segmentEvents)}`);
    }
    const pooler = merged.pooler ?? 'none';
    if (pooler !== 'transaction' && pooler !== 'none') {
      throw invalidArgument(`postgresBackend pooler must be 'transaction' or 'none', got ${JSON.stringify(merged.pooler)}`);
    }
    const listenUrl = merged.listenConnectionString;
    if (listenUrl !== undefined && (typeof listenUrl !== 'string' || listenUrl.length === 0)) {
      throw invalidArgument('postgresBackend listenConnectionString must be a non-empty connection string');
    }
    this.pooler = pooler;
    const statementTimeoutMs = merged.statementTimeoutMs;
    if (
      statementTimeoutMs !== undefined &&
      (!Number.isSafeInteger(statementTimeoutMs) || statementTimeoutMs < 1 || statementTimeoutMs > 2_147_483_647)
    ) {
      throw invalidArgument(`postgresBackend statementTimeoutMs must be an integer from 1 to 2147483647, got ${String(statementTimeoutMs)}`);
    }
    if (statementTimeoutMs !== undefined && pooler === 'transaction') {
      // pg sends statement_timeout as a startup parameter, which PgBouncer
      // refuses ("unsupported startup parameter") and a pooler could not
      // keep per session anyway.
      throw invalidArgument(
        "postgresBackend statementTimeoutMs cannot be set with pooler: 'transaction'; set statement_timeout on the database role instead (ALTER ROLE ... SET statement_timeout = ...)",
      );
    }
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
      if (statementTimeoutMs !== undefined) {
        throw invalidArgument(
          'postgresBackend statementTimeoutMs applies to a pool rheo creates; set statement_timeout in the config of the pool you pass',
        );
      }
      this.#db = new Database(connection.pool, false);
      clientConfig = { ...(connection.pool.options as pg.ClientConfig) };
    } else if (typeof connection.connectionString === 'string' && connection.connectionString.length > 0) {
      clientConfig = { ...connection.poolConfig, connectionString: connection.connectionString };
      const poolConfig = statementTimeoutMs === undefined ? clientConfig : { ...clientConfig, statement_timeout: statementTimeoutMs };
      this.#db = new Database(new pg.Pool({ application_name: 'rheo', ...poolConfig }), true);
    } else {
      throw invalidArgument('postgresBackend expects { connectionString } or { pool }');
    }

    this.storeId = postgresStoreId(clientConfig, this.schema);
    this.#sql = renderStatements(this.#quotedSchema, pooler !== 'transaction');
    this.#catalog = new Catalog(this.#db, this.#sql);
    const clock = this.#clock;
    this.#ctx = {
      db: this.#db,
      sql: this.#sql,
      quotedSchema: this.#quotedSchema,
      catalog: this.#catalog,
      now: () => nowParam(clock ? clock.now() : null),
      rotation: new Map(),
    };
    const retention = renderRetentionStatements(this.#quotedSchema);
    this.#segments = new SegmentRoller(this.#db, retention.rollSegment, segmentEvents);
    this.#rctx = { ...this.#ctx, retention, schema: this.schema, segments: this.#segments };
    this.#scopeDeps = {
      ctx: this.#ctx,
      catalog: this.#catalog,
      target: { clock: this.#clock, channel: this.#channel, notify: this.#notify },
      ensureSchema: () => this.#ensureSchema(),
    };
    const listenConfig: pg.ClientConfig | null =
      listenUrl !== undefined ? { connectionString: listenUrl } : pooler === 'transaction' ? null : clientConfig;
    this.#listener = new AppendListener(
      connection.listenClient ??
        (listenConfig && (() => new pg.Client({ ...listenConfig, application_name: `rheo-listen:${this.schema}` }))),
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
    const changed = await migrate(this.#db, this.schema, this.#quotedSchema);
    this.#schemaOk = true;
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
    this.#listener.useLogger(logger, this.schema);
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

  async createStream(name: string, partitions: number, retention: RetentionPolicy | null = null): Promise<void> {
    await this.#ensureSchema();
    const rows = await this.#db.query(
      { action: `create stream "${name}"`, stream: name, writes: true },
      this.#sql.createStream,
      [name, partitions, this.#ctx.now(), retention?.maxAgeMs ?? null, retention?.maxEvents ?? null],
    );
    if (rows.length === 0) {
      throw new RheoError('already_exists', `stream "${name}" already exists`, { stream: name });
    }
    // Its first segment, so that its events never go to segment 0; if this gives up, its first append rolls.
    const created = await this.#catalog.stream(name);
    await this.#segments.roll(created.id, name);
  }

  async listStreams(): Promise<StreamInfo[]> {
    await this.#ensureSchema();
    const rows = await this.#db.query<{
      name: string;
      partitions: number;
      created_at_ms: number;
      retention_max_age_ms: number | null;
      retention_max_events: number | null;
      watermarks: Array<[number, number, number]> | null;
    }>({ action: 'list streams', writes: false }, this.#sql.listStreams, []);
    return rows.map((r) => {
      const watermarks: StreamInfo['watermarks'] = {};
      for (const [p, low, high] of r.watermarks ?? []) watermarks[p] = { lowWatermark: low, highWatermark: high };
      const hasRetention = r.retention_max_age_ms !== null || r.retention_max_events !== null;
      return {
        name: r.name,
        partitions: r.partitions,
        createdAt: new Date(r.created_at_ms),
        retention: hasRetention ? { maxAgeMs: r.retention_max_age_ms, maxEvents: r.retention_max_events } : null,
        watermarks,
      };
    });
  }

  async createGroup(stream: string, group: string, spec: GroupSpec): Promise<void> {
    await this.#ensureSchema();
    const s = await this.#catalog.stream(stream);
    const partitions = spec.partitions ?? null;
    if (partitions !== null) checkPartitions(s, partitions);
    const start = startParams(s, spec.start);
    if (spec.start.kind === 'after') {
      checkStartScope(stream, group, spec.start.perPartition, partitions ?? Array.from({ length: s.partitions }, (_, p) => p));
    }
    const rows = await this.#db.query(
      { action: `create group "${group}" on stream "${stream}"`, stream, group, writes: true },
      this.#sql.createGroup,
      [s.id, group, spec.maxAttempts, this.#ctx.now(), ...start, partitions],
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
    for (let attempt = 1; ; attempt++) {
      const s = await this.#catalog.stream(stream);
      try {
        const { outcomes, wrote } = await appendEvents(this.#ctx, s, inputs, {
          clock: this.#clock,
          channel: this.#channel,
          notify: this.#notify,
        });
        if (wrote) {
          this.#listener.wake(stream);
          await this.#segments.appended(s.id, stream, inputs.length);
        }
        return outcomes;
      } catch (error) {
        // A cached id of a stream another process deleted (and maybe re-created) stores nothing.
        if (attempt === 1 && isRheoError(error, 'internal') && !(await this.#catalog.revalidate(stream))) continue;
        throw error;
      }
    }
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
    if (rows.length === 0 && !(await this.#catalog.revalidate(stream))) return this.read(stream, partition, after, limit, maxBytes);
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
    const leases = this.#schemaOk ? fetchLeases(this.#ctx, stream, group, request) : this.#ensureSchema().then(() => fetchLeases(this.#ctx, stream, group, request));
    return leases.then(async (found) => {
      // Nothing under the cached ids: the group or stream may have been deleted (or re-created) elsewhere.
      if (found.length > 0 || (await this.#catalog.revalidate(stream, group))) return found;
      return fetchLeases(this.#ctx, stream, group, request);
    });
  }

  renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    return this.#schemaOk ? renewLeases(this.#ctx, refs, leaseMs) : this.#ensureSchema().then(() => renewLeases(this.#ctx, refs, leaseMs));
  }

  settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    return this.#schemaOk ? settleLeases(this.#ctx, ops) : this.#ensureSchema().then(() => settleLeases(this.#ctx, ops));
  }

  async lag(stream: string, group: string, partitions: number[] | null = null): Promise<LagReport> {
    await this.#ensureSchema();
    return lagReport(this.#ctx, await this.#catalog.group(stream, group), partitions);
  }

  async replay(stream: string, group: string, spec: NormalizedReplay, partitions: number[] | null): Promise<void> {
    await this.#ensureSchema();
    await replayGroup(this.#ctx, await this.#catalog.group(stream, group), spec, partitions);
  }

  async resetGroup(stream: string, group: string, start: GroupStart, partitions: number[] | null = null): Promise<void> {
    await this.#ensureSchema();
    await resetGroup(this.#ctx, await this.#catalog.group(stream, group), start, partitions);
  }

  async groupInfo(stream: string, group: string): Promise<GroupInfo> {
    await this.#ensureSchema();
    const g = await this.#catalog.group(stream, group);
    const lag = await lagReport(this.#ctx, g);
    // Totals are the partitions' sums, so the two always agree.
    const partitions = await partitionCounts(this.#ctx, g);
    let inflight = 0;
    let deadLetters = 0;
    for (const c of Object.values(partitions)) {
      inflight += c.inflight;
      deadLetters += c.deadLetters;
    }
    return { stream, group, maxAttempts: g.maxAttempts, lag, inflight, deadLetters, partitions };
  }

  async deadLetters(stream: string, group: string, limit: number, after: string | null, maxBytes: number): Promise<DeadLetter[]> {
    await this.#ensureSchema();
    return listDeadLetters(this.#ctx, await this.#catalog.group(stream, group), limit, after, maxBytes);
  }

  async redrive(stream: string, group: string, eventIds: string[] | null): Promise<number> {
    await this.#ensureSchema();
    return redrive(this.#ctx, await this.#catalog.group(stream, group), eventIds);
  }

  async setRetention(stream: string, retention: RetentionPolicy | null): Promise<void> {
    await this.#ensureSchema();
    await setRetention(this.#rctx, stream, retention);
  }

  async trim(stream: string, request: TrimRequest): Promise<TrimReport> {
    await this.#ensureSchema();
    // The background trimmer also finishes purging streams whose deleting process died.
    if (request.skipIfBusy) await purgeLeftovers(this.#rctx);
    const s = await this.#catalog.stream(stream);
    try {
      return await trimStream(this.#rctx, s, request);
    } catch (error) {
      if (isRheoError(error, 'stream_not_found')) this.#catalog.forgetStream(stream);
      throw error;
    }
  }

  async deleteGroup(stream: string, group: string): Promise<void> {
    await this.#ensureSchema();
    const g = await this.#catalog.group(stream, group);
    this.#catalog.forgetGroup(stream, group);
    await deleteGroup(this.#rctx, stream, group, g.id);
  }

  async deleteStream(stream: string): Promise<void> {
    await this.#ensureSchema();
    this.#catalog.forgetStream(stream);
    await deleteStream(this.#rctx, stream);
    this.#listener.wake(stream);
  }

  // ---- partition ownership (docs/design.md#two-ways-to-consume-a-group; ownership.ts) ----

  async heartbeat(stream: string, group: string, request: HeartbeatRequest): Promise<MemberView> {
    await this.#ensureSchema();
    return ownership.heartbeat(this.#ctx, stream, group, request);
  }

  async leaveGroup(stream: string, group: string, memberId: string): Promise<void> {
    await this.#ensureSchema();
    await ownership.leaveGroup(this.#ctx, stream, group, memberId);
  }

  async releasePartitions(fences: OwnershipFence[]): Promise<SettleOutcome[]> {
    await this.#ensureSchema();
    return ownership.releasePartitions(this.#ctx, fences);
  }

  async readOwned(fence: OwnershipFence, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    await this.#ensureSchema();
    return ownership.readOwned(this.#ctx, fence, after, limit, maxBytes);
  }

  async commit(ops: CommitOp[]): Promise<SettleOutcome[]> {
    await this.#ensureSchema();
    return ownership.commit(this.#ctx, ops);
  }

  async members(stream: string, group: string): Promise<GroupMembership> {
    await this.#ensureSchema();
    return ownership.members(this.#ctx, stream, group);
  }

  // ---- transactions (transaction.ts) ---------------------------------------

  /**
   * Binds append and settle to `client`, a `pg` client (`pg.Client` or a
   * checked-out `pg.PoolClient`) on which the application ran BEGIN. See
   * transaction.ts for what the locks taken there mean for other callers.
   */
  transaction(client: TransactionClient): TransactionScope {
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
