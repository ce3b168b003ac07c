import type { NormalizedQuery, ReplayQuery } from '../../../core/backend.js';
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
  const bind = binder(values);
  const where = ['e.stream_id = $1', ...filterConditions(q, bind)];
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

/** A function that appends a value to `values` and returns its placeholder. */
function binder(values: unknown[]): (value: unknown) => string {
  return (value) => {
    values.push(value);
    return `$${values.length}`;
  };
}

/** The conditions on `events e` that select a query's (or a replay's) events; shared so both match the same ones. */
function filterConditions(q: ReplayQuery, bind: (value: unknown) => string): string[] {
  const where: string[] = [];
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
  return where;
}

/**
 * Replay by query in one statement: the matching events of the given
 * partitions become the target of the same reopen as replay by event ids
 * (sql/groups.ts reopenSql). $1 group_id, $2 partitions, $3 stream_id,
 * $4 now or null, then the filter's values.
 */
export function buildReplayQuery(
  s: string,
  reopen: (target: string) => string,
  params: { groupId: number; partitions: number[]; streamId: number; now: string | null },
  q: ReplayQuery,
): { text: string; values: unknown[] } {
  const values: unknown[] = [params.groupId, params.partitions, params.streamId, params.now];
  const where = ['e.stream_id = $3', 'e.partition = ANY ($2::int[])', ...filterConditions(q, binder(values))];
  const target = `SELECT e.partition, e.sequence FROM ${s}.events e WHERE ${where.join(' AND ')}`;
  return { text: reopen(target), values };
}
