import type { NormalizedQuery, QueryPosition, ReplayQuery } from '../../core/backend.js';
import { comparePositions, encodeQueryCursor } from '../../core/query-cursor.js';
import type { JsonValue, QueryResult, RheoEvent } from '../../core/types.js';

interface PartitionLog {
  /** `events[s - 1]` is sequence `s`: reads by sequence are O(1). */
  readonly events: RheoEvent[];
  /** `sizes[s - 1]`: payload plus metadata bytes of sequence `s` (core/json-size.ts), for byte budgets. */
  readonly sizes: number[];
  /** True while timestamps never decreased, which lets time lookups binary-search. */
  monotonic: boolean;
}

/** One stream's immutable, partitioned log. */
export class StreamLog {
  readonly name: string;
  readonly partitions: number;
  readonly createdAt: Date;
  readonly byId = new Map<string, RheoEvent>();
  readonly #parts: PartitionLog[];

  constructor(name: string, partitions: number, createdAt: Date) {
    this.name = name;
    this.partitions = partitions;
    this.createdAt = createdAt;
    this.#parts = Array.from({ length: partitions }, () => ({ events: [], sizes: [], monotonic: true }));
  }

  highWatermark(partition: number): number {
    return this.#part(partition).events.length;
  }

  nextSequence(partition: number): number {
    return this.#part(partition).events.length + 1;
  }

  push(event: RheoEvent, size: number): void {
    const part = this.#part(event.partition);
    const last = part.events[part.events.length - 1];
    if (last && last.timestamp.getTime() > event.timestamp.getTime()) part.monotonic = false;
    part.events.push(event);
    part.sizes.push(size);
    this.byId.set(event.id, event);
  }

  event(partition: number, sequence: number): RheoEvent | undefined {
    return this.#part(partition).events[sequence - 1];
  }

  size(partition: number, sequence: number): number {
    return this.#part(partition).sizes[sequence - 1] ?? 0;
  }

  read(partition: number, after: number, limit: number, maxBytes: number): RheoEvent[] {
    const { events, sizes } = this.#part(partition);
    const end = Math.min(events.length, after + limit);
    let i = after;
    for (let bytes = 0; i < end; i++) {
      bytes += sizes[i]!;
      if (bytes > maxBytes && i > after) break;
    }
    return events.slice(after, i);
  }

  /** Lowest sequence with `timestamp >= at`, or `null`. */
  firstSequenceAt(partition: number, at: number): number | null {
    const { events, monotonic } = this.#part(partition);
    if (monotonic) {
      let lo = 0;
      let hi = events.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (events[mid]!.timestamp.getTime() < at) lo = mid + 1;
        else hi = mid;
      }
      return lo < events.length ? lo + 1 : null;
    }
    // Caller-supplied timestamps went backwards in this partition: only a scan is exact.
    const i = events.findIndex((e) => e.timestamp.getTime() >= at);
    return i < 0 ? null : i + 1;
  }

  /** Query is a filtered scan within the sequence bounds, then an order by `(timestamp, partition, sequence)`. */
  query(q: NormalizedQuery): QueryResult {
    const parts = q.partition === null ? [...this.#parts.keys()] : [q.partition];
    const matches: RheoEvent[] = [];
    const test = eventFilter(q);
    for (const p of parts) {
      const events = this.#parts[p]?.events ?? [];
      const lo = q.afterSequence ?? 0;
      const hi = Math.min(events.length, q.untilSequence ?? events.length);
      for (let i = lo; i < hi; i++) {
        const e = events[i]!;
        if (!test(e)) continue;
        if (q.cursor && !isAfter(positionOf(e), q.cursor, q.order)) continue;
        matches.push(e);
      }
    }
    const sign = q.order === 'asc' ? 1 : -1;
    matches.sort((a, b) => sign * comparePositions(positionOf(a), positionOf(b)));
    const end = Math.min(matches.length, q.limit);
    let n = 0;
    for (let bytes = 0; n < end; n++) {
      const e = matches[n]!;
      bytes += this.size(e.partition, e.sequence);
      if (bytes > q.maxBytes && n > 0) break;
    }
    const events = matches.slice(0, n);
    const last = events[events.length - 1];
    const cut = n === q.limit || n < end;
    const nextCursor = cut && last ? encodeQueryCursor(positionOf(last)) : null;
    return { events, nextCursor };
  }

  /** Every event of one partition that matches a replay's filter, in sequence order (a scan of the partition). */
  matching(partition: number, q: ReplayQuery): RheoEvent[] {
    const test = eventFilter(q);
    return this.#part(partition).events.filter(test);
  }

  #part(partition: number): PartitionLog {
    const part = this.#parts[partition];
    if (!part) throw new RangeError(`partition ${partition} of ${this.name}`);
    return part;
  }
}

/** The filter part of a query, shared by `query` and replay by query so the two match the same events. */
function eventFilter(q: ReplayQuery): (e: RheoEvent) => boolean {
  const types = q.types ? new Set(q.types) : null;
  const fromMs = q.from?.getTime() ?? -Infinity;
  const toMs = q.to?.getTime() ?? Infinity;
  return (e) => {
    const ts = e.timestamp.getTime();
    if (ts < fromMs || ts >= toMs) return false;
    if (types && !types.has(e.type)) return false;
    if (q.key !== null && e.key !== q.key) return false;
    if (q.wherePayload !== undefined && !jsonContains(e.payload, q.wherePayload)) return false;
    if (q.whereMetadata !== undefined && !jsonContains(e.metadata, q.whereMetadata)) return false;
    return true;
  };
}

function positionOf(e: RheoEvent): QueryPosition {
  return { timestampMs: e.timestamp.getTime(), partition: e.partition, sequence: e.sequence };
}

function isAfter(p: QueryPosition, cursor: QueryPosition, order: 'asc' | 'desc'): boolean {
  const c = comparePositions(p, cursor);
  return order === 'asc' ? c > 0 : c < 0;
}

/**
 * JSON containment with PostgreSQL `@>` semantics, including its one exception:
 * a top-level array contains a primitive that is one of its elements.
 */
export function jsonContains(value: JsonValue, pattern: JsonValue, topLevel = true): boolean {
  if (pattern === null || typeof pattern !== 'object') {
    if (topLevel && Array.isArray(value)) return value.some((v) => v === pattern);
    return value === pattern;
  }
  if (Array.isArray(pattern)) {
    if (!Array.isArray(value)) return false;
    return pattern.every((p) => value.some((v) => jsonContains(v, p, false)));
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  for (const [k, p] of Object.entries(pattern)) {
    if (!Object.hasOwn(value, k) || !jsonContains(value[k]!, p, false)) return false;
  }
  return true;
}
