import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planCounts, planFetch } from '../../src/backends/redis/fetch-plan.js';

describe('redis fetch plan by counts', () => {
  it('gives each partition what the walk by sizes gives it when the budget cannot stop the walk', () => {
    fc.assert(
      fc.property(fc.array(fc.option(fc.nat(12), { nil: null }), { minLength: 1, maxLength: 8 }), fc.integer({ min: 1, max: 40 }), (held, limit) => {
        // null: at least as many as the walk could ask (PEEK would cut its list at the limit).
        const known = held.map((n) => n ?? Number.POSITIVE_INFINITY);
        const peeks = held.map((n, partition) => ({ partition, sizes: Array<number>(n ?? limit).fill(1), more: n === null }));
        const bySizes = planFetch(peeks, limit, Number.MAX_SAFE_INTEGER).shares.map((s) => s.claims);
        expect(planCounts(known, limit)).toEqual(bySizes);
      }),
    );
  });

  it('fills the earliest partitions of the rotation first, and stops at what is known to be there', () => {
    expect(planCounts([Infinity, Infinity, Infinity, Infinity], 6)).toEqual([2, 2, 1, 1]);
    expect(planCounts([Infinity, Infinity, Infinity, 0], 6)).toEqual([2, 2, 2, 0]);
    expect(planCounts([1, Infinity, 0], 6)).toEqual([1, 5, 0]);
    expect(planCounts([1, 2, 0], 6)).toEqual([1, 2, 0]);
  });
});
