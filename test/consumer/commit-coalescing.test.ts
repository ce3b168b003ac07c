import { afterEach, describe, expect, it } from 'vitest';
import type { Backend, CommitOp } from '../../src/core/backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { createRheo, type Rheo } from '../../src/index.js';
import { backendFactories } from '../support/backends.js';
import { waitFor } from './harness.js';

/**
 * The backend as the facade sees it, with every `commit` call recorded (the
 * partitions it carried) and held for one macrotask, so that the commits a
 * member's partitions ask for meanwhile pile up and go out together.
 */
function recordingCommits(inner: Backend): { backend: Backend; calls: number[][] } {
  const calls: number[][] = [];
  const commit = async (ops: CommitOp[]): Promise<unknown> => {
    calls.push(ops.map((op) => op.partition));
    await new Promise((resolve) => setImmediate(resolve));
    return (inner as unknown as { commit(ops: CommitOp[]): Promise<unknown> }).commit(ops);
  };
  const backend = new Proxy(inner, {
    get(target, property) {
      if (property === 'commit') return commit;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { backend, calls };
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
      const { backend, calls } = recordingCommits(await factory.make(clock));
      rheo = createRheo({ backend, clock, defaults: { pollMs: 5 } });
      await rheo.createStream('s', { partitions: 8 });
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', Array.from({ length: 800 }, (_, i) => ({ partition: i % 8, key: `k${i % 3}`, payload: { i } })));
      const member = rheo.consume({ stream: 's', group: 'g', assignment: 'partitions', orderBy: 'key', batchSize: 5, concurrency: 16, handler: () => {} });
      const live = rheo;
      await waitFor(async () => (await live.lag('s', 'g')).lag === 0, 'the group to drain', 30_000);
      await member.stop();
      const repeated = calls.filter((partitions) => new Set(partitions).size !== partitions.length);
      expect(repeated, `commit calls carrying one partition twice: ${JSON.stringify(repeated.slice(0, 3))}`).toEqual([]);
      // The check means something only if calls did carry several partitions.
      expect(Math.max(...calls.map((partitions) => partitions.length))).toBeGreaterThan(1);
    }, 60_000);
  });
}
