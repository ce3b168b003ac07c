import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { LATEST_VERSION, MIGRATIONS } from '../../src/backends/postgres/migrations/index.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { databaseUrl, makeTestBackend, sharedPool, uniqueSchema } from '../support/postgres.js';
import { CLI, ROOT, cleanEnv, ensureBuilt, runCli, waitForOutput } from './run-cli.js';

beforeAll(() => ensureBuilt(), 300_000);

/** A migrated schema of its own and a facade on it for setup and checks. */
async function fixture(): Promise<{ rheo: Rheo; flags: string[]; schema: string }> {
  const backend = await makeTestBackend();
  return { rheo: createRheo({ backend }), flags: ['--url', databaseUrl(), '--schema', backend.schema], schema: backend.schema };
}

async function schemaExists(schema: string): Promise<boolean> {
  const { rows } = await sharedPool().query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
  return rows.length === 1;
}

describe('rheo CLI: usage and connection', () => {
  it('prints help for the program and every command, with the exit codes', async () => {
    const top = await runCli(['--help']);
    expect(top.code).toBe(0);
    const commands = [
      'migrate', 'streams', 'groups', 'describe', 'lag', 'dead-letters', 'redrive', 'replay', 'reset',
      'retention', 'trim', 'delete-group', 'delete-stream', 'tail', 'append',
    ];
    for (const name of commands) expect(top.stdout).toContain(name);
    expect(top.stdout).toContain('Exit codes:');
    for (const name of commands) {
      const help = await runCli([name, '--help']);
      expect(help.code, name).toBe(0);
      expect(help.stdout, name).toContain(`Usage: rheo ${name}`);
      expect(help.stdout, name).toContain('3  not found');
    }
  });

  it('runs as an executable through its hashbang, as npx rheo does', async () => {
    const result = await new Promise<{ code: number | null; out: string }>((resolve, reject) => {
      const child = spawn(CLI, ['--help'], { cwd: ROOT, env: cleanEnv() });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, out }));
    });
    expect(result.code).toBe(0);
    expect(result.out).toContain('Usage: rheo');
  });

  it('rejects unknown commands and bad flag values as usage errors (exit 2)', async () => {
    expect((await runCli(['frobnicate'])).code).toBe(2);
    const bad = await runCli(['dead-letters', 's', 'g', '--limit', 'many', '--url', databaseUrl()]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--limit');
  });

  it('requires a database URL: the memory backend cannot be shared between processes', async () => {
    const result = await runCli(['streams']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('RHEO_DATABASE_URL');
  });

  it('reads the URL and schema from the environment', async () => {
    const { rheo, schema } = await fixture();
    await rheo.createStream('from-env');
    const result = await runCli(['streams', '--json'], { env: cleanEnv({ RHEO_DATABASE_URL: databaseUrl(), RHEO_SCHEMA: schema }) });
    expect(result.code).toBe(0);
    expect((JSON.parse(result.stdout) as Array<{ name: string }>).map((s) => s.name)).toEqual(['from-env']);
  });

  it('refuses a URL that is neither postgres://, pglite:// nor redis:// as a usage error (exit 2)', async () => {
    const result = await runCli(['streams', '--url', 'mysql://127.0.0.1:3306/db', '--json']);
    expect(result.code).toBe(2);
    expect(JSON.parse(result.stderr)).toMatchObject({ error: { code: 'invalid_argument' } });
    expect(result.stderr).toContain('use postgres://, pglite:// or redis://');
  });

  it('takes a PGlite data directory as pglite://<dir>: migrate, then the same directory again', { timeout: 240_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rheo-cli-pglite-'));
    try {
      const url = `pglite://${join(dir, 'data')}`;
      const migrated = await runCli(['migrate', '--url', url]);
      expect(migrated.code, migrated.stderr).toBe(0);
      const streams = await runCli(['streams', '--url', url, '--json']);
      expect(streams.code, streams.stderr).toBe(0);
      expect(JSON.parse(streams.stdout)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits 4 when the database cannot be reached', async () => {
    const result = await runCli(['streams', '--url', 'postgres://postgres@127.0.0.1:1/none']);
    expect(result.code).toBe(4);
    expect(result.stderr).toContain('backend_unavailable');
  });

  it('exits 5 on a schema that was never migrated', async () => {
    const result = await runCli(['streams', '--url', databaseUrl(), '--schema', uniqueSchema()]);
    expect(result.code).toBe(5);
    expect(result.stderr).toContain('rheo.migrate()');
  });
});

describe('rheo migrate', () => {
  it('--print-sql shows the pending SQL and changes nothing; migrate applies it; then nothing is pending', async () => {
    const schema = uniqueSchema();
    const flags = ['--url', databaseUrl(), '--schema', schema];
    const plan = await runCli(['migrate', '--print-sql', ...flags]);
    expect(plan.code).toBe(0);
    expect(plan.stdout).toContain(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    expect(plan.stdout).toContain('-- migration 1 (init)');
    expect(plan.stdout).toContain('-- migration 2 (lease_ranges)');
    expect(plan.stdout).toContain(`-- migration ${LATEST_VERSION} (`);
    expect(plan.stdout).toContain('CREATE OR REPLACE FUNCTION');
    expect(await schemaExists(schema)).toBe(false);

    const applied = await runCli(['migrate', '--json', ...flags]);
    expect(applied.code).toBe(0);
    // How many migrations ran (versions may skip numbers while issues land in parallel).
    expect(JSON.parse(applied.stdout)).toEqual({ schema, applied: MIGRATIONS.length });
    expect((await runCli(['streams', ...flags])).code).toBe(0);

    const after = await runCli(['migrate', '--print-sql', '--json', ...flags]);
    expect(JSON.parse(after.stdout)).toEqual({ schema, statements: [] });
    expect((await runCli(['migrate', '--json', ...flags])).stdout).toContain('"applied":0');
  });
});

describe('rheo streams, groups, describe', () => {
  it('lists streams and groups and describes a group per partition, in tables and JSON', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('orders', { partitions: 2 });
    await rheo.createGroup('orders', 'billing');
    await rheo.appendBatch('orders', [
      { payload: 1, partition: 0 },
      { payload: 2, partition: 0 },
      { payload: 3, partition: 1 },
    ]);
    const [lease] = await rheo.fetch('orders', 'billing', { limit: 1, partitions: [0] });
    await rheo.ack(lease!);
    await rheo.fetch('orders', 'billing', { limit: 1, partitions: [1] });

    const streams = await runCli(['streams', ...flags]);
    expect(streams.stdout).toMatch(/orders\s+2\s+1/);

    const groups = JSON.parse((await runCli(['groups', 'orders', '--json', ...flags])).stdout) as Array<{ group: string; inflight: number }>;
    expect(groups).toMatchObject([{ group: 'billing', inflight: 1, deadLetters: 0, lag: { lag: 2 } }]);

    const described = JSON.parse((await runCli(['describe', 'orders', 'billing', '--json', ...flags])).stdout) as {
      lag: { partitions: Record<string, { frontier: number; highWatermark: number; lag: number }> };
    };
    expect(described.lag.partitions['0']).toMatchObject({ frontier: 1, highWatermark: 2, lag: 1 });
    expect(described.lag.partitions['1']).toMatchObject({ frontier: 0, highWatermark: 1, lag: 1 });

    const human = await runCli(['describe', 'orders', 'billing', ...flags]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain('leases held 1');
    // PARTITION LOW FRONTIER HIGH LAG OLDEST LEASES DEAD
    expect(human.stdout).toMatch(/^\s*0\s+1\s+1\s+2\s+1\s+\d+s\s+0\s+0$/m);
    expect(human.stdout).toMatch(/^\s*1\s+1\s+0\s+1\s+1\s+\d+s\s+1\s+0$/m);
  });

  it('exits 3 with an error that names the stream and group when either is missing', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('orders');
    const group = await runCli(['describe', 'orders', 'nobody', ...flags]);
    expect(group.code).toBe(3);
    expect(group.stderr).toContain('group "nobody" does not exist on stream "orders"');
    const stream = await runCli(['groups', 'missing', '--json', ...flags]);
    expect(stream.code).toBe(3);
    expect(JSON.parse(stream.stderr)).toMatchObject({ error: { code: 'stream_not_found', stream: 'missing' } });
  });
});

describe('rheo dead-letters, redrive, replay, reset', () => {
  async function withDeadLetters(count: number): Promise<{ rheo: Rheo; flags: string[]; ids: string[] }> {
    const f = await fixture();
    await f.rheo.createStream('jobs');
    await f.rheo.createGroup('jobs', 'workers');
    const events = await f.rheo.appendBatch('jobs', Array.from({ length: count }, (_, i) => ({ payload: { n: i }, id: `job-${i}` })));
    for (const lease of await f.rheo.fetch('jobs', 'workers', { limit: count })) await f.rheo.reject(lease, `bad input ${lease.event.id}`);
    return { ...f, ids: events.map((e) => e.id) };
  }

  it('pages dead letters, shows payloads on request, and redrives them', async () => {
    const { rheo, flags } = await withDeadLetters(3);
    const first = JSON.parse((await runCli(['dead-letters', 'jobs', 'workers', '--limit', '2', '--json', ...flags])).stdout) as {
      deadLetters: Array<{ id: string; reason: string; event: { id: string; payload?: unknown } }>;
      next: string;
    };
    expect(first.deadLetters.map((d) => d.event.id)).toEqual(['job-0', 'job-1']);
    expect(first.deadLetters[0]!.event.payload).toBeUndefined();
    expect(first.deadLetters[0]!.reason).toBe('bad input job-0');
    const second = JSON.parse(
      (await runCli(['dead-letters', 'jobs', 'workers', '--after', first.next, '--payload', '--json', ...flags])).stdout,
    ) as { deadLetters: Array<{ event: { id: string; payload: unknown } }>; next: string | null };
    expect(second.deadLetters).toMatchObject([{ event: { id: 'job-2', payload: { n: 2 } } }]);
    expect(second.next).toBeNull();

    const human = await runCli(['dead-letters', 'jobs', 'workers', '--limit', '2', '--payload', ...flags]);
    expect(human.stdout).toContain('payload  {"n":0}');
    expect(human.stdout).toContain(`--after ${first.next}`);

    const one = await runCli(['redrive', 'jobs', 'workers', '--event-id', 'job-1', '--json', ...flags]);
    expect(JSON.parse(one.stdout)).toEqual({ stream: 'jobs', group: 'workers', redriven: 1 });
    const rest = await runCli(['redrive', 'jobs', 'workers', ...flags]);
    expect(rest.stdout).toContain('redrove 2 dead letter(s)');
    expect((await rheo.groupInfo('jobs', 'workers')).deadLetters).toBe(0);
  });

  it('replay --dry-run prints the lag the replay would create and changes nothing; the replay then creates exactly that', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('log', { partitions: 2 });
    await rheo.createGroup('log', 'g');
    await rheo.appendBatch('log', Array.from({ length: 10 }, (_, i) => ({ payload: i, partition: i % 2 })));
    await rheo.ackMany(await rheo.fetch('log', 'g', { limit: 10 }));
    const before = await rheo.lag('log', 'g');
    expect(before.lag).toBe(0);

    const dry = await runCli(['replay', 'log', 'g', '--from-sequence', '3', '--dry-run', '--json', ...flags]);
    expect(dry.code).toBe(0);
    const predicted = JSON.parse(dry.stdout) as { dryRun: boolean; lagAfter: number; partitions: Array<{ partition: number; lagAfter: number }> };
    expect(predicted).toMatchObject({ dryRun: true, lagBefore: 0, lagAfter: 6 });
    expect(predicted.partitions.map((p) => p.lagAfter)).toEqual([3, 3]);
    expect(await rheo.lag('log', 'g')).toEqual(before);

    const human = await runCli(['replay', 'log', 'g', '--from-sequence', '3', '--partition', '1', '--dry-run', ...flags]);
    expect(human.stdout).toContain('from 0 to 3; nothing changed');

    const real = await runCli(['replay', 'log', 'g', '--from-sequence', '3', '--json', ...flags]);
    expect(JSON.parse(real.stdout)).toMatchObject({ dryRun: false, lagAfter: 6 });
    expect((await rheo.lag('log', 'g')).lag).toBe(6);
  });

  it('replay --dry-run --from resolves the time per partition', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('log');
    await rheo.createGroup('log', 'g');
    const base = Date.parse('2026-01-01T00:00:00Z');
    await rheo.appendBatch('log', Array.from({ length: 5 }, (_, i) => ({ payload: i, timestamp: new Date(base + i * 60_000) })));
    await rheo.ackMany(await rheo.fetch('log', 'g', { limit: 5 }));
    const dry = await runCli(['replay', 'log', 'g', '--from', '2026-01-01T00:02:00Z', '--dry-run', '--json', ...flags]);
    expect(JSON.parse(dry.stdout)).toMatchObject({ lagAfter: 3, partitions: [{ partition: 0, frontierAfter: 2 }] });
    expect((await rheo.lag('log', 'g')).lag).toBe(0);
  });

  it('replay --dry-run --event-id predicts the lag of reopening exactly those events; the replay then creates exactly that', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('log', { partitions: 2 });
    await rheo.createGroup('log', 'g');
    await rheo.appendBatch('log', Array.from({ length: 10 }, (_, i) => ({ id: `e-${i}`, payload: i, partition: i % 2 })));
    await rheo.ackMany(await rheo.fetch('log', 'g', { limit: 10 }));
    const before = await rheo.lag('log', 'g');
    // e-4 is sequence 3 of partition 0 (frontier 5 -> 2); e-9 is sequence 5 of partition 1 (5 -> 4).
    const dry = await runCli(['replay', 'log', 'g', '--event-id', 'e-9', '--event-id', 'e-4', '--dry-run', '--json', ...flags]);
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({
      dryRun: true,
      lagBefore: 0,
      lagAfter: 4,
      partitions: [
        { partition: 0, frontierAfter: 2, lagAfter: 3 },
        { partition: 1, frontierAfter: 4, lagAfter: 1 },
      ],
    });
    expect(await rheo.lag('log', 'g')).toEqual(before);
    const missing = await runCli(['replay', 'log', 'g', '--event-id', 'nope', '--dry-run', ...flags]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('"nope"');
    const real = await runCli(['replay', 'log', 'g', '--event-id', 'e-9', '--event-id', 'e-4', '--json', ...flags]);
    expect(JSON.parse(real.stdout)).toMatchObject({ dryRun: false, lagAfter: 4 });
    expect((await rheo.lag('log', 'g')).lag).toBe(4);
  });

  it('describe shows the owner of each partition and the members when the group is consumed by partition ownership', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('own', { partitions: 2 });
    await rheo.createGroup('own', 'g');
    const plain = await runCli(['describe', 'own', 'g', ...flags]);
    expect(plain.stdout).not.toContain('OWNER');
    await rheo.heartbeat('own', 'g', { memberId: 'member-a', sessionMs: 600_000 });
    const owned = await runCli(['describe', 'own', 'g', ...flags]);
    expect(owned.code).toBe(0);
    expect(owned.stdout).toMatch(/OWNER/);
    expect(owned.stdout).toMatch(/\n\s*0\s.*member-a/);
    expect(owned.stdout).toMatch(/members \(partition ownership, group generation \d+\)/);
    expect(owned.stdout).toMatch(/member-a\s+0,1\s+-/);
    const json = JSON.parse((await runCli(['describe', 'own', 'g', '--json', ...flags])).stdout) as { membership: { owners: Record<string, string> } };
    expect(json.membership.owners).toEqual({ 0: 'member-a', 1: 'member-a' });
  });

  it('replay needs exactly one starting point (exit 2, nothing changes)', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('log');
    await rheo.createGroup('log', 'g');
    const result = await runCli(['replay', 'log', 'g', '--from-sequence', '1', '--event-id', 'x', ...flags]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('group "g" on stream "log"');
  });

  it('reset refuses without --confirm (exit 2) and resets with it', async () => {
    const { rheo, flags } = await withDeadLetters(2);
    const refused = await runCli(['reset', 'jobs', 'workers', ...flags]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('confirm_required');
    expect((await rheo.groupInfo('jobs', 'workers')).deadLetters).toBe(2);

    const reset = await runCli(['reset', 'jobs', 'workers', '--confirm', '--json', ...flags]);
    expect(reset.code).toBe(0);
    expect(JSON.parse(reset.stdout)).toEqual({ stream: 'jobs', group: 'workers', reset: true, lag: 2 });
    expect((await rheo.groupInfo('jobs', 'workers')).deadLetters).toBe(0);
  });
});

