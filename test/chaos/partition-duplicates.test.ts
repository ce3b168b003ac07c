import { describe, expect, it } from 'vitest';
import { duplicatesBeyond, type Committed, type Handled } from './partition-ownership.js';

const handled = (member: string, t: number, sequence: number, generation: number): Handled => ({ member, t, partition: 3, sequence, key: 'k', generation });
const commit = (member: string, upTo: number, generation: number, status = 'ok'): Committed => ({ member, t: 0, sentAt: 0, partition: 3, upTo, generation, status });

describe('partition chaos: duplicates beyond at-least-once', () => {
  it('allows an event handled again after its first tenure ended uncommitted', () => {
    const h = [handled('m2', 1, 16, 4), handled('m1', 2, 16, 5), handled('m1', 3, 16, 6)];
    expect(duplicatesBeyond(h, [commit('m2', 15, 4), commit('m1', 15, 5, 'stale_generation'), commit('m1', 16, 6)])).toEqual([]);
  });

  it('reports an event handled again after a commit covered it', () => {
    const h = [handled('m2', 1, 16, 4), handled('m1', 2, 16, 5)];
    expect(duplicatesBeyond(h, [commit('m2', 17, 4), commit('m1', 16, 5)])).toEqual(['3:16 handled 2 times, again after a commit covered it']);
  });
});
