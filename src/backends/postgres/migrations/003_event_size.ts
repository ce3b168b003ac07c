/**
 * Migration 3: each event's size, so fetch, read, query and deadLetters can stop at a byte
 * budget inside PostgreSQL instead of sending every payload a limit allows
 * (six 100 MB events in one claim built a JSON text past V8's string limit and
 * crashed each process that claimed them).
 *
 * `size_bytes` is payload plus metadata by the size rule of
 * src/core/json-size.ts, computed by the facade at append (the same number
 * the memory backend uses). Adding a nullable column without a default is a
 * catalog change only, whatever the table's size; rows written before this
 * migration keep NULL, and statements fall back to the length of their stored
 * JSON text (`eventSize` in rows.ts), which is never less than the rule's
 * number.
 */
export const migration003 = {
  version: 3,
  name: 'event_size',
  sql: `
ALTER TABLE :schema.events ADD COLUMN size_bytes integer;
`,
};
