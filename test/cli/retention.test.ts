import { beforeAll, describe, expect, it } from 'vitest';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { databaseUrl, makeTestBackend } from '../support/postgres.js';
import { makeRedisTestBackend, useRedis } from '../support/redis.js';
import { ensureBuilt, runCli } from './run-cli.js';

beforeAll(() => ensureBuilt(), 300_000);
const redis = useRedis('single');

type Fixture = () => Promise<{ rheo: Rheo; flags: string[] }>;

/** The same CLI cases on each backend with the `retention` capability: a postgres:// or a redis:// URL. */
const fixtures: Array<[string, Fixture]> = [
  [
    'postgres',
    async () => {
      const backend = await makeTestBackend();
      return { rheo: createRheo({ backend, retention: { enabled: false } }), flags: ['--url', databaseUrl(), '--schema', backend.schema] };
    },
  ],
  [
    'redis',
    async () => {
      const backend = await makeRedisTestBackend(redis());
      return { rheo: createRheo({ backend, retention: { enabled: false } }), flags: ['--url', redis().urls[0]!, '--schema', backend.prefix] };
    },
  ],
];

async function lows(rheo: Rheo, stream: string): Promise<number[]> {
  const info = (await rheo.listStreams()).find((s) => s.name === stream)!;
  return Object.values(info.watermarks).map((w) => w.lowWatermark);
}

for (const [backendName, fixture] of fixtures) describe(`rheo retention, trim, delete-group, delete-stream (${backendName})`, () => {
  it('retention shows, sets and clears the policy; a bad duration is a usage error', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('s');
    expect((await runCli(['retention', 's', ...flags])).stdout).toContain('keep everything');
    const set = await runCli(['retention', 's', '--max-age', '7d', '--max-events', '1000', '--json', ...flags]);
    expect(set.code).toBe(0);
    expect(JSON.parse(set.stdout)).toEqual({ stream: 's', retention: { maxAgeMs: 7 * 86_400_000, maxEvents: 1000 } });
    expect((await runCli(['retention', 's', ...flags])).stdout).toContain('max age 7d, max 1000 events per partition');
    expect((await runCli(['streams', ...flags])).stdout).toMatch(/s\s+1\s+0\s+0\s+max age 7d/);
    const bad = await runCli(['retention', 's', '--max-age', 'forever', ...flags]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--max-age');
    expect((await runCli(['retention', 's', '--clear', '--max-events', '3', ...flags])).code).toBe(2);
    expect((await rheo.listStreams())[0]!.retention).toEqual({ maxAgeMs: 7 * 86_400_000, maxEvents: 1000 });
    expect((await runCli(['retention', 's', '--clear', ...flags])).code).toBe(0);
    expect((await rheo.listStreams())[0]!.retention).toBeNull();
    expect((await runCli(['retention', 'missing', '--max-events', '1', ...flags])).code).toBe(3);
  });

  it('trim --dry-run prints what would go and changes nothing; trim then does exactly that', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('s', { partitions: 2 });
    await rheo.createGroup('s', 'g');
    await rheo.appendBatch('s', Array.from({ length: 10 }, (_, i) => ({ payload: i, partition: i % 2 })));
    const leases = await rheo.fetch('s', 'g', { limit: 10, partitions: [0] });
    await rheo.ackMany(leases.slice(0, 3)); // partition 0: frontier 3 of 5; partition 1: frontier 0
    const dry = await runCli(['trim', 's', '--keep', '1', '--dry-run', '--json', ...flags]);
    expect(dry.code).toBe(0);
    const plan = JSON.parse(dry.stdout) as { deleted: number; partitions: Record<string, { deleted: number; lowWatermark: number }> };
    expect(plan).toMatchObject({ stream: 's', dryRun: true, deleted: 3, forced: [] });
    expect(plan.partitions).toEqual({ 0: { deleted: 3, lowWatermark: 4 }, 1: { deleted: 0, lowWatermark: 1 } });
    expect(await lows(rheo, 's')).toEqual([1, 1]);
    const done = await runCli(['trim', 's', '--keep', '1', '--json', ...flags]);
    expect(JSON.parse(done.stdout)).toEqual({ stream: 's', deleted: 3, partitions: plan.partitions, forced: [] });
    expect(await lows(rheo, 's')).toEqual([4, 1]);

    const forcedDry = await runCli(['trim', 's', '--keep', '1', '--force', '--dry-run', ...flags]);
    expect(forcedDry.stdout).toContain('would trim 5 event(s)');
    expect(forcedDry.stdout).toMatch(/g\s+1\s+4/); // partition 1: sequences 1..4 above frontier 0
    const forced = await runCli(['trim', 's', '--keep', '1', '--force', ...flags]);
    expect(forced.code).toBe(0);
    expect(forced.stdout).toContain('trimmed 5 event(s) from stream "s"');
    expect(forced.stdout).toMatch(/UNSETTLED REMOVED/);
    expect(forced.stdout).toMatch(/g\s+0\s+1/); // partition 0: sequence 4 was leased, not acked
    expect(forced.stdout).toMatch(/g\s+1\s+4/);
    expect(await lows(rheo, 's')).toEqual([5, 5]);

    const described = await runCli(['describe', 's', 'g', ...flags]);
    // PARTITION LOW FRONTIER HIGH LAG OLDEST LEASES DEAD
    expect(described.stdout).toMatch(/^\s*1\s+5\s+4\s+5\s+1\s+\S+\s+0\s+0$/m);
    expect(described.stdout).toContain('retention: keep everything');
    // GROUP PARTITION LAG OLDEST LOW FRONTIER HIGH
    expect((await runCli(['lag', 's', 'g', ...flags])).stdout).toMatch(/^\s*g\s+1\s+1\s+\S+\s+5\s+4\s+5$/m);
    expect((await runCli(['trim', 'missing', ...flags])).code).toBe(3);
    expect((await runCli(['trim', 's', '--keep', '-1', ...flags])).code).toBe(2);
  });

  it('delete-group and delete-stream refuse without --confirm and delete with it', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    await rheo.append('s', { payload: 1 });
    const refused = await runCli(['delete-group', 's', 'g', ...flags]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('confirm_required');
    expect(await rheo.listGroups('s')).toEqual(['g']);
    expect((await runCli(['delete-group', 's', 'g', '--confirm', ...flags])).code).toBe(0);
    expect(await rheo.listGroups('s')).toEqual([]);
    const missing = await runCli(['delete-group', 's', 'g', '--confirm', ...flags]);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toContain('group "g" does not exist on stream "s"');

    expect((await runCli(['delete-stream', 's', ...flags])).code).toBe(2);
    expect((await rheo.listStreams()).map((s) => s.name)).toEqual(['s']);
    const deleted = await runCli(['delete-stream', 's', '--confirm', '--json', ...flags]);
    expect(JSON.parse(deleted.stdout)).toEqual({ stream: 's', deleted: true });
    expect(await rheo.listStreams()).toEqual([]);
    expect((await runCli(['delete-stream', 's', '--confirm', ...flags])).code).toBe(3);
    await rheo.close();
  });
});
