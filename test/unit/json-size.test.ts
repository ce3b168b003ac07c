import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { prepareAppend } from '../../src/core/arguments.js';
import { ManualClock } from '../../src/core/clock.js';
import { jsonNumberBytes, jsonStringBytes } from '../../src/core/json-size.js';
import type { JsonValue } from '../../src/core/types.js';

const clock = new ManualClock();

function sizeOf(payload: JsonValue, metadata?: Record<string, JsonValue>): number {
  return prepareAppend(clock, { payload, metadata }, 'input', { stream: 's', maxEventBytes: 2 ** 30 }).size;
}

describe('the event size rule', () => {
  it('is the UTF-8 length of payload JSON plus metadata JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.dictionary(fc.string(), fc.jsonValue()), (payload, metadata) => {
        const p = payload as JsonValue;
        const m = metadata as Record<string, JsonValue>;
        const expected = Buffer.byteLength(JSON.stringify(p)) + Buffer.byteLength(JSON.stringify(m));
        // Numbers in exponent form count their plain decimal digits instead (checked separately).
        if (/\d[eE][+-]?\d/.test(JSON.stringify(p) + JSON.stringify(m))) return;
        expect(sizeOf(p, m)).toBe(expected);
      }),
      { numRuns: 500 },
    );
  });

  it('counts escapes as JSON.stringify writes them', () => {
    for (const s of ['', 'plain', 'q"uote', 'back\\slash', '\b\f\n\r\t', '\u0001\u001f\u007f', 'é', '€', '\u{1F600}', '\u2028']) {
      expect(jsonStringBytes(s)).toBe(Buffer.byteLength(JSON.stringify(s)));
    }
  });

  it('counts numbers in exponent form by their plain decimal digits', () => {
    const cases: Array<[number, string]> = [
      [1e21, '1000000000000000000000'],
      [-1.5e21, '-1500000000000000000000'],
      [1.2345e25, '12345000000000000000000000'],
      [1.5e-7, '0.00000015'],
      [-1e-7, '-0.0000001'],
      [5e-324, `0.${'0'.repeat(323)}5`],
      [123.456, '123.456'],
      [-0, '0'],
    ];
    for (const [n, text] of cases) expect([n, jsonNumberBytes(n)]).toEqual([n, text.length]);
  });
});
