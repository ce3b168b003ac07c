import { RheoError, type RheoErrorCode, type RheoErrorDetails } from '../../core/errors.js';

/**
 * The one place where ioredis and Redis errors become `RheoError`s. Callers
 * say what they were doing and whether the command could have written: a
 * connection lost after a write was sent leaves its outcome unknown
 * (`ambiguous`); a command refused before it ran (not connected, offline
 * queue off, READONLY replica, cluster down or resharding, server loading,
 * out of memory, another script busy) wrote nothing (`backend_unavailable`).
 */
export interface FailureContext extends RheoErrorDetails {
  /** What was attempted, for the message: `append to stream "s"`. */
  action: string;
  /** The command may have changed data. */
  writes: boolean;
}

/** Reply errors whose command was refused before it ran: nothing was written. */
const REFUSED_REPLIES = /^(READONLY|CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|BUSY|OOM|MOVED|ASK|NOREPLICAS|MISCONF|CROSSSLOT)\b/;
const AUTH_REPLIES = /^(NOAUTH|WRONGPASS|NOPERM)\b/;
/** ioredis refused to send: never connected, reconnecting with the offline queue off, or the client was closed. */
const NOT_SENT = /Stream isn't writeable|enableOfflineQueue|None of startup nodes is available|Failed to refresh slots cache|Cluster isn't ready|ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH/;
/** Lost while the command was on the wire: it may have run. */
const LOST = /Connection is closed|ECONNRESET|EPIPE|ETIMEDOUT|ECONNABORTED|Command timed out|max retries per request|socket hang up/i;

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

export function classifyRedisError(error: unknown, ctx: FailureContext): RheoError {
  if (error instanceof RheoError) return error;
  const details: RheoErrorDetails = { stream: ctx.stream, group: ctx.group, cause: error };
  const message = messageOf(error);
  const make = (code: RheoErrorCode, why: string) => new RheoError(code, `${ctx.action} failed: ${why}: ${message}`, details);

  if (/RHEO_NOGROUP/.test(message)) return make('group_not_found', `group "${ctx.group ?? ''}" has no state in this partition (was createGroup interrupted?)`);
  if (/RHEO_NOSTREAM/.test(message)) return make('stream_not_found', `stream "${ctx.stream ?? ''}" was deleted`);
  if (REFUSED_REPLIES.test(message)) return make('backend_unavailable', 'Redis refused the command (failover, resharding or overload); nothing was written');
  if (AUTH_REPLIES.test(message)) return make('permission_denied', 'Redis refused the credentials or the command');
  if (/^NOSCRIPT\b/.test(message)) return make('backend_unavailable', 'the script cache was flushed twice in a row; retry');
  if (NOT_SENT.test(message)) return make('backend_unavailable', 'cannot reach Redis; nothing was sent');
  if (LOST.test(message)) {
    return ctx.writes
      ? make('ambiguous', 'the connection was lost after the write was sent; it may or may not have been applied')
      : make('backend_unavailable', 'the connection to Redis was lost');
  }
  return make('internal', 'unexpected Redis error');
}

/** A reply error of a script: the text Redis sends back, without the `ERR` wrapping some versions add. */
export function isNoScript(error: unknown): boolean {
  return /^NOSCRIPT\b/.test(messageOf(error));
}
