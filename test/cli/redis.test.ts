import { beforeAll, describe, expect, it } from 'vitest';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { makeRedisTestBackend, uniquePrefix, useRedis } from '../support/redis.js';
import { ensureBuilt, runCli } from './run-cli.js';

// The built binary against a throwaway redis-server: a redis:// URL selects
// the Redis backend and --schema names the key prefix.
beforeAll(() => ensureBuilt(), 300_000);
const redis = useRedis('single');

/** A migrated prefix of its own and a facade on it for setup and checks. */
async function fixture(): Promise<{ rheo: Rheo; flags: string[] }> {
  const backend = await makeRedisTestBackend(redis());
  return { rheo: createRheo({ backend }), flags: ['--url', redis().urls[0]!, '--schema', backend.prefix] };
}

describe('rheo CLI on Redis', () => {
  it('migrate is a successful no-op that leaves the prefix usable; --print-sql is refused (exit 2)', async () => {
    const flags = ['--url', redis().urls[0]!, '--schema', uniquePrefix()];
    const migrated = await runCli(['migrate', '--json', ...flags]);
    expect(migrated.code).toBe(0);
    expect(JSON.parse(migrated.stdout)).toEqual({ prefix: flags[3], applied: 0 });
    const again = await runCli(['migrate', ...flags]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('nothing to migrate');
    expect(JSON.parse((await runCli(['streams', '--json', ...flags])).stdout)).toEqual([]);
    const sql = await runCli(['migrate', '--print-sql', '--json', ...flags]);
    expect(sql.code).toBe(2);
    expect(JSON.parse(sql.stderr)).toMatchObject({ error: { code: 'unsupported' } });
  });

  it('lists streams and groups, describes a group and reports lag with the low watermark', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('orders', { partitions: 2 });
    await rheo.createGroup('orders', 'billing');
    await rheo.appendBatch('orders', [{ payload: 1, partition: 0 }, { payload: 2, partition: 0 }, { payload: 3, partition: 1 }]);
    const [lease] = await rheo.fetch('orders', 'billing', { limit: 1, partitions: [0] });
    await rheo.ack(lease!);

    const streams = await runCli(['streams', ...flags]);
    expect(streams.code).toBe(0);
    expect(streams.stdout).toMatch(/orders\s+2\s+1/);
    const groups = JSON.parse((await runCli(['groups', 'orders', '--json', ...flags])).stdout) as unknown;
    expect(groups).toMatchObject([{ group: 'billing', inflight: 0, deadLetters: 0, lag: { lag: 2 } }]);
    const described = JSON.parse((await runCli(['describe', 'orders', 'billing', '--json', ...flags])).stdout) as {
      lag: { partitions: Record<string, unknown> };
    };
    expect(described.lag.partitions['0']).toMatchObject({ lowWatermark: 1, frontier: 1, highWatermark: 2, lag: 1 });
    expect(described.lag.partitions['1']).toMatchObject({ lowWatermark: 1, frontier: 0, highWatermark: 1, lag: 1 });
    const lag = await runCli(['lag', 'orders', 'billing', ...flags]);
    expect(lag.code).toBe(0);
    // GROUP PARTITION LAG OLDEST LOW FRONTIER HIGH
    expect(lag.stdout).toMatch(/^billing\s+0\s+1\s+\S+\s+1\s+1\s+2$/m);
    const missing = await runCli(['describe', 'orders', 'nobody', ...flags]);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toContain('group "nobody" does not exist on stream "orders"');
  });

  it('appends and tails', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('s');
    const one = await runCli(['append', 's', '--payload', '{"a":1}', '--type', 'x', '--id', 'id-1', '--json', ...flags]);
    expect(one.code).toBe(0);
    expect(JSON.parse(one.stdout)).toMatchObject({ id: 'id-1', type: 'x', payload: { a: 1 }, sequence: 1 });
    const bulk = await runCli(['append', 's', ...flags], { input: `${JSON.stringify({ payload: 2, type: 'y' })}\n${JSON.stringify({ payload: 3, type: 'x' })}\n` });
    expect(bulk.stdout).toContain('appended 2 event(s)');
    const tail = await runCli(['tail', 's', '--type', 'x', '--json', ...flags]);
    expect(tail.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { payload: unknown }).payload)).toEqual([{ a: 1 }, 3]);
    expect((await rheo.read('s')).length).toBe(3);
  });

  it('pages dead letters and redrives them', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('jobs');
    await rheo.createGroup('jobs', 'workers');
    await rheo.appendBatch('jobs', [0, 1, 2].map((n) => ({ payload: { n }, id: `job-${n}` })));
    for (const lease of await rheo.fetch('jobs', 'workers', { limit: 3 })) await rheo.reject(lease, `bad input ${lease.event.id}`);
    const page = JSON.parse((await runCli(['dead-letters', 'jobs', 'workers', '--limit', '2', '--payload', '--json', ...flags])).stdout) as {
      deadLetters: Array<{ reason: string; event: { id: string; payload: unknown } }>;
      next: string | null;
    };
    expect(page.deadLetters.map((d) => d.event.id)).toEqual(['job-0', 'job-1']);
    expect(page.deadLetters[0]).toMatchObject({ reason: 'bad input job-0', event: { payload: { n: 0 } } });
    expect(page.next).not.toBeNull();
    const one = await runCli(['redrive', 'jobs', 'workers', '--event-id', 'job-1', '--json', ...flags]);
    expect(JSON.parse(one.stdout)).toEqual({ stream: 'jobs', group: 'workers', redriven: 1 });
    const rest = await runCli(['redrive', 'jobs', 'workers', ...flags]);
    expect(rest.stdout).toContain('redrove 2 dead letter(s)');
    expect((await rheo.groupInfo('jobs', 'workers')).deadLetters).toBe(0);
  });
});
