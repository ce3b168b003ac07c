import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { intArrayLiteral, textArrayLiteral } from '../../src/backends/postgres/array-literal.js';
import { sharedPool } from '../support/postgres.js';

/** What PostgreSQL reads from the literal, as node-postgres hands it back. */
async function parsed<T>(literal: string, type: 'text[]' | 'int8[]'): Promise<T[]> {
  const { rows } = await sharedPool().query<{ a: T[] }>(`SELECT $1::${type} AS a`, [literal]);
  return rows[0]!.a;
}

describe('PostgreSQL array literals', () => {
  it('plain lease ids and integers go out unquoted', () => {
    expect(textArrayLiteral(['a1', 'b-2', 'c_3.d:4'])).toBe('{a1,b-2,c_3.d:4}');
    expect(intArrayLiteral([1, 20, 300])).toBe('{1,20,300}');
  });

  it('reads back exactly: separators, quotes, backslashes, braces, spaces, empty strings, NULL as a word and as null', async () => {
    const values = ['a,b', 'say "hi"', 'back\\slash', '{x}', ' padded ', '', 'NULL', 'null', null, 'plain', 'é ü', '\t'];
    expect(await parsed<string | null>(textArrayLiteral(values), 'text[]')).toEqual(values);
  });

  it('reads back any text array, and any integer array, as given', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.option(fc.string({ unit: 'grapheme' }).filter((s) => !s.includes('\u0000')), { nil: null }), { maxLength: 8 }), async (values) => {
        expect(await parsed<string | null>(textArrayLiteral(values), 'text[]')).toEqual(values);
      }),
      { numRuns: 100 },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 8 }), async (values) => {
        expect((await parsed<string>(intArrayLiteral(values), 'int8[]')).map(Number)).toEqual(values);
      }),
      { numRuns: 50 },
    );
  });

  it('carries JSON texts (the payloads and metadata of an append) into jsonb[] as they were', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.jsonValue({ maxDepth: 3 }), { minLength: 1, maxLength: 6 }), async (values) => {
        const texts = values.map((v) => JSON.stringify(v));
        const { rows } = await sharedPool().query<{ a: string[] }>('SELECT array_agg(j::text ORDER BY o) AS a FROM unnest($1::jsonb[]) WITH ORDINALITY AS u(j, o)', [
          textArrayLiteral(texts),
        ]);
        // jsonb normalises (key order, spacing, numbers); compare it with what PostgreSQL makes of each text alone.
        const alone = await Promise.all(texts.map(async (t) => (await sharedPool().query<{ j: string }>('SELECT $1::jsonb::text AS j', [t])).rows[0]!.j));
        expect(rows[0]!.a).toEqual(alone);
      }),
      { numRuns: 60 },
    );
  });

  it('refuses what is not an integer rather than send a literal that means something else', () => {
    expect(() => intArrayLiteral([1, 1.5])).toThrow(TypeError);
    expect(() => intArrayLiteral([Number.NaN])).toThrow(TypeError);
  });
});
