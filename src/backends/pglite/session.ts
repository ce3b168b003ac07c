import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { PGliteLike, PgliteModules } from './load-pglite.js';

/**
 * PGlite is one PostgreSQL backend process with one session, so rheo's pool
 * over it holds exactly one `pg.Client`. Every statement, and every
 * transaction from BEGIN to COMMIT, checks that client out, so work from the
 * facade, the consumer, the trimmer and `beginTransaction` is serialised
 * first come, first served (pg-pool's queue), and no statement ever lands
 * inside someone else's transaction. Nothing rheo runs holds the client
 * while it waits for another checkout, so the queue cannot deadlock; an
 * application that runs rheo calls outside a transaction while holding the
 * client would wait on itself (docs/backends/pglite.md).
 *
 * The client speaks `pg`'s wire protocol to PGlite in-process
 * (`PglitePgConnection`), so the PostgreSQL backend's statements, type
 * parsers and error classification run unchanged. Of the ways in, measured
 * with 1,000 sequential parameterised statements each (one loaded 2-core
 * machine, one run, PGlite 0.5.14/0.5.17): this one 810 inserts/s and 1,718
 * selects/s; `@electric-sql/pglite-socket` with `pg` over loopback TCP 207
 * and 670 (a socket round trip per protocol message, and a port other local
 * users could reach); PGlite's own `query()` 670-880 and 890 (it describes
 * every statement first to pick serializers, and would need rheo's SQL
 * values, parsers and errors re-mapped).
 */
/** Sessions of borrowed instances, so backends on one instance (one schema each) share its one connection. */
const borrowedSessions = new WeakMap<PGliteLike, PgliteSession>();

export class PgliteSession {
  /** The live session of an instance the application owns, or a new one. */
  static borrow(modules: PgliteModules, pglite: PGliteLike): PgliteSession {
    let session = borrowedSessions.get(pglite);
    if (!session) {
      session = new PgliteSession(modules, pglite);
      borrowedSessions.set(pglite, session);
    }
    return session;
  }

  readonly pool: pg.Pool;
  #pglite: PGliteLike | null;
  /** `notification` events of the session, whichever statement delivered them. */
  readonly #notifications = new EventEmitter();
  readonly #owned: boolean;
  #users = 0;
  #closing: Promise<void> | null = null;

  /** `pglite` now (borrowed), or once `start()` gives it (owned: after the data directory is locked). */
  constructor(modules: PgliteModules, pglite: PGliteLike | null) {
    this.#pglite = pglite;
    this.#owned = pglite === null;
    this.#notifications.setMaxListeners(0);
    const notifications = this.#notifications;
    const Connection = sessionConnection(modules);
    const pgliteOf = (): PGliteLike => this.pglite;

    class SessionClient extends pg.Client {
      constructor(config: pg.ClientConfig) {
        super({ ...config, connection: new Connection({ pglite: pgliteOf() }) } as pg.ClientConfig);
        // PostgreSQL delivers a NOTIFY to the listening session when the
        // notifying transaction commits, inside that commit's answer: here it
        // is the one session, so whichever statement committed carries it.
        this.on('notification', (message: pg.Notification) => notifications.emit('notification', message));
      }

      override connect(): Promise<pg.Client>;
      override connect(callback: (error: Error | null, client?: pg.Client) => void): void;
      override connect(callback?: (error: Error | null, client?: pg.Client) => void): Promise<pg.Client> | void {
        const connected = (async () => {
          await super.connect();
          // The session outlives the client that pg-pool destroys after a
          // driver-level error. Left inside that client's transaction, the
          // next one would run its statements in it; and the statements
          // that client prepared would make this one's PREPARE of the same
          // names fail (42P05), since a new client believes none exist.
          if (pgliteOf().isInTransaction()) await this.query('ROLLBACK');
          await this.query('DEALLOCATE ALL');
          return this;
        })();
        // pg-pool connects its clients with a callback.
        if (callback === undefined) return connected;
        connected.then(
          (client) => callback(null, client),
          (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
        );
      }
    }

    this.pool = new pg.Pool({
      Client: SessionClient as unknown as typeof pg.Client,
      max: 1,
      // The one client is kept: there is no socket to time out.
      idleTimeoutMillis: 0,
    });
    this.pool.on('error', () => {});
  }

  /** The instance; only statements use it, and none runs before the backend's constructor has started it. */
  get pglite(): PGliteLike {
    if (this.#pglite === null) throw new Error('the PGlite session was not started');
    return this.#pglite;
  }

  /** Gives an owned session its instance (see the constructor). */
  start(pglite: PGliteLike): void {
    this.#pglite = pglite;
  }

  /** A backend starts using the session; `release()` ends it after the last one. */
  use(): this {
    this.#users++;
    return this;
  }

  /**
   * A stand-in for the PostgreSQL backend's LISTEN connection: LISTEN runs
   * on the session through the pool (so it never lands inside another
   * checkout's transaction), and the session's notifications are handed on.
   */
  listenClient(): pg.Client {
    return new SessionListener(this.pool, this.#notifications) as unknown as pg.Client;
  }

  /** Ends the pool and, for an instance rheo opened, PGlite, once no backend uses the session. */
  release(): Promise<void> {
    this.#users = Math.max(0, this.#users - 1);
    if (this.#users > 0) return Promise.resolve();
    if (!this.#owned && this.#pglite !== null && borrowedSessions.get(this.#pglite) === this) borrowedSessions.delete(this.#pglite);
    this.#closing ??= (async () => {
      await this.pool.end().catch(() => {});
      const pglite = this.#pglite;
      if (this.#owned && pglite !== null && !pglite.closed) await pglite.close();
    })();
    return this.#closing;
  }
}

/**
 * `PglitePgConnection` with one fix: `pg` passes the query's `types` (its
 * result parser config, an object) along to `parse()`, where `pg`'s own
 * serializer reads only an array of parameter type OIDs and ignores anything
 * else; PGlite's serializer calls `types.forEach` and throws. rheo pins its
 * parsers per query (postgres/connection.ts), so every statement has them.
 */
function sessionConnection(modules: PgliteModules) {
  return class SessionConnection extends modules.PglitePgConnection {
    override parse(query: { text: string; name?: string; types?: unknown }): void {
      super.parse({ ...query, types: Array.isArray(query.types) ? query.types : [] });
    }
  };
}

/** The `pg.Client` surface postgres/notifications.ts calls on its LISTEN connection. */
class SessionListener extends EventEmitter {
  readonly #pool: pg.Pool;
  readonly #notifications: EventEmitter;
  readonly #forward = (message: pg.Notification): void => {
    this.emit('notification', message);
  };
  #ended = false;

  constructor(pool: pg.Pool, notifications: EventEmitter) {
    super();
    this.#pool = pool;
    this.#notifications = notifications;
  }

  async connect(): Promise<void> {
    this.#notifications.on('notification', this.#forward);
  }

  query(text: string): Promise<pg.QueryResult> {
    return this.#pool.query(text);
  }

  async end(): Promise<void> {
    if (this.#ended) return;
    this.#ended = true;
    this.#notifications.removeListener('notification', this.#forward);
  }
}
