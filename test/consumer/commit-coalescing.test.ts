import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { createRheo, type Rheo } from '../../src/index.js';
import { backendFactories } from '../support/backends.js';
import { waitFor } from './harness.js';

/**
 * Records the partitions of every commit call a partition member makes through
 * its source (the rheo instance), and holds each call for one macrotask, so
 * that the commits its partitions ask for meanwhile pile up and go out together.
 */
function recordCommits(rheo: Rheo): number[][] {
  const calls: number[][] = [];
  const commit = rheo.commit.bind(rheo);
  rheo.commit = async (ops, options) => {
    calls.push(ops.map((op) => op.partition));
    await new Promise((resolve) => setImmediate(resolve));
    return commit(ops, options);
  };
  return calls;
}

for (const factory of backendFactories.filter((f) => f.name !== 'redis')) {
  describe(`a partition member's commits (${factory.name})`, () => {
    let rheo: Rheo | null = null;
    afterEach(async () => {
      await rheo?.close();
      rheo = null;
    });

    it('share calls across partitions, and one call never carries two commits of one partition', async () => {
      const clock = new ManualClock();
      const live = createRheo({ backend: await factory.make(clock), clock, defaults: { pollMs: 5 } });
      rheo = live;
      const calls = recordCommits(live);
      await live.createStream('s', { partitions: 8 });
      await live.createGroup('s', 'g');
      await live.appendBatch('s', Array.from({ length: 800 }, (_, i) => ({ partition: i % 8, key: `k${i % 3}`, payload: { i } })));
      const member = live.consume({ stream: 's', group: 'g', assignment: 'partitions', orderBy: 'key', batchSize: 5, concurrency: 16, handler: () => {} });
      // The facade refuses a call with two commits of one partition (invalid_argument): the member would report it here.
      const commitErrors: unknown[] = [];
      member.on('ownership-error', (event) => {
        if (event.op === 'commit') commitErrors.push(event.error);
      });
      await waitFor(async () => (await live.lag('s', 'g')).lag === 0, 'the group to drain', 30_000);
      await member.stop();
      const repeated = calls.filter((partitions) => new Set(partitions).size !== partitions.length);
      expect(repeated, `commit calls carrying one partition twice: ${JSON.stringify(repeated.slice(0, 3))}`).toEqual([]);
      expect(commitErrors).toEqual([]);
      // The check means something only if calls did carry several partitions.
      expect(Math.max(...calls.map((partitions) => partitions.length))).toBeGreaterThan(1);
    }, 60_000);
  });
}
