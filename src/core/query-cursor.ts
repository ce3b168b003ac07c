import { RheoError } from './errors.js';
import type { QueryPosition } from './backend.js';

/**
 * Query cursors are opaque to callers: base64url of the last returned
 * `(timestamp, partition, sequence)`. Paging resumes strictly after it, so a
 * page never repeats or skips an event of an immutable log.
 */
export function encodeQueryCursor(position: QueryPosition): string {
  return Buffer.from(
    JSON.stringify([position.timestampMs, position.partition, position.sequence]),
    'utf8',
  ).toString('base64url');
}

export function decodeQueryCursor(stream: string, cursor: string): QueryPosition {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch (cause) {
    throw new RheoError('invalid_argument', `query cursor for stream "${stream}" is malformed`, { stream, cause });
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 3 ||
    !parsed.every((n) => typeof n === 'number' && Number.isSafeInteger(n)) ||
    (parsed[1] as number) < 0 ||
    (parsed[2] as number) < 1
  ) {
    throw new RheoError('invalid_argument', `query cursor for stream "${stream}" is malformed`, { stream });
  }
  const [timestampMs, partition, sequence] = parsed as [number, number, number];
  return { timestampMs, partition, sequence };
}

/** Total order of query results: `(timestamp, partition, sequence)`. */
export function comparePositions(a: QueryPosition, b: QueryPosition): number {
  return a.timestampMs - b.timestampMs || a.partition - b.partition || a.sequence - b.sequence;
}
