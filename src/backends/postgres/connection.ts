import pg from 'pg';
import { currentCallSignal } from '../../core/call-options.js';
import { RheoError } from '../../core/errors.js';
import { classifyError, sqlState, type FailureContext } from './errors.js';

/**
 * A statement sent as a named prepared statement: parsed once per connection
 * and, once PostgreSQL settles on its generic plan, no longer planned per
 * call. Only the hot statements whose generic plans are pinned by
 * test/postgres/explain.test.ts are named (docs/design.md#postgresql-measurements: an unchecked
 * generic claim plan once collapsed to 40 tps). PostgreSQL never settles on
 * the generic plan of the claim and the append by itself, so those two are
 * calls of routines.ts functions that force it. The name carries a hash of
 * the text, so backends on different schemas never share a name.
 */
export interface PreparedText {
  readonly name: string;
  readonly text: string;
}

/** What a statement is, for error classification and messages. */
export type StatementContext = Omit<FailureContext, 'sent'>;

const TRANSIENT = new Set(['40001', '40P01']);
const MAX_TRANSIENT_RETRIES = 3;

/**
 * Result parsing is pinned per query, so rheo works whatever global
 * `pg.types.setTypeParser` overrides the host application installed.
 * Timestamps are selected as epoch milliseconds (`int8`), never parsed from
 * text whose format depends on the server's DateStyle.
 */
const identity = (value: string): string => value;
const toNumber = (value: string): number => Number(value);
const toBoolean = (value: string): boolean => value === 't' || value === 'true';
const PARSERS: Record<number, (value: string) => unknown> = {
  16: toBoolean, // bool
  20: toNumber, // int8
  21: toNumber, // int2
  23: toNumber, // int4
  114: (value) => JSON.parse(value) as unknown, // json
  3802: (value) => JSON.parse(value) as unknown, // jsonb
};
export const TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number) => PARSERS[oid] ?? identity) as pg.CustomTypesConfig['getTypeParser'],
};

/** SQL for epoch milliseconds of a timestamptz expression (compile-time column names only). */
export function ms(expression: string): string {
  return `floor(extract(epoch FROM ${expression}) * 1000)::int8`;
}

export type Queryable = Pick<pg.PoolClient, 'query'>;

/**
 * Sends one statement with pg's callback form, wrapped in a promise made
 * here, rather than pg's promise form. Measured in a loop of 500-row
 * queries, the promise form let about a third of every result (its rows and
 * their strings) survive the next minor garbage collection, which copied and
 * then promoted it: 2.4 MB promoted per scavenge against 0.01 MB for the
 * callback form. In a consumer draining 200,000 events that made scavenges
 * cost 1.3 s instead of 0.4 s.
 */
export function send<R extends pg.QueryResultRow = pg.QueryResultRow>(client: pg.ClientBase, config: pg.QueryConfig): Promise<pg.QueryResult<R>> {
  return new Promise((resolve, reject) => {
    client.query<R>(config, (error, result) => {
      if (error) reject(error);
      else resolve(result);
    });
  });
}

/**
 * Where a statement runs: the pool (`Database`, one checkout and one implicit
 * transaction per statement) or an application's transaction
 * (transaction.ts), so the append and settle code serves both.
 */
export interface Runner {
  query<R>(ctx: StatementContext, statement: string | PreparedText, values: unknown[]): Promise<R[]>;
}

/**
 * The backend's access to PostgreSQL: checks out a pooled connection per
 * statement, pins result parsing, and sends every failure through
 * `classifyError`, knowing whether the statement had reached a connection.
 */
export class Database implements Runner {
  readonly pool: pg.Pool;
  readonly ownsPool: boolean;
  #ended = false;

  constructor(pool: pg.Pool, ownsPool: boolean) {
    this.pool = pool;
    this.ownsPool = ownsPool;
    // An idle pooled connection that dies (server restart, pg_terminate_backend)
    // is reported on the pool; without a listener Node would crash the process.
    // The pool already discards that client; the next checkout reconnects.
    if (ownsPool) this.pool.on('error', () => {});
  }

