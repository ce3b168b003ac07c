import type { NormalizedQuery, QueryPosition } from '../../core/backend.js';
import { comparePositions, encodeQueryCursor } from '../../core/query-cursor.js';
import type { QueryResult, RheoEvent } from '../../core/types.js';
import { jsonContains } from '../memory/stream-log.js';
import { decodeEvent, entryFields } from './codec.js';

const PAGE = 1000;

/**
 * `query` on Redis: an XRANGE scan, in pages of 1000 entries, of every event
 * within the query's sequence bounds (`afterSequence`, `untilSequence`) in
 * each partition asked, filtered here and ordered by
 * `(timestamp, partition, sequence)`. Its cost is the number of events in
 * those bounds, whatever the filters: narrow a query over a long stream with
 * a partition and sequence bounds. Redis has no secondary index over
 * payloads that a scan could use instead.
 */
export async function queryPartitions(
  stream: string,
  partitions: number[],
  q: NormalizedQuery,
  xrange: (partition: number, from: string, count: number) => Promise<unknown[]>,
): Promise<QueryResult> {
  const types = q.types ? new Set(q.types) : null;
  const fromMs = q.from?.getTime() ?? -Infinity;
  const toMs = q.to?.getTime() ?? Infinity;
  const matches: Array<{ event: RheoEvent; size: number }> = [];
  for (const p of partitions) {
    let from = `${(q.afterSequence ?? 0) + 1}-0`;
    const until = q.untilSequence ?? Infinity;
    for (;;) {
      const page = await xrange(p, from, PAGE);
      let done = page.length < PAGE;
      for (const raw of page) {
        const e = entryFields(raw);
        if (e.sequence > until) {
          done = true;
          break;
        }
        const ts = Number(e.t);
        if (ts < fromMs || ts >= toMs) continue;
        const event = decodeEvent(stream, p, e.sequence, e.t, e.d);
        if (types && !types.has(event.type)) continue;
        if (q.key !== null && event.key !== q.key) continue;
        if (q.wherePayload !== undefined && !jsonContains(event.payload, q.wherePayload)) continue;
        if (q.whereMetadata !== undefined && !jsonContains(event.metadata, q.whereMetadata)) continue;
        if (q.cursor && !isAfter(positionOf(event), q.cursor, q.order)) continue;
        matches.push({ event, size: e.z });
      }
      if (done || page.length === 0) break;
      from = `(${(page[page.length - 1] as [string])[0]}`;
    }
  }
  const sign = q.order === 'asc' ? 1 : -1;
  matches.sort((a, b) => sign * comparePositions(positionOf(a.event), positionOf(b.event)));
  const end = Math.min(matches.length, q.limit);
  let n = 0;
  for (let bytes = 0; n < end; n++) {
    bytes += matches[n]!.size;
    if (bytes > q.maxBytes && n > 0) break;
  }
  const events = matches.slice(0, n).map((m) => m.event);
  const last = events[events.length - 1];
  const cut = n === q.limit || n < end;
  return { events, nextCursor: cut && last ? encodeQueryCursor(positionOf(last)) : null };
}

function positionOf(e: RheoEvent): QueryPosition {
  return { timestampMs: e.timestamp.getTime(), partition: e.partition, sequence: e.sequence };
}

function isAfter(p: QueryPosition, cursor: QueryPosition, order: 'asc' | 'desc'): boolean {
  const c = comparePositions(p, cursor);
  return order === 'asc' ? c > 0 : c < 0;
}
