import { RheoError, type RheoErrorCode, type RheoErrorDetails } from '../../core/errors.js';

/**
 * The one place where driver errors become `RheoError`s. Callers say what
 * they were doing, and whether the statement had been handed to the server
 * (`sent`) and could have written (`writes`): a connection lost after a write
 * was sent leaves its outcome unknown (`ambiguous`); lost before sending, or
 * while only reading, nothing was written (`backend_unavailable`).
 */
export interface FailureContext extends RheoErrorDetails {
  /** What was attempted, for the message: `append to stream "s"`. */
  action: string;
  /** The statement reached the connection (pool checkout succeeded). */
  sent: boolean;
  /** The statement may have changed data. */
  writes: boolean;
}

// SQLSTATE classes and codes: https://www.postgresql.org/docs/current/errcodes-appendix.html
const CONNECTION_CODES = new Set([
  '57P01', // admin_shutdown (pg_terminate_backend, fast shutdown)
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down, recovery)
  '57P05', // idle_session_timeout
  '53300', // too_many_connections
  '53400', // configuration_limit_exceeded
  '25P03', // idle_in_transaction_session_timeout
]);
const CANCEL_CODES = new Set(['57014']); // query_canceled: statement_timeout, pg_cancel_backend
const TRANSIENT_CODES = new Set(['40001', '40P01', '55P03']); // serialization, deadlock, lock_not_available
const BAD_VALUE_CODES = new Set(['22P05', '22021', '22P02', '22003', '22007', '22008', '54000']);

const NODE_CONNECT_ERRNOS = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EACCES', 'ENOENT']);
const NODE_DROP_ERRNOS = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED']);

interface DriverErrorShape {
  code?: unknown;
  message?: unknown;
  severity?: unknown;
}

/** A SQLSTATE from a server error (`pg.DatabaseError`), else undefined. */
export function sqlState(error: unknown): string | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  const { code, severity } = error as DriverErrorShape;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && typeof severity === 'string' ? code : undefined;
}

function errno(error: unknown): string | undefined {
  if (error === null || typeof error !== 'object') return undefined;
  const { code } = error as DriverErrorShape;
  return typeof code === 'string' && code.startsWith('E') ? code : undefined;
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

/** Errors the pg client raises itself when the socket is gone or never came up. */
function isConnectionLoss(error: unknown): boolean {
  const message = messageOf(error);
  return (
    NODE_DROP_ERRNOS.has(errno(error) ?? '') ||
    /Connection terminated|connection error|socket hang up/i.test(message)
  );
}

function isConnectFailure(error: unknown): boolean {
  const message = messageOf(error);
  return (
    NODE_CONNECT_ERRNOS.has(errno(error) ?? '') ||
    /timeout exceeded when trying to connect|Connection terminated due to connection timeout|password authentication failed|does not exist/i.test(
      message,
    )
  );
}

export function classifyError(error: unknown, ctx: FailureContext): RheoError {
  if (error instanceof RheoError) return error;
  const details: RheoErrorDetails = { stream: ctx.stream, group: ctx.group, cause: error };
  const make = (code: RheoErrorCode, why: string) =>
    new RheoError(code, `${ctx.action} failed: ${why}: ${messageOf(error)}`, details);

  if (/Cannot use a pool after calling end|pool is (ended|closed)/i.test(messageOf(error))) {
    return make('closed', 'the backend is closed');
  }
  const state = sqlState(error);
  if (state !== undefined) {
    if (state.startsWith('08') || CONNECTION_CODES.has(state)) {
      if (!ctx.sent || !ctx.writes || state === '53300' || state === '57P03') {
        return make('backend_unavailable', 'PostgreSQL is unavailable');
      }
      return make('ambiguous', 'the connection was lost after the write was sent; it may or may not have been applied');
    }
    if (state.startsWith('28')) return make('backend_unavailable', 'PostgreSQL refused the credentials');
    if (CANCEL_CODES.has(state)) {
      // statement_timeout: PostgreSQL reports it only while the statement
      // still runs; the timer is disarmed before a command commits
      // (finish_xact_command), so the statement, and its transaction, rolled
      // back whole: nothing was written, for reads and writes alike.
      if (/statement timeout/i.test(messageOf(error))) {
        return make('timeout', 'the statement ran past statement_timeout and was rolled back; nothing was written');
      }
      // Any other cancel (pg_cancel_backend, rheo's own on an aborted call)
      // also rolls back, but one that lands as the command commits can race it.
      return ctx.writes
        ? make('ambiguous', 'the statement was cancelled (timeout?) and its outcome is unknown')
        : make('backend_unavailable', 'the statement was cancelled (timeout?)');
    }
    if (TRANSIENT_CODES.has(state)) return make('backend_unavailable', 'a transient conflict rolled the statement back; retry');
    // insufficient_resources (53100 disk_full, 53200 out_of_memory, ...): the
    // statement failed and its transaction rolled back, so nothing was written.
    if (state.startsWith('53')) {
      return make(
        'backend_unavailable',
        /shared memory/i.test(messageOf(error))
          ? "PostgreSQL's lock table is full (it holds max_locks_per_transaction × max_connections locks for the whole cluster); nothing was written"
          : 'PostgreSQL ran out of a resource (memory or disk); nothing was written',
      );
    }
    // insufficient_privilege: the role lacks a grant (see docs/backends/postgres.md: privileges).
    if (state === '42501') return make('permission_denied', 'the PostgreSQL role lacks a privilege this needs');
    if (state === '3F000' || state === '42P01' || state === '42883') {
      return make('schema_version', 'the rheo schema is missing or incomplete; call rheo.migrate()');
    }
    if (BAD_VALUE_CODES.has(state)) return make('invalid_argument', 'PostgreSQL cannot store a value');
    if (state === '23505') return make('already_exists', 'a unique constraint was violated');
    // A named prepared statement found already there (42P05) or missing
    // (26000): consecutive statements ran on different server connections,
    // which is what a transaction-mode pooler does.
    if ((state === '42P05' || state === '26000') && /prepared statement/i.test(messageOf(error))) {
      return make(
        'unsupported',
        "a named prepared statement is missing or duplicated on the server connection, as behind a transaction-mode connection pooler (PgBouncer, Supavisor, RDS Proxy); create the backend with pooler: 'transaction'",
      );
    }
    return make('internal', `unexpected PostgreSQL error ${state}`);
  }
  if (!ctx.sent) return make('backend_unavailable', 'cannot connect to PostgreSQL');
  // pg refuses a statement on a client whose connection had already failed
  // (or was closed) without sending it: nothing was written, whatever it was.
  if (/is not queryable/i.test(messageOf(error))) {
    return make('backend_unavailable', 'the connection had already failed; the statement was not sent');
  }
  if (isConnectionLoss(error)) {
    return ctx.writes
      ? make('ambiguous', 'the connection was lost after the write was sent; it may or may not have been applied')
      : make('backend_unavailable', 'the connection to PostgreSQL was lost');
  }
  if (isConnectFailure(error)) return make('backend_unavailable', 'cannot connect to PostgreSQL');
  return make('internal', 'unexpected driver error');
}
