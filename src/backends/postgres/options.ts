import pg from 'pg';
import type { Clock } from '../../core/clock.js';
import { invalidArgument } from '../../core/errors.js';
import { assertKnownKeys, optionKeys } from '../../core/option-keys.js';
import { quoteSchema } from './schema-name.js';
import { GENERIC_PLAN_MAX_SEGMENTS } from './plan-choice.js';
import { DEFAULT_SEGMENT_EVENTS } from './segments.js';

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
   * The most tables the log (`events`: every segment of every stream in the
   * schema) may hold while appends, claims and owned reads run their
   * generic plans. A generic plan locks every one of those tables on each
   * call, in PostgreSQL's lock table, which the whole cluster shares
   * (`max_locks_per_transaction` × about `max_connections`); past this
   * number rheo plans those statements per call instead (about 3 ms more
   * per claim), holding a dozen locks whatever the schema holds
   * (docs/storage.md). Raise it along with `max_locks_per_transaction`; 0
   * plans every call. Default 256.
   */
  genericPlanSegments?: number;
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
  'genericPlanSegments',
  'pooler',
  'listenConnectionString',
);

/** The options after validation, with their defaults filled in, and where the pool comes from. */
export interface ResolvedOptions {
  schema: string;
  /** `schema`, validated and quoted. */
  quotedSchema: string;
  /** `null`: the database clock. */
  clock: Clock | null;
  notify: boolean;
  segmentEvents: number;
  genericPlanSegments: number;
  pooler: 'transaction' | 'none';
  /** `listenConnectionString`, if given. */
  listenUrl: string | undefined;
  /** The application's pool, or `null` when rheo creates its own from `poolConfig`. */
  borrowedPool: pg.Pool | null;
  /** For rheo's own pool: `clientConfig` with `statement_timeout` when one was asked for. */
  poolConfig: pg.PoolConfig;
  /** The settings a connection of the pool is opened with (for the store id and the LISTEN connection). */
  clientConfig: pg.ClientConfig;
  /** `PostgresConnection.listenClient`, if given. */
  listenClient: (() => pg.Client) | undefined;
}

/**
 * Checks the connection and the options (which may also be given inside the
 * connection object; `options` wins) before anything is opened, so bad
 * input throws `invalid_argument` and leaves no pool behind.
 */
export function resolveOptions(connection: PostgresBackendConfig, options: PostgresBackendOptions): ResolvedOptions {
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
    genericPlanSegments: options.genericPlanSegments ?? connection.genericPlanSegments,
    pooler: options.pooler ?? connection.pooler,
    listenConnectionString: options.listenConnectionString ?? connection.listenConnectionString,
  };
  const segmentEvents = merged.segmentEvents ?? DEFAULT_SEGMENT_EVENTS;
  if (!Number.isSafeInteger(segmentEvents) || segmentEvents < 256 || segmentEvents > 2 ** 40) {
    throw invalidArgument(`postgresBackend segmentEvents must be an integer from 256 to 2^40, got ${String(merged.segmentEvents)}`);
  }
  const genericPlanSegments = merged.genericPlanSegments ?? GENERIC_PLAN_MAX_SEGMENTS;
  if (!Number.isSafeInteger(genericPlanSegments) || genericPlanSegments < 0 || genericPlanSegments > 1_000_000) {
    throw invalidArgument(`postgresBackend genericPlanSegments must be an integer from 0 to 1000000, got ${String(merged.genericPlanSegments)}`);
  }
  const pooler = merged.pooler ?? 'none';
  if (pooler !== 'transaction' && pooler !== 'none') {
    throw invalidArgument(`postgresBackend pooler must be 'transaction' or 'none', got ${JSON.stringify(merged.pooler)}`);
  }
  const listenUrl = merged.listenConnectionString;
  if (listenUrl !== undefined && (typeof listenUrl !== 'string' || listenUrl.length === 0)) {
    throw invalidArgument('postgresBackend listenConnectionString must be a non-empty connection string');
  }
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
  const schema = merged.schema ?? 'rheo';
  const quotedSchema = quoteSchema(schema);
  if (merged.clock !== undefined && (merged.clock === null || typeof merged.clock.now !== 'function')) {
    throw invalidArgument('postgresBackend clock must have a now() method returning epoch milliseconds');
  }

  let clientConfig: pg.ClientConfig;
  let poolConfig: pg.PoolConfig;
  let borrowedPool: pg.Pool | null = null;
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
    borrowedPool = connection.pool;
    clientConfig = { ...(connection.pool.options as pg.ClientConfig) };
    poolConfig = clientConfig;
  } else if (typeof connection.connectionString === 'string' && connection.connectionString.length > 0) {
    clientConfig = { ...connection.poolConfig, connectionString: connection.connectionString };
    poolConfig = statementTimeoutMs === undefined ? clientConfig : { ...clientConfig, statement_timeout: statementTimeoutMs };
  } else {
    throw invalidArgument('postgresBackend expects { connectionString } or { pool }');
  }
  return {
    schema,
    quotedSchema,
    clock: merged.clock ?? null,
    notify: merged.notify ?? true,
    segmentEvents,
    genericPlanSegments,
    pooler,
    listenUrl,
    borrowedPool,
    poolConfig,
    clientConfig,
    listenClient: connection.listenClient,
  };
}
