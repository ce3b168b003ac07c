import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MinHeap } from '../../src/backends/memory/min-heap.js';

describe('MinHeap', () => {
  it('pops in order whatever was pushed, popped and retained in between', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.integer({ min: 0, max: 100 }), fc.constant('pop' as const), fc.constant('retain' as const)), {
          maxLength: 200,
        }),
        (ops) => {
          const heap = new MinHeap<number>((a, b) => a < b);
          let model: number[] = [];
          for (const op of ops) {
            if (op === 'pop') {
              model.sort((a, b) => a - b);
              expect(heap.pop()).toBe(model.shift());
            } else if (op === 'retain') {
              heap.retain((v) => v % 2 === 0);
              model = model.filter((v) => v % 2 === 0);
            } else {
              heap.push(op);
              model.push(op);
            }
            expect(heap.size).toBe(model.length);
            expect(heap.peek()).toBe(model.length ? Math.min(...model) : undefined);
          }
          heap.clear();
          expect([heap.size, heap.pop()]).toEqual([0, undefined]);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('restores order at the root when retain drops the minimum', () => {
    const heap = new MinHeap<number>((a, b) => a < b);
    for (const v of [1, 4, 2]) heap.push(v);
    heap.retain((v) => v % 2 === 0);
    expect([heap.peek(), heap.pop(), heap.pop(), heap.pop()]).toEqual([2, 2, 4, undefined]);
  });
});
