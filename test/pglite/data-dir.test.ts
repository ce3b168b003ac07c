import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { LOCK_FILE } from '../../src/backends/pglite/data-dir-lock.js';
import { pgliteBackend, pgliteDataDir } from '../../src/backends/pglite/pglite-backend.js';
import { createRheo } from '../../src/rheo.js';
import { expectCode } from '../conformance/fixture.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'rheo-pglite-'));
  dirs.push(dir);
  return join(dir, 'data');
}

/** Runs lock-child.ts against `dataDir` in another process and returns what it printed. */
async function openElsewhere(dataDir: string): Promise<{ code?: string; message?: string; opened?: boolean }> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'lock-child.ts'), dataDir], {
    cwd: join(import.meta.dirname, '../..'),
  });
  return JSON.parse(stdout.trim()) as { code?: string; message?: string; opened?: boolean };
}

describe('pglite data directory', () => {
  it('is one process at a time: a second open here or in another process is backend_unavailable naming the owner; a dead owner\'s lock is taken over; the data survive', { timeout: 240_000 }, async () => {
    const dataDir = freshDir();
    const first = createRheo({ backend: pgliteBackend({ dataDir }) });
    await first.migrate();
    await first.createStream('kept', { partitions: 2 });
    const appended = await first.appendBatch('kept', [{ key: 'a', payload: 1 }, { key: 'b', payload: 2 }]);

    const lock = JSON.parse(readFileSync(join(dataDir, LOCK_FILE), 'utf8')) as { pid: number; host: string };
    expect(lock).toMatchObject({ pid: process.pid, host: hostname() });
    expect(() => pgliteBackend({ dataDir })).toThrow(expect.objectContaining({ code: 'backend_unavailable' }));
    const elsewhere = await openElsewhere(dataDir);
    expect(elsewhere.code).toBe('backend_unavailable');
    expect(elsewhere.message).toContain(`in use by process ${process.pid}`);
    await first.close();
    expect(existsSync(join(dataDir, LOCK_FILE))).toBe(false);

    // A lock left by a process that no longer runs (as after a SIGKILL).
    const dead = spawnSync(process.execPath, ['-e', '']).pid!;
    writeFileSync(join(dataDir, LOCK_FILE), JSON.stringify({ pid: dead, host: hostname(), since: new Date().toISOString() }));
    const second = createRheo({ backend: pgliteBackend({ dataDir }) });
    try {
      await second.migrate();
      expect((await second.query('kept', {})).events.map((e) => e.id).sort()).toEqual(appended.map((e) => e.id).sort());
      expect(JSON.parse(readFileSync(join(dataDir, LOCK_FILE), 'utf8'))).toMatchObject({ pid: process.pid });
    } finally {
      await second.close();
    }
  });

  it('refuses bad configuration before locking or starting anything', () => {
    expect(() => pgliteBackend({ dataDir: '' })).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    expect(() => pgliteBackend({ dataDir: 'x', pglite: {} as never })).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    expect(() => pgliteBackend({ pglite: {} as never })).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    const dataDir = freshDir();
    expect(() => pgliteBackend({ dataDir, schema: 'Bad-Schema' })).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
    expect(existsSync(join(dataDir, LOCK_FILE))).toBe(false);
  });

  it('pglite:// URLs name the data directory', async () => {
    expect(pgliteDataDir('pglite://./rheo-data')).toBe('./rheo-data');
    expect(pgliteDataDir('pglite://rheo-data')).toBe('rheo-data');
    expect(pgliteDataDir('pglite:///var/lib/rheo')).toBe('/var/lib/rheo');
    expect(pgliteDataDir('PGLITE://./my%20data')).toBe('./my data');
    for (const bad of ['pglite://', 'postgres://x', 'pglite:./x']) {
      await expectCode(Promise.resolve().then(() => pgliteDataDir(bad)), 'invalid_argument');
    }
  });
});
