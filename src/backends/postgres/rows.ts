import type { JsonObject, JsonValue, RheoEvent } from '../../core/types.js';
import { ms } from './connection.js';

/** Columns of an event row as selected by `eventColumns`. */
export interface EventRow {
  id: string;
  partition: number;
  sequence: number;
  type: string;
  key: string | null;
  payload: JsonValue;
  metadata: JsonObject;
  ts_ms: number;
}

/** The select list for an event, given the alias of `events`. */
export function eventColumns(alias: string): string {
  return `${alias}.id, ${alias}.partition, ${alias}.sequence, ${alias}.type, ${alias}.key, ${alias}.payload, ${alias}.metadata, ${ms(`${alias}.ts`)} AS ts_ms`;
}

/**
 * SQL for an event's size in bytes (migration 003), given the alias of
 * `events`. Rows from before that migration have none: the length of their
 * stored JSON text stands in, never less than the size rule's number (it adds
 * a space after each colon and comma).
 */
export function eventSize(alias: string): string {
  return `COALESCE(${alias}.size_bytes, octet_length(${alias}.payload::text) + octet_length(${alias}.metadata::text))`;
}

export function toEvent(stream: string, row: EventRow): RheoEvent {
  return {
    id: row.id,
    stream,
    partition: row.partition,
    sequence: row.sequence,
    type: row.type,
    key: row.key,
    payload: row.payload,
    metadata: row.metadata,
    timestamp: new Date(row.ts_ms),
  };
}

/** The `now` parameter: the injected clock's time, or null for the database clock (`now()`). */
export function nowParam(clockMs: number | null): string | null {
  return clockMs === null ? null : new Date(clockMs).toISOString();
}

/** SQL for the statement's time authority, given the placeholder carrying `nowParam`. */
export function nowSql(placeholder: string): string {
  return `COALESCE(${placeholder}::timestamptz, now())`;
}