describe('rheo append and tail', () => {
  it('appends thousands of NDJSON events from standard input with their ids', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('bulk', { partitions: 3 });
    const count = 3000;
    const input = Array.from({ length: count }, (_, i) => JSON.stringify({ id: `e-${i}`, key: `k-${i % 7}`, type: 'bulk.item', payload: { i } })).join('\n');
    const result = await runCli(['append', 'bulk', ...flags], { input });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`appended ${count} event(s)`);
    const seen = new Set<string>();
    for (let p = 0; p < 3; p++) {
      for (let after = 0; ; ) {
        const page = await rheo.read('bulk', { partition: p, after, limit: 1000 });
        if (page.length === 0) break;
        for (const e of page) seen.add(e.id);
        after = page[page.length - 1]!.sequence;
      }
    }
    expect(seen.size).toBe(count);
    expect(seen.has('e-0') && seen.has(`e-${count - 1}`)).toBe(true);
  });

  it('a bad NDJSON line appends nothing and names the line', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('bulk');
    const input = `${JSON.stringify({ payload: 1 })}\n${JSON.stringify({ payload: 2 })}\n{"type":"no payload"}\n`;
    const result = await runCli(['append', 'bulk', '--batch-size', '1', ...flags], { input });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('line 3');
    expect(await rheo.read('bulk')).toEqual([]);
  });

  it('appends one event from flags and tails with filters', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('s');
    const one = await runCli(['append', 's', '--payload', '{"a":1}', '--type', 'x', '--key', 'k', '--id', 'id-1', '--json', ...flags]);
    expect(one.code).toBe(0);
    expect(JSON.parse(one.stdout)).toMatchObject({ id: 'id-1', type: 'x', key: 'k', payload: { a: 1 }, sequence: 1 });
    await rheo.append('s', { payload: 2, type: 'y' });
    const tail = await runCli(['tail', 's', '--type', 'x', '--json', ...flags]);
    expect(tail.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { id: string }).id)).toEqual(['id-1']);
    const missing = await runCli(['tail', 'nope', ...flags]);
    expect(missing.code).toBe(3);
  });

  it('tail --follow prints events appended after it started, until interrupted', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('s');
    await rheo.append('s', { payload: 'old' });
    const child = spawn(process.execPath, [CLI, 'tail', 's', '--follow', '--poll-ms', '100', '--json', ...flags], { env: cleanEnv() });
    await waitForOutput(child, (out) => out.includes('"old"'), 'the existing event');
    const next = waitForOutput(child, (out) => out.includes('"new"'), 'the appended event');
    await rheo.append('s', { payload: 'new' });
    await next;
    const exit = new Promise<number | null>((resolve) => child.on('close', resolve));
    child.kill('SIGINT');
    expect(await exit).toBe(0);
  });
});

