import type { NormalizedQuery } from '../../../core/backend.js';
import { eventColumns, eventSize } from '../rows.js';

/**
 * Builds query() from fixed SQL fragments; every value is a bound parameter.
 * Ordered by (ts, partition, sequence) over events_stream_ts_idx; the cursor is
 * a row comparison on the same triple, so paging is keyset (no OFFSET).
 * JSON containment is `@>` on jsonb, except that a scalar pattern must equal
 * the payload (PostgreSQL would also let a top-level array contain a scalar,
 * which docs/semantics.md does not).
 */
export function buildQuery(s: string, streamId: number, q: NormalizedQuery): { text: string; values: unknown[] } {
  const values: unknown[] = [streamId];
  const where = ['e.stream_id = $1'];
  const bind = (value: unknown): string => {
    values.push(value);
    return `$${values.length}`;
  };
  if (q.types !== null) where.push(`e.type = ANY (${bind(q.types)}::text[])`);
  if (q.key !== null) where.push(`e.key = ${bind(q.key)}`);
  if (q.wherePayload !== undefined) {
    const pattern = q.wherePayload;
    const structured = pattern !== null && typeof pattern === 'object';
    where.push(`e.payload ${structured ? '@>' : '='} ${bind(JSON.stringify(pattern))}::jsonb`);
  }
  if (q.whereMetadata !== undefined) where.push(`e.metadata @> ${bind(JSON.stringify(q.whereMetadata))}::jsonb`);
  if (q.from !== null) where.push(`e.ts >= ${bind(q.from.toISOString())}::timestamptz`);
  if (q.to !== null) where.push(`e.ts < ${bind(q.to.toISOString())}::timestamptz`);
  if (q.afterSequence !== null) where.push(`e.sequence > ${bind(q.afterSequence)}`);
  if (q.untilSequence !== null) where.push(`e.sequence <= ${bind(q.untilSequence)}`);
  if (q.partition !== null) where.push(`e.partition = ${bind(q.partition)}`);
  const desc = q.order === 'desc';
  if (q.cursor !== null) {
    const at = bind(new Date(q.cursor.timestampMs).toISOString());
    const partition = bind(q.cursor.partition);
    const sequence = bind(q.cursor.sequence);
    where.push(`(e.ts, e.partition, e.sequence) ${desc ? '<' : '>'} (${at}::timestamptz, ${partition}::int, ${sequence}::int8)`);
  }
  const dir = desc ? 'DESC' : 'ASC';
  const order = `ORDER BY e.ts ${dir}, e.partition ${dir}, e.sequence ${dir}`;
  const limit = bind(q.limit);
  const maxBytes = bind(q.maxBytes);
  // The page ends before the first event past the byte budget (running size,
  // migration 003); \`matched\` tells the caller whether the budget cut it,
  // so the page still gets a cursor.
  const text = `
SELECT ${eventColumns('e')}, e.matched
FROM (
  SELECT e.*, sum(${eventSize('e')}) OVER w AS running_bytes, row_number() OVER w AS k, count(*) OVER () AS matched
  FROM (
    SELECT * FROM ${s}.events e
    WHERE ${where.join(' AND ')}
    ${order}
    LIMIT ${limit}
  ) e
  WINDOW w AS (${order} ROWS UNBOUNDED PRECEDING)
) e
WHERE e.running_bytes <= ${maxBytes} OR e.k = 1
${order}`;
  return { text, values };
}
