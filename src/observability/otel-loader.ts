import { createRequire } from 'node:module';
import type * as OtelApi from '@opentelemetry/api';

export type Api = typeof OtelApi;

/**
 * `@opentelemetry/api` is an optional peer dependency: it is required on
 * the first `createRheo`, never imported at the top of a module, so a
 * program without it loads nothing and behaves exactly as before. A
 * synchronous require (not `import()`) keeps `createRheo` synchronous and
 * its first spans complete; the API keeps its registered providers on a
 * global symbol, so this copy and an ESM copy the application imports
 * share them.
 */
let loaded: Api | null | undefined;

export function loadApi(): Api | null {
  if (loaded !== undefined) return loaded;
  try {
    // The CommonJS build gets import.meta.url from tsup's shim (tsup.config.ts).
    const require = createRequire(import.meta.url);
    loaded = require('@opentelemetry/api') as Api;
  } catch {
    loaded = null;
  }
  return loaded;
}