describe('rheo lag --watch', () => {
  it('draws a bar and the low watermark per partition in a terminal, redraws after an append, and restores the cursor on Ctrl-C', async () => {
    const { rheo, flags } = await fixture();
    await rheo.createStream('w', { partitions: 2 });
    await rheo.appendBatch('w', [{ payload: 0, partition: 0 }, { payload: 1, partition: 0 }, { payload: 2, partition: 0 }, { payload: 3, partition: 1 }]);
    // No group yet, so the trim may take p0's first event: p0's low watermark becomes 2.
    await rheo.trim('w', { keep: 2 });
    await rheo.createGroup('w', 'g');
    const argv = [process.execPath, CLI, 'lag', 'w', 'g', '--watch', '--interval-ms', '100', ...flags].map((a) => `'${a}'`).join(' ');
    // script(1) gives the CLI a pseudo-terminal; ^C written to it becomes SIGINT for the
    // whole foreground group. `exec` keeps script's shell out of that group: dash (the
    // /bin/sh script falls back to when SHELL is unset, as on CI) would otherwise die of
    // the same SIGINT and report 130 for a CLI that exited 0.
    const child = spawn('script', ['-qfec', `exec ${argv}`, '/dev/null'], { env: cleanEnv({ TERM: 'xterm', SHELL: '/bin/sh' }) });
    let screen = '';
    child.stdout.on('data', (d: Buffer) => (screen += d.toString('utf8')));
    await waitForOutput(child, 
      (out) => /p0\s+█+░*\s+2\s+age \S+\s+low 2\b/.test(out) && /p1\s+█+░*\s+1\s+age \S+\s+low 1\b/.test(out),
      "the first frame, with each partition's low watermark",
    );
    expect(screen).toContain('\x1b[?25l');
    const redrawn = waitForOutput(child, (out) => /p1\s+█+░*\s+4\b/.test(out) && /growing/.test(out), 'a frame after the append');
    await rheo.appendBatch('w', [{ payload: 4, partition: 1 }, { payload: 5, partition: 1 }, { payload: 6, partition: 1 }]);
    await redrawn;
    const exit = new Promise<number | null>((resolve) => child.on('close', resolve));
    child.stdin.write('\x03');
    expect(await exit).toBe(0);
    expect(screen.lastIndexOf('\x1b[?25h')).toBeGreaterThan(screen.lastIndexOf('\x1b[?25l'));
  });
});
