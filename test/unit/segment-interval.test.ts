import { describe, expect, it } from 'vitest';
import { checkInterval, DEFAULT_SEGMENT_EVENTS } from '../../src/backends/postgres/segments.js';

describe('checkInterval: events between a process’s segment checks', () => {
  it('is a sixteenth of the count span, between 256 and 16,384 events', () => {
    expect(checkInterval(DEFAULT_SEGMENT_EVENTS, null, false)).toBe(16384);
    expect(checkInterval(16384, null, false)).toBe(1024);
    expect(checkInterval(8192, null, false)).toBe(512);
    // maxEvents / 4 is the span, under the backend's largest one.
    expect(checkInterval(DEFAULT_SEGMENT_EVENTS, 160_000, false)).toBe(2500);
    expect(checkInterval(16384, 160_000, false)).toBe(1024);
    expect(checkInterval(DEFAULT_SEGMENT_EVENTS, 16_384, false)).toBe(256);
    expect(checkInterval(DEFAULT_SEGMENT_EVENTS, 1024, false)).toBe(256);
    expect(checkInterval(DEFAULT_SEGMENT_EVENTS, 1, false)).toBe(256);
    expect(checkInterval(256, null, false)).toBe(256);
  });

  it('stays at 256 under an age policy, whose segments open by time', () => {
    expect(checkInterval(DEFAULT_SEGMENT_EVENTS, null, true)).toBe(256);
    expect(checkInterval(DEFAULT_SEGMENT_EVENTS, 160_000, true)).toBe(256);
  });
});
