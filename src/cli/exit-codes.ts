import { isRheoError, type RheoErrorCode } from '../core/errors.js';

/**
 * Exit codes scripts can branch on. Usage errors (bad flags, bad values, a
 * missing --confirm or URL) are told apart from "the thing you named does not
 * exist" and from "the database could not be reached", because a retry only
 * helps with the last.
 */
export const EXIT = {
  ok: 0,
  failure: 1,
  usage: 2,
  notFound: 3,
  unavailable: 4,
  schemaVersion: 5,
  permissionDenied: 6,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

const BY_CODE: Partial<Record<RheoErrorCode, ExitCode>> = {
  invalid_argument: EXIT.usage,
  invalid_partition: EXIT.usage,
  confirm_required: EXIT.usage,
  unsupported: EXIT.usage,
  event_too_large: EXIT.usage,
  stream_not_found: EXIT.notFound,
  group_not_found: EXIT.notFound,
  cursor_not_found: EXIT.notFound,
  backend_unavailable: EXIT.unavailable,
  schema_version: EXIT.schemaVersion,
  permission_denied: EXIT.permissionDenied,
};

export function exitCodeFor(error: unknown): ExitCode {
  if (isRheoError(error)) return BY_CODE[error.code] ?? EXIT.failure;
  return EXIT.failure;
}

/** The block `--help` ends with. */
export const EXIT_CODES_HELP = `Exit codes:
  0  success
  1  any other failure (ambiguous write, internal error)
  2  usage: bad flags or values, missing --confirm, no database URL, unsupported URL,
     a command the backend cannot serve (unsupported, e.g. trim on Redis)
  3  not found: stream, group or dead-letter cursor
  4  backend unavailable: the database could not be reached
  5  schema version: run \`rheo migrate\` (or upgrade rheo)
  6  permission denied: the database role lacks a privilege`;