  /** `statement` is SQL text, or a named statement that each connection prepares once. */
  async query<R>(ctx: StatementContext, statement: string | PreparedText, values: unknown[]): Promise<R[]> {
    const config = typeof statement === 'string' ? { text: statement } : { name: statement.name, text: statement.text };
    const signal = currentCallSignal();
    for (let attempt = 1; ; attempt++) {
      const client = await this.#checkout(ctx);
      if (signal?.aborted) {
        client.release();
        throw notSent(ctx);
      }
      // Most statements (a consumer's claims and settles) have no signal,
      // and nothing to cancel: no listener, no extra await.
      const cancel = signal ? new StatementCancel(client.connection, signal) : null;
      try {
        const result = await send<R & pg.QueryResultRow>(client.connection, { ...config, values, types: TYPES });
        if (cancel) await cancel.done();
        client.release();
        return result.rows;
      } catch (error) {
        if (cancel) await cancel.done();
        client.release(brokenConnection(error) ? asError(error) : undefined);
        // A deadlock or serialization failure rolled the statement back whole.
        if (attempt < MAX_TRANSIENT_RETRIES && TRANSIENT.has(sqlState(error) ?? '')) continue;
        throw classifyError(error, { ...ctx, sent: true });
      }
    }
  }

  /**
   * Runs `fn` inside BEGIN/COMMIT on one connection. Failures before COMMIT is
   * sent roll back (nothing written, so a lost connection is
   * `backend_unavailable`); a connection lost during COMMIT is `ambiguous`.
   * `begin`: the text that opens the transaction, a constant of rheo's own
   * (never user input: it is sent as text, without parameters), which may
   * add `SET LOCAL` statements to the BEGIN's round trip.
   */
  async transaction<T>(ctx: StatementContext, fn: (tx: Queryable) => Promise<T>, begin = 'BEGIN'): Promise<T> {
    const client = await this.#checkout(ctx);
    const connection = client.connection;
    const signal = currentCallSignal();
    let committing = false;
    // A cancel request reaches only a running statement, so an abort between
    // statements is checked before each one: the transaction then rolls back.
    const checkAborted = (): void => {
      if (signal?.aborted) throw new CallAborted();
    };
    const tx: Queryable = {
      query: ((config: pg.QueryConfig) => {
        checkAborted();
        return send(connection, { ...config, types: TYPES });
      }) as Queryable['query'],
    };
    const cancel = signal ? new StatementCancel(connection, signal) : null;
    try {
      checkAborted();
      await connection.query(begin);
      const result = await fn(tx);
      checkAborted();
      committing = true;
      await connection.query('COMMIT');
      if (cancel) await cancel.done();
      client.release();
      return result;
    } catch (error) {
      if (cancel) await cancel.done();
      const broken = !(error instanceof CallAborted) && brokenConnection(error);
      if (!committing && !broken) {
        try {
          await connection.query('ROLLBACK');
        } catch (rollbackError) {
          // The connection is unusable; it is destroyed below.
          client.release(asError(rollbackError));
          throw classifyError(error, { ...ctx, sent: true, writes: false });
        }
      }
      client.release(broken ? asError(error) : undefined);
      // Rolled back above: an abort between statements wrote nothing.
      if (error instanceof CallAborted) throw notSent(ctx);
      throw classifyError(error, { ...ctx, sent: true, writes: ctx.writes && committing });
    }
  }

  /**
   * A connection held until `release()`, guarded like every checkout (a
   * connection that dies meanwhile never crashes the process and is
   * destroyed on release). For transactions whose statements rheo does not
   * all issue itself (`beginTransaction`).
   */
  connect(ctx: StatementContext): Promise<CheckedOut> {
    return this.#checkout(ctx);
  }

  async end(): Promise<void> {
    if (this.#ended) return;
    this.#ended = true;
    if (this.ownsPool) await this.pool.end();
  }

  async #checkout(ctx: StatementContext): Promise<CheckedOut> {
    if (this.#ended) throw new RheoError('closed', `${ctx.action} failed: the postgres backend is closed`, { stream: ctx.stream, group: ctx.group });
    try {
      return await new Promise<CheckedOut>((resolve, reject) => {
        // The callback form, not the promise: pg-pool calls it synchronously
        // as it hands the client over, inside the socket's data handler for
        // a new connection. A FATAL that arrived in the same chunk as the
        // connection's first ReadyForQuery is parsed right after it, before
        // any promise continuation could attach a listener, and would crash
        // the process (found by the chaos suite's termination scenario).
        this.pool.connect((error, client) => {
          if (error || client === undefined) reject(error ?? new Error('pg-pool returned no client'));
          else resolve(new CheckedOut(client));
        });
      });
    } catch (error) {
      throw classifyError(error, { ...ctx, sent: false });
    }
  }
}

/**
 * A pooled connection while rheo holds it. pg-pool detaches its own 'error'
 * listener from a client for as long as it is checked out, and `pg` emits
 * 'error' on the client when its socket ends or resets, or when a FATAL
 * (57P01 from `pg_terminate_backend`, a server shutdown) arrives between
 * statements: after a result and before the release, or inside a
 * transaction. An 'error' event nobody listens to kills the process, so a
 * listener is attached from checkout to release. The statement in flight (if
 * any) fails on its own and is classified by the caller; the listener keeps
 * the error so the release destroys the connection instead of pooling it.
 */
export class CheckedOut {
  readonly connection: pg.PoolClient;
  #lost: Error | null = null;
  readonly #onError = (error: Error): void => {
    this.#lost ??= error;
  };

