import type { NormalizedQuery, QueryPosition, ReplayQuery } from '../../core/backend.js';
import { eventFilter } from '../../core/event-filter.js';
import { comparePositions, encodeQueryCursor } from '../../core/query-cursor.js';
import type { QueryResult, RheoEvent } from '../../core/types.js';

interface PartitionLog {
  /**
   * `events[s - 1 - base]` is sequence `s`: reads by sequence are O(1).
   * Trimmed events below `head` are dropped from the arrays in one splice
   * once they are more than half of them (amortised O(1) per trimmed event).
   */
  events: RheoEvent[];
  /** `sizes[s - 1 - base]`: payload plus metadata bytes of sequence `s` (core/json-size.ts), for byte budgets. */
  sizes: number[];
  /** Sequences spliced out of the arrays. */
  base: number;
  /** Array index of the first retained event: the low watermark is `base + head + 1`. */
  head: number;
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
    this.#parts = Array.from({ length: partitions }, () => ({ events: [], sizes: [], base: 0, head: 0, monotonic: true }));
  }

  highWatermark(partition: number): number {
    const part = this.#part(partition);
    return part.base + part.events.length;
  }

  /** First retained sequence; `highWatermark + 1` when nothing is retained. */
  lowWatermark(partition: number): number {
    const part = this.#part(partition);
    return part.base + part.head + 1;
  }

  nextSequence(partition: number): number {
    return this.highWatermark(partition) + 1;
  }

  /**
   * The highest sequence a trim may reach by age: the last of the leading run
   * of retained events with `timestamp < cutoffMs`, looking at most `limit`
   * events past the low watermark. `lowWatermark - 1` when the first is not old.
   */
  lastBefore(partition: number, cutoffMs: number, limit: number): number {
    const part = this.#part(partition);
    const end = Math.min(part.events.length, part.head + limit);
    let i = part.head;
    while (i < end && part.events[i]!.timestamp.getTime() < cutoffMs) i++;
    return part.base + i;
  }

  /** Deletes the events up to `upTo` (inclusive) from the front; returns how many. */
  trimTo(partition: number, upTo: number): number {
    const part = this.#part(partition);
    const from = part.head;
    const to = Math.min(part.events.length, upTo - part.base);
    if (to <= from) return 0;
    for (let i = from; i < to; i++) this.byId.delete(part.events[i]!.id);
    part.head = to;
    if (part.head > 1024 && part.head * 2 > part.events.length) {
      part.events = part.events.slice(part.head);
      part.sizes = part.sizes.slice(part.head);
      part.base += part.head;
      part.head = 0;
    }
    return to - from;
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
    const part = this.#part(partition);
    const i = sequence - 1 - part.base;
    return i >= part.head ? part.events[i] : undefined;
  }

  size(partition: number, sequence: number): number {
    const part = this.#part(partition);
    const i = sequence - 1 - part.base;
    return i >= part.head ? (part.sizes[i] ?? 0) : 0;
  }

  /** Retained events after `after` (from the low watermark when `after` lies below it). */
  read(partition: number, after: number, limit: number, maxBytes: number): RheoEvent[] {
    const { events, sizes, base, head } = this.#part(partition);
    const start = Math.max(head, after - base);
    const end = Math.min(events.length, start + limit);
    let i = start;
    for (let bytes = 0; i < end; i++) {
      bytes += sizes[i]!;
      if (bytes > maxBytes && i > start) break;
    }
    return events.slice(start, i);
  }

  /** Lowest sequence with `timestamp >= at`, or `null`. */
  firstSequenceAt(partition: number, at: number): number | null {
    const { events, monotonic, base, head } = this.#part(partition);
    if (monotonic) {
      let lo = head;
      let hi = events.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (events[mid]!.timestamp.getTime() < at) lo = mid + 1;
        else hi = mid;
      }
      return lo < events.length ? base + lo + 1 : null;
    }
    // Caller-supplied timestamps went backwards in this partition: only a scan is exact.
    for (let i = head; i < events.length; i++) if (events[i]!.timestamp.getTime() >= at) return base + i + 1;
    return null;
  }

  /** Query is a filtered scan within the sequence bounds, then an order by `(timestamp, partition, sequence)`. */
  query(q: NormalizedQuery): QueryResult {
    const parts = q.partition === null ? [...this.#parts.keys()] : [q.partition];
    const matches: RheoEvent[] = [];
    const test = eventFilter(q);
    for (const p of parts) {
      const part = this.#parts[p];
      if (!part) continue;
      const { events, base, head } = part;
      const lo = Math.max(head, (q.afterSequence ?? 0) - base);
      const hi = Math.min(events.length, (q.untilSequence ?? Number.MAX_SAFE_INTEGER) - base);
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

  /** Every retained event of one partition that matches a replay's filter, in sequence order (a scan of the partition). */
  matching(partition: number, q: ReplayQuery): RheoEvent[] {
    const test = eventFilter(q);
    const { events, head } = this.#part(partition);
    const matched: RheoEvent[] = [];
    // Trimmed events stay in the array below `head` until a compaction: never match them.
    for (let i = head; i < events.length; i++) if (test(events[i]!)) matched.push(events[i]!);
    return matched;
  }

  #part(partition: number): PartitionLog {
    const part = this.#parts[partition];
    if (!part) throw new RangeError(`partition ${partition} of ${this.name}`);
    return part;
  }
}

function positionOf(e: RheoEvent): QueryPosition {
  return { timestampMs: e.timestamp.getTime(), partition: e.partition, sequence: e.sequence };
}

function isAfter(p: QueryPosition, cursor: QueryPosition, order: 'asc' | 'desc'): boolean {
  const c = comparePositions(p, cursor);
  return order === 'asc' ? c > 0 : c < 0;
}
