/**
 * Every failure rheo reports is a `RheoError` with a stable `code`. Callers
 * branch on `code`, never on `message`; driver errors ride along as `cause`.
 */
export const RHEO_ERROR_CODES = [
  'invalid_argument',
  'invalid_partition',
  'stream_not_found',
  'group_not_found',
  'already_exists',
  'stale_lease',
  'stale_generation',
  'group_mode_conflict',
  'timeout',
  'confirm_required',
  'cursor_not_found',
  'backend_unavailable',
  'ambiguous',
  'schema_version',
  // PostgreSQL: the schema already holds a table, index or function of the
  // same name as one rheo's migrations create (another application's).
  'schema_conflict',
  'closed',
  'permission_denied',
  'event_too_large',
  'unsupported',
  // Inside an application's transaction: an earlier statement failed (or rheo
  // refused a settle there), so PostgreSQL refuses everything until ROLLBACK.
  'transaction_aborted',
  'internal',
] as const;

export type RheoErrorCode = (typeof RHEO_ERROR_CODES)[number];

export interface RheoErrorDetails {
  stream?: string;
  group?: string;
  cause?: unknown;
}

export class RheoError extends Error {
  readonly code: RheoErrorCode;
  readonly stream: string | undefined;
  readonly group: string | undefined;

  constructor(code: RheoErrorCode, message: string, details: RheoErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'RheoError';
    this.code = code;
    this.stream = details.stream;
    this.group = details.group;
  }
}

export function isRheoError(value: unknown, code?: RheoErrorCode): value is RheoError {
  return value instanceof RheoError && (code === undefined || value.code === code);
}

export function invalidArgument(message: string, details?: RheoErrorDetails): RheoError {
  return new RheoError('invalid_argument', message, details);
}

export function streamNotFound(stream: string): RheoError {
  return new RheoError('stream_not_found', `stream "${stream}" does not exist`, { stream });
}

export function groupNotFound(stream: string, group: string): RheoError {
  return new RheoError('group_not_found', `group "${group}" does not exist on stream "${stream}"`, {
    stream,
    group,
  });
}

export function invalidPartition(stream: string, partition: unknown, partitions: number): RheoError {
  return new RheoError(
    'invalid_partition',
    `partition ${String(partition)} is out of range for stream "${stream}" (partitions 0..${partitions - 1})`,
    { stream },
  );
}

export function staleLease(stream: string, group: string, detail: string): RheoError {
  return new RheoError('stale_lease', `stale lease on stream "${stream}", group "${group}": ${detail}`, {
    stream,
    group,
  });
}
