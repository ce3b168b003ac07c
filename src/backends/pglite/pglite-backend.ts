import { assertKnownKeys, optionKeys } from '../../core/option-keys.js';
import type { BackendCapabilities } from '../../core/backend.js';
import type { Clock } from '../../core/clock.js';
import { invalidArgument } from '../../core/errors.js';
import { PostgresBackend } from '../postgres/postgres-backend.js';
import { DataDirLock } from './data-dir-lock.js';
import { loadPglite, type PGliteLike } from './load-pglite.js';
import { PgliteSession } from './session.js';

export type { PGliteLike } from './load-pglite.js';
export { pgliteDataDir } from './url.js';

/** Where the database lives: a directory rheo opens (and locks), memory, or a PGlite instance the application owns. */
export type PgliteConnection =
  | { dataDir: string; pglite?: undefined }
  | { pglite: PGliteLike; dataDir?: undefined }
  /** Neither: an in-memory database, gone when the backend closes. */
  | { dataDir?: undefined; pglite?: undefined };

export interface PgliteBackendOptions {
  /** Schema holding rheo's tables; `^[a-z_][a-z0-9_]{0,62}$`. Default `rheo`. */
  schema?: string;
  /** Time authority for leases and delays. Default: the database clock, which is this process's clock. */
  clock?: Clock;
  /** NOTIFY on append so `waitForAppend` wakes at once for appends made in the application's own transactions. Default true. */
  notify?: boolean;
}

export type PgliteBackendConfig = PgliteConnection & PgliteBackendOptions;

/** Every key `pgliteBackend` takes (one of `dataDir` and `pglite`, and the options); any other is refused. */
const OPTION_KEYS = [...optionKeys<PgliteBackendOptions>()('schema', 'clock', 'notify'), 'dataDir', 'pglite'];

/**
 * A durable backend with no server: PostgreSQL compiled to WebAssembly,
 * running inside this process and persisting to `dataDir`. It is the
 * PostgreSQL backend (same migrations, same SQL, same semantics) on PGlite's
 * one session; see session.ts for how work is serialised through it. Call
 * `migrate()` before using it, as for PostgreSQL. One process per data
 * directory: a second one gets `backend_unavailable` naming the owner.
 *
 *     pgliteBackend({ dataDir: './rheo-data' })
 *     pgliteBackend({})                              // in memory
 *     pgliteBackend({ pglite, schema: 'events' })    // borrowed: never closed by rheo
 */
export function pgliteBackend(config: PgliteBackendConfig = {}): PgliteBackend {
  return new PgliteBackend(config);
}

export class PgliteBackend extends PostgresBackend {
  override readonly name = 'pglite' as const;
  override readonly capabilities: BackendCapabilities = Object.freeze({
    durable: true,
    // One process per data directory (data-dir-lock.ts).
    distributed: false,
    notifications: true,
    blockingFetch: false,
    transactions: true,
    partitionOwnership: true,
    retention: true,
    cluster: false,
  });
  /** The data directory, resolved; `null` in memory or for a borrowed instance. */
  readonly dataDir: string | null;
  readonly #session: PgliteSession;
  readonly #lock: DataDirLock | null;
  #closing: Promise<void> | null = null;

  constructor(config: PgliteBackendConfig = {}) {
    if (config === null || typeof config !== 'object') {
      throw invalidArgument('pgliteBackend expects { dataDir }, { pglite } or {}');
    }
    assertKnownKeys('pgliteBackend options', config, OPTION_KEYS);
    if (config.dataDir !== undefined && config.pglite !== undefined) {
      throw invalidArgument('pgliteBackend takes either dataDir or pglite, not both');
    }
    if (config.dataDir !== undefined && (typeof config.dataDir !== 'string' || config.dataDir.length === 0)) {
      throw invalidArgument('pgliteBackend dataDir must be a non-empty path');
    }
    const borrowed = config.pglite;
    if (borrowed !== undefined && (borrowed === null || typeof (borrowed as { isInTransaction?: unknown }).isInTransaction !== 'function')) {
      throw invalidArgument('pgliteBackend pglite must be a PGlite instance');
    }
    const modules = loadPglite();
    const session = borrowed !== undefined ? PgliteSession.borrow(modules, borrowed) : new PgliteSession(modules, null);
    super({ pool: session.pool, listenClient: () => session.listenClient() }, { schema: config.schema, clock: config.clock, notify: config.notify });
    if (borrowed !== undefined) {
      this.#lock = null;
    } else {
      // Only once the PostgreSQL backend above accepted the options: the directory is locked and PGlite starts.
      const lock = config.dataDir !== undefined ? DataDirLock.acquire(config.dataDir) : null;
      try {
        session.start(new modules.PGlite(lock?.dataDir));
      } catch (error) {
        lock?.release();
        throw error;
      }
      this.#lock = lock;
    }
    this.#session = session.use();
    this.dataDir = this.#lock?.dataDir ?? null;
  }

  /** Resolves once PGlite has started (or rejects with why it could not): calls wait for it anyway. */
  async open(): Promise<void> {
    await this.#session.pglite.waitReady;
  }

  override close(): Promise<void> {
    this.#closing ??= (async () => {
      try {
        await super.close();
        await this.#session.release();
      } finally {
        this.#lock?.release();
      }
    })();
    return this.#closing;
  }
}
