import { invalidArgument } from '../../core/errors.js';
import { describe } from '../../core/validation.js';

const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * The schema option is the only identifier rheo puts into SQL text. It is
 * validated against a strict lowercase pattern (so quoting never changes its
 * meaning and it never exceeds PostgreSQL's 63-byte identifier limit) and
 * quoted once, here; every other value travels as a bound `$n` parameter.
 */
export function quoteSchema(schema: unknown): string {
  if (typeof schema !== 'string' || !SCHEMA_RE.test(schema)) {
    throw invalidArgument(
      `postgres schema must match ${SCHEMA_RE.source} (lowercase letters, digits, underscores; at most 63), got ${describe(schema)}`,
    );
  }
  // PostgreSQL reserves pg_* for system schemas (CREATE SCHEMA refuses them)
  // and information_schema is the standard's catalog: refused here, before
  // any statement, rather than failing or writing into a catalog at migrate().
  if (schema.startsWith('pg_') || schema === 'information_schema') {
    throw invalidArgument(`postgres schema ${describe(schema)} is reserved by PostgreSQL; choose another name`);
  }
  return `"${schema}"`;
}

/**
 * LISTEN takes an identifier, not a parameter, so the channel name is derived
 * from the validated schema and fits NAMEDATALEN. Two schemas sharing the first
 * 55 characters share a channel: that costs spurious wakeups, never a lost one.
 */
export function notifyChannel(schema: string): string {
  return `rheo_${schema.slice(0, 55)}_append`;
}