  constructor(connection: pg.PoolClient) {
    this.connection = connection;
    connection.on('error', this.#onError);
  }

  /** Returns the connection to the pool, or destroys it when `error` is given or it failed while held. */
  release(error?: Error): void {
    this.connection.removeListener('error', this.#onError);
    this.connection.release(error ?? this.#lost ?? undefined);
  }
}

/** A statement not sent because the facade call it belonged to was aborted first. */
class CallAborted extends Error {
  constructor() {
    super('the call was aborted before this statement was sent');
    this.name = 'CallAborted';
  }
}

function notSent(ctx: StatementContext): RheoError {
  return new RheoError('backend_unavailable', `${ctx.action} was aborted before it was sent; nothing was written`, {
    stream: ctx.stream,
    group: ctx.group,
  });
}

/** The parts of a pooled `pg.Client` a cancel request needs (public fields the types do not declare). */
interface CancelTarget {
  processID: number | null;
  secretKey: number | null;
  host: string;
  port: number;
}

/** `pg.Connection`'s raw protocol calls a cancel request uses. */
interface RawConnection {
  connect(port: number | string, host?: string): void;
  cancel(processID: number, secretKey: number): void;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  end(): void;
}

/**
 * Cancels the statement running on `connection` when `signal` aborts, with
 * PostgreSQL's cancel request: a separate short-lived socket that needs no
 * pool slot and no login (a pool whose every connection waits on a lock
 * could not lend one for `pg_cancel_backend`). The server then fails the
 * statement with 57014 and rolls it back. `done()` waits for a cancel in
 * flight, so the connection goes back to the pool only once no late cancel
 * can hit the next statement run on it.
 */
class StatementCancel {
  readonly #signal: AbortSignal;
  #request: Promise<void> | null = null;
  readonly #onAbort: () => void;

  constructor(connection: pg.PoolClient, signal: AbortSignal) {
    this.#signal = signal;
    this.#onAbort = () => {
      this.#request ??= sendCancelRequest(connection as unknown as CancelTarget);
    };
    signal.addEventListener('abort', this.#onAbort, { once: true });
  }

  async done(): Promise<void> {
    this.#signal.removeEventListener('abort', this.#onAbort);
    if (this.#request) await this.#request;
  }
}

/** Best effort, never rejects: resolves once the server closed the cancel socket, or after 5 s. */
function sendCancelRequest(target: CancelTarget): Promise<void> {
  const { processID, secretKey } = target;
  if (processID === null || secretKey === null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const raw = new pg.Connection() as unknown as RawConnection;
    let finished = false;
    const finish = (): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      try {
        raw.end();
      } catch {
        // Already closed by the server.
      }
      resolve();
    };
    const timer = setTimeout(finish, 5_000);
    timer.unref();
    raw.on('error', finish);
    raw.on('end', finish);
    raw.on('connect', () => raw.cancel(processID, secretKey));
    try {
      if (target.host.startsWith('/')) raw.connect(`${target.host}/.s.PGSQL.${target.port}`);
      else raw.connect(target.port, target.host);
    } catch {
      finish();
    }
  });
}

/** True when the connection itself failed, so it must not go back to the pool. */
export function brokenConnection(error: unknown): boolean {
  const state = sqlState(error);
  if (state === undefined) return true;
  return state.startsWith('08') || state.startsWith('57P');
}

export function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/** Typed query through a transaction's connection. */
export async function txQuery<R>(tx: Queryable, text: string, values: unknown[]): Promise<R[]> {
  const result = await tx.query<R & pg.QueryResultRow>({ text, values });
  return result.rows;
}
