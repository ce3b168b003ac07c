import { spawn } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { createRheo } from '../../src/rheo.js';
import { databaseUrl, makeTestBackend } from '../support/postgres.js';
import { CLI, cleanEnv, ensureBuilt, runCli, waitForOutput } from './run-cli.js';

beforeAll(() => ensureBuilt(), 300_000);

describe('rheo dashboard', () => {
  it('serves the packaged page and API on 127.0.0.1 from the built CLI, read-only, until interrupted', async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend });
    await rheo.createStream('orders');
    await rheo.createGroup('orders', 'billing');
    await rheo.append('orders', { payload: 1 });
    const child = spawn(process.execPath, [CLI, 'dashboard', '--port', '0', '--json', '--url', databaseUrl(), '--schema', backend.schema], { env: cleanEnv() });
    const exit = new Promise<number | null>((resolve) => child.on('close', resolve));
    const line = await waitForOutput(child, (out) => out.includes('\n'), 'the dashboard URL');
    const { url, allowWrites } = JSON.parse(line) as { url: string; allowWrites: boolean };
    expect(new URL(url).hostname).toBe('127.0.0.1');
    expect(allowWrites).toBe(false);
    // The page and its files come from dist/dashboard, as installed.
    const page = await fetch(url);
    expect(await page.text()).toContain('<title>rheo dashboard</title>');
    expect((await fetch(new URL('dashboard.js', url))).status).toBe(200);
    const overview = (await (await fetch(new URL('api/overview', url))).json()) as { streams: Array<{ name: string; groups: Array<{ lag: number }> }> };
    expect(overview.streams).toEqual([expect.objectContaining({ name: 'orders', groups: [expect.objectContaining({ lag: 1 })] })]);
    const refused = await fetch(new URL('api/redrive', url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-rheo-dashboard': '1' },
      body: '{"stream":"orders","group":"billing"}',
    });
    expect(refused.status).toBe(403);
    child.kill('SIGINT');
    expect(await exit).toBe(0);
  });

  it('refuses a port out of range as a usage error', async () => {
    const result = await runCli(['dashboard', '--port', '70000', '--url', databaseUrl()]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('port');
  });
});
