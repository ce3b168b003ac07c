import { defineConfig } from 'tsup';

export default defineConfig({
  // `cli` keeps its `#!/usr/bin/env node` line (esbuild preserves an entry's
  // hashbang and tsup marks the file executable) and shares the library chunk.
  entry: { index: 'src/index.ts', postgres: 'src/postgres.ts', redis: 'src/redis.ts', cli: 'src/cli/main.ts' },
  format: ['esm', 'cjs'],
  // The CLI is a program, not an import: no declarations for it.
  dts: { entry: { index: 'src/index.ts', postgres: 'src/postgres.ts', redis: 'src/redis.ts' } },
  sourcemap: true,
  clean: true,
  target: 'node20',
  // Entries share chunks, in CJS too (tsup's own splitting there): each entry
  // bundling its own copy of the core made errors from `rheo/postgres` fail
  // `instanceof RheoError` and lose their codes inside the facade.
  splitting: true,
});
