import { cp } from 'node:fs/promises';
import { defineConfig } from 'tsup';

export default defineConfig({
  // `cli` keeps its `#!/usr/bin/env node` line (esbuild preserves an entry's
  // hashbang and tsup marks the file executable) and shares the library chunk.
  entry: { index: 'src/index.ts', postgres: 'src/postgres.ts', redis: 'src/redis.ts', pglite: 'src/pglite.ts', cli: 'src/cli/main.ts' },
  format: ['esm', 'cjs'],
  // The CLI is a program, not an import: no declarations for it.
  dts: { entry: { index: 'src/index.ts', postgres: 'src/postgres.ts', redis: 'src/redis.ts', pglite: 'src/pglite.ts' } },
  sourcemap: true,
  clean: true,
  target: 'node20',
  // Entries share chunks, in CJS too (tsup's own splitting there): each entry
  // bundling its own copy of the core made errors from `rheo/postgres` fail
  // `instanceof RheoError` and lose their codes inside the facade.
  splitting: true,
  // `import.meta.url` in the CommonJS build (the optional OpenTelemetry API is
  // required relative to rheo, and the dashboard finds its static files next
  // to it): tsup substitutes the module's own file URL there.
  shims: true,
  // The dashboard's page, script and styles ship as plain files next to the
  // bundle (src/dashboard/dashboard-handler.ts looks for them there).
  onSuccess: async () => {
    await cp('src/dashboard/assets', 'dist/dashboard', { recursive: true });
  },
});
