import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bundleChildren, type ChildBundle } from './child-bundle.js';
import { formatPgliteFailures, pgliteDurabilityScenario, runPgliteDurability } from './pglite-durability.js';

let workDir: string;
let children: ChildBundle;
beforeAll(async () => {
  children = await bundleChildren();
  workDir = mkdtempSync(join(tmpdir(), 'rheo-pglite-chaos-'));
}, 60_000);
afterAll(() => {
  children?.remove();
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

// The short version of `npm run chaos`'s PGlite scenario: three processes, the third killed while starting.
it('pglite: a process SIGKILLed at random points loses no confirmed append or ack, and the frontier skips nothing', { timeout: 240_000 }, async () => {
  const spec = { ...pgliteDurabilityScenario(), kills: 3, startupKillEvery: 3 };
  const result = await runPgliteDurability(spec, { workDir, child: children.pglite });
  expect(
    { lost: result.lost, redelivered: result.redelivered, skipped: result.skipped, lag: result.lag, crashes: result.crashes },
    formatPgliteFailures([result]),
  ).toEqual({ lost: [], redelivered: [], skipped: [], lag: 0, crashes: [] });
  expect(result.appended).toBeGreaterThan(0);
  expect(result.acked).toBeGreaterThan(0);
});
