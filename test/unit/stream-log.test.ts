import { describe, expect, it } from 'vitest';
import { normalizeQuery } from '../../src/core/arguments.js';
import type { NormalizedQuery } from '../../src/core/backend.js';
import type { RheoEvent } from '../../src/core/types.js';
import { StreamLog } from '../../src/backends/memory/stream-log.js';

/*
 * The memory backend's log after a compaction: once more than 1,024 trimmed
 * events are more than half of a partition's array, they are spliced out and
 * `base` moves up. The conformance suite never appends that many, so every
 * lookup by sequence is checked here with `base` > 0, on two partitions whose
 * bases differ.
 */

const T0 = Date.UTC(2026, 0, 1);

function event(partition: number, sequence: number, timestampMs = T0 + sequence): RheoEvent {
  return {
    id: `p${partition}-${sequence}`,
    stream: 's',
    partition,
    sequence,
    type: sequence % 2 === 0 ? 'even' : 'odd',
    key: null,
    payload: { n: sequence },
    metadata: {},
    timestamp: new Date(timestampMs),
  };
}

/** A log with `count` events in partition 0 (sizes 10 bytes each) and 10 in partition 1. */
function filled(count: number): StreamLog {
  const log = new StreamLog('s', 2, new Date(T0));
  for (let s = 1; s <= count; s++) log.push(event(0, s), 10);
  for (let s = 1; s <= 10; s++) log.push(event(1, s), 10);
  return log;
}

/** The facade's defaults for a query (core/arguments.ts), with no byte budget and room for every event. */
function query(overrides: Partial<NormalizedQuery>): NormalizedQuery {
  return { ...normalizeQuery('s', {}, Number.MAX_SAFE_INTEGER), limit: 1000, ...overrides };
}

const sequences = (events: readonly RheoEvent[]): number[] => events.map((e) => e.sequence);

describe('StreamLog', () => {
  it('answers every lookup by sequence the same before and after a compaction', () => {
    const log = filled(3000);
    expect(log.trimTo(0, 1024)).toBe(1024); // head 1024: not yet compacted (needs > 1024)
    expect(log.trimTo(0, 1024)).toBe(0);
    expect(log.trimTo(0, 2000)).toBe(976); // head 2000 > 1024 and > half of 3000: compacted
    expect(log.trimTo(0, 1999)).toBe(0);
    expect([log.lowWatermark(0), log.highWatermark(0), log.nextSequence(0)]).toEqual([2001, 3000, 3001]);
    expect([log.lowWatermark(1), log.highWatermark(1)]).toEqual([1, 10]);
    expect(log.event(0, 2000)).toBeUndefined();
    expect(log.event(0, 1)).toBeUndefined();
    expect(log.event(0, 2001)?.id).toBe('p0-2001');
    expect(log.event(0, 3000)?.id).toBe('p0-3000');
    expect(log.event(0, 3001)).toBeUndefined();
    expect(log.size(0, 2000)).toBe(0);
    expect(log.size(0, 2500)).toBe(10);
    expect(log.byId.has('p0-2000')).toBe(false);
    expect(log.byId.has('p0-2001')).toBe(true);
    expect(sequences(log.read(0, 0, 3, Infinity))).toEqual([2001, 2002, 2003]);
    expect(sequences(log.read(0, 2500, 2, Infinity))).toEqual([2501, 2502]);
    expect(sequences(log.read(0, 2998, 5, Infinity))).toEqual([2999, 3000]);
    expect(sequences(log.read(0, 2500, 5, 25))).toEqual([2501, 2502]); // the third would pass 25 bytes
    expect(sequences(log.read(0, 2500, 5, 1))).toEqual([2501]); // the first always fits
    expect(sequences(log.matching(0, query({ types: ['odd'], from: new Date(T0 + 2990) })))).toEqual([2991, 2993, 2995, 2997, 2999]);
    // A trim past the end stops at the last event, and compacts again.
    expect(log.trimTo(0, 5000)).toBe(1000);
    expect([log.lowWatermark(0), log.highWatermark(0)]).toEqual([3001, 3000]);
    log.push(event(0, 3001), 10);
    expect(log.event(0, 3001)?.id).toBe('p0-3001');
    expect(sequences(log.read(0, 0, 10, Infinity))).toEqual([3001]);
  });

  it('finds sequences by time after a compaction, by binary search and by scan once timestamps went backwards', () => {
    const log = filled(3000);
    log.trimTo(0, 2000);
    expect(log.firstSequenceAt(0, T0)).toBe(2001);
    expect(log.firstSequenceAt(0, T0 + 2500)).toBe(2500);
    expect(log.firstSequenceAt(0, T0 + 2500.5)).toBe(2501);
    expect(log.firstSequenceAt(0, T0 + 3001)).toBeNull();
    expect(log.lastBefore(0, T0 + 2003, 100)).toBe(2002); // 2001 and 2002 are older than the cutoff
    expect(log.lastBefore(0, T0 + 2003, 1)).toBe(2001); // looks at most `limit` events
    expect(log.lastBefore(0, T0, 100)).toBe(2000); // the first retained is not old: lowWatermark - 1
    expect(log.lastBefore(0, T0 + 10_000, 5_000)).toBe(3000);

    log.push(event(0, 3001, T0 + 100), 10); // older than 3000: only a scan is exact now
    expect(log.firstSequenceAt(0, T0 + 2999)).toBe(2999);
    expect(log.firstSequenceAt(0, T0 + 100)).toBe(2001);
    expect(log.firstSequenceAt(0, T0 + 3000.5)).toBeNull();
    const shuffled = new StreamLog('t', 1, new Date(T0));
    [10, 50, 20, 30, 40].forEach((ms, i) => shuffled.push(event(0, i + 1, T0 + ms), 10));
    expect(shuffled.firstSequenceAt(0, T0 + 25)).toBe(2); // a binary search would land on 4
    const equal = filled(2);
    equal.push(event(0, 3, T0 + 2), 10); // same timestamp as 2: still monotonic
    expect(equal.firstSequenceAt(0, T0 + 2)).toBe(2);
  });

  it('queries within sequence bounds and across partitions after a compaction', () => {
    const log = filled(3000);
    log.trimTo(0, 2000);
    const page = log.query(query({ partition: 0, afterSequence: 2995, limit: 3 }));
    expect(sequences(page.events)).toEqual([2996, 2997, 2998]);
    expect(page.nextCursor).not.toBeNull();
    expect(sequences(log.query(query({ partition: 0, afterSequence: 10, untilSequence: 2003 })).events)).toEqual([2001, 2002, 2003]);
    expect(sequences(log.query(query({ partition: 0, untilSequence: 2000 })).events)).toEqual([]);
    const desc = log.query(query({ order: 'desc', limit: 2 }));
    expect(desc.events.map((e) => e.id)).toEqual(['p0-3000', 'p0-2999']);
    const all = log.query(query({ from: new Date(T0 + 1), to: new Date(T0 + 3) }));
    expect(all.events.map((e) => e.id)).toEqual(['p1-1', 'p1-2']);
    expect(all.nextCursor).toBeNull();
    const bytes = log.query(query({ partition: 1, maxBytes: 25 }));
    expect(sequences(bytes.events)).toEqual([1, 2]);
    expect(bytes.nextCursor).not.toBeNull();
    expect(sequences(log.query(query({ partition: 1, maxBytes: 5 })).events)).toEqual([1]);
    expect(log.query(query({ partition: 7 })).events).toEqual([]);
    expect(() => log.event(7, 1)).toThrow(/partition 7 of s/);
  });
});
