import { createRequire } from 'node:module';
import { RheoError } from '../../core/errors.js';

/**
 * The parts of a PGlite instance rheo uses. Declared here (not imported from
 * `@electric-sql/pglite`) so that rheo's type declarations load without the
 * optional peer installed; a `PGlite` satisfies it.
 */
export interface PGliteLike {
  readonly waitReady: Promise<void>;
  readonly closed: boolean;
  isInTransaction(): boolean;
  close(): Promise<void>;
}

/** `@electric-sql/pglite/node-postgres`'s `PglitePgConnection`: `pg`'s wire-protocol connection, answered in-process. */
export interface PgConnectionLike {
  parse(query: { text: string; name?: string; types?: unknown }): void;
  emit(event: string, ...args: unknown[]): boolean;
}

export interface PgliteModules {
  PGlite: new (dataDir?: string) => PGliteLike;
  PglitePgConnection: new (config: { pglite: PGliteLike }) => PgConnectionLike;
}

// `require`, not `await import`: the backend's constructor is synchronous
// (like postgresBackend's), and a missing peer must fail there, not on the
// first call. Both builds of the peer ship CommonJS, and tsup substitutes
// `import.meta.url` in rheo's own CommonJS build.
const requireFromHere = createRequire(import.meta.url);

let loaded: PgliteModules | null = null;

/** Loaded on first use only, so importing rheo never loads PGlite (an optional peer). */
export function loadPglite(): PgliteModules {
  if (loaded) return loaded;
  try {
    const core = requireFromHere('@electric-sql/pglite') as { PGlite?: PgliteModules['PGlite'] };
    const adapter = requireFromHere('@electric-sql/pglite/node-postgres') as {
      PglitePgConnection?: PgliteModules['PglitePgConnection'];
    };
    if (!core.PGlite || !adapter.PglitePgConnection) throw new Error('@electric-sql/pglite exports no PGlite or PglitePgConnection');
    loaded = { PGlite: core.PGlite, PglitePgConnection: adapter.PglitePgConnection };
    return loaded;
  } catch (error) {
    throw new RheoError('unsupported', 'pgliteBackend needs the optional peer dependency @electric-sql/pglite 0.5: npm install @electric-sql/pglite', {
      cause: error,
    });
  }
}
