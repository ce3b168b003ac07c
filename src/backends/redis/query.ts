import type { NormalizedQuery, QueryPosition, ReplayQuery } from '../../core/backend.js';
import { eventFilter } from '../../core/event-filter.js';
import { comparePositions, encodeQueryCursor } from '../../core/query-cursor.js';
import type { QueryResult, RheoEvent } from '../../core/types.js';
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
  const test = eventFilter(q);
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
        if (!test(event)) continue;
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

/**
 * Replay by query: the sequences of one partition's events that match the
 * filter, ascending, by a scan of the whole partition in pages of 1000 with
 * the filter `query` uses (core/event-filter.ts), so a replay reopens exactly
 * what `query` finds.
 */
export async function matchingSequences(
  stream: string,
  partition: number,
  q: ReplayQuery,
  xrange: (partition: number, from: string, count: number) => Promise<unknown[]>,
): Promise<number[]> {
  const test = eventFilter(q);
  const fromMs = q.from?.getTime() ?? -Infinity;
  const toMs = q.to?.getTime() ?? Infinity;
  const out: number[] = [];
  let from = '-';
  for (;;) {
    const page = await xrange(partition, from, PAGE);
    for (const raw of page) {
      const e = entryFields(raw);
      const ts = Number(e.t);
      if (ts < fromMs || ts >= toMs) continue;
      if (test(decodeEvent(stream, partition, e.sequence, e.t, e.d))) out.push(e.sequence);
    }
    if (page.length < PAGE) return out;
    from = `(${(page[page.length - 1] as [string])[0]}`;
  }
}

function positionOf(e: RheoEvent): QueryPosition {
  return { timestampMs: e.timestamp.getTime(), partition: e.partition, sequence: e.sequence };
}

function isAfter(p: QueryPosition, cursor: QueryPosition, order: 'asc' | 'desc'): boolean {
  const c = comparePositions(p, cursor);
  return order === 'asc' ? c > 0 : c < 0;
}
