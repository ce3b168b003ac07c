import { describe, expect, it } from 'vitest';
import { duplicatesBeyond, zombieHandlings, type Committed, type Handled } from './partition-ownership.js';

const handled = (member: string, t: number, sequence: number, generation: number): Handled => ({ member, t, partition: 3, sequence, key: 'k', generation });
const commit = (member: string, upTo: number, generation: number, t: number, status = 'ok'): Committed => ({ member, t, sentAt: t, partition: 3, upTo, generation, status });

describe('partition chaos: duplicates beyond at-least-once', () => {
  it('allows an event handled again after its first tenure ended uncommitted', () => {
    const h = [handled('m2', 1, 16, 4), handled('m1', 2, 16, 5), handled('m1', 3, 16, 6)];
    expect(duplicatesBeyond(h, [commit('m2', 15, 4, 1.5), commit('m1', 15, 5, 2.5, 'stale_generation'), commit('m1', 16, 6, 3.5)])).toEqual([]);
  });

  it('reports an event handled again after a commit covered it', () => {
    const h = [handled('m2', 1, 16, 4), handled('m1', 2, 16, 5)];
    expect(duplicatesBeyond(h, [commit('m2', 17, 4, 1.5), commit('m1', 16, 5, 2.5)])).toEqual(['3:16 handled 2 times, again after a commit covered it']);
  });

  it('allows a replaced owner to finish the handler it was running (a paused owner resuming), but not a new owner to read below a commit', () => {
    // m1 (generation 4) was paused mid-handler; m2 took over at 5, handled 16 and committed it; m1 resumed and finished 16.
    const zombie = [handled('m2', 1, 16, 5), handled('m1', 2, 16, 4)];
    const commits = [commit('m2', 16, 5, 1.5), commit('m1', 16, 4, 2.5, 'stale_generation')];
    expect(duplicatesBeyond(zombie, commits)).toEqual([]);
    expect([...zombieHandlings(zombie, commits)].map((h) => h.member)).toEqual(['m1']);
    // The same two handlings the other way round: generation 5 handled 16 after generation 4 committed it.
    const reread = [handled('m1', 1, 16, 4), handled('m2', 2, 16, 5)];
    expect(duplicatesBeyond(reread, [commit('m1', 16, 4, 1.5)])).toEqual(['3:16 handled 2 times, again after a commit covered it']);
  });
});
