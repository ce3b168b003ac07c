import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'tsup';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The chaos child scripts compiled to plain JavaScript. */
export interface ChildBundle {
  /** Path of the compiled `worker-child.ts`. */
  readonly worker: string;
  /** Path of the compiled `appender-child.ts`. */
  readonly appender: string;
  /** Path of the compiled `pglite-child.ts`. */
  readonly pglite: string;
  /** Deletes the compiled files. Idempotent. */
  remove(): void;
}

/**
 * Compiles the child scripts once per run, because a scenario starts several
 * children and each `node --import tsx` start cost about 1.3 s of CPU (and
 * 5 s of wall time on a loaded 2-core machine), most of it compiling
 * TypeScript. The output lives under the project root so that its imports of
 * `pg` and `p-limit` (left external, as package dependencies) resolve.
 */
export async function bundleChildren(): Promise<ChildBundle> {
  const outDir = join(ROOT, '.chaos-build', `${process.pid}-${randomBytes(4).toString('hex')}`);
  await build({
    entry: {
      'worker-child': fileURLToPath(new URL('./worker-child.ts', import.meta.url)),
      'appender-child': fileURLToPath(new URL('./appender-child.ts', import.meta.url)),
      'pglite-child': fileURLToPath(new URL('./pglite-child.ts', import.meta.url)),
    },
    outDir,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    splitting: false,
    sourcemap: false,
    dts: false,
    config: false,
    silent: true,
  });
  return {
    worker: join(outDir, 'worker-child.js'),
    appender: join(outDir, 'appender-child.js'),
    pglite: join(outDir, 'pglite-child.js'),
    remove: () => rmSync(outDir, { recursive: true, force: true }),
  };
}
