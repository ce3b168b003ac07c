import type { Runner } from './connection.js';

/**
 * The default of `genericPlanSegments`: above this many tables in the
 * partitioned log (`events`: every segment of every stream of the schema,
 * and segment 0), the append, the claim and the owned read run their
 * replanned routines (routines.ts, `routinePair`).
 *
 * A generic plan locks every one of those tables on each call, so one of
 * rheo's transactions holds about this many locks at most. PostgreSQL's lock
 * table holds `max_locks_per_transaction` (64) × its backends (about 120
 * with the default `max_connections`), some 7,700 locks, for every session
 * of the cluster: 30 of rheo's transactions at once fit with room to spare.
 * Below it the generic plans are the cheaper ones: planning the claim on
 * every call costs about 3 ms, more than a generic plan's locks cost until
 * about a thousand tables (docs/storage.md).
 */
export const GENERIC_PLAN_MAX_SEGMENTS = 256;

const SAVEPOINT = 'rheo_count_segments';

/** How often a backend counts the log's tables again, for segments other processes opened. */
const RECOUNT_MS = 10_000;

/** The number of tables in the schema's partitioned log; $1 the schema name, unquoted. */
const COUNT_SEGMENTS_SQL = `SELECT count(*)::int AS n FROM pg_catalog.pg_inherits i
WHERE i.inhparent = (SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                     WHERE n.nspname = $1 AND c.relname = 'events')`;

/**
 * Whether a call runs a routine's generic or replanned form, from the
 * number of tables in the log. The first call of a backend, and the first
 * after this process opened a segment (`opened()`), wait for one count;
 * otherwise the count is refreshed in the background at most every
 * RECOUNT_MS, on a call's way, so segments other processes open are seen
 * within seconds and an idle backend counts nothing. A count that fails
 * keeps the last choice (generic before any) until the next one.
 */
export class PlanChoice {
  readonly #db: Runner;
  readonly #schema: string;
  readonly #limit: number;
  #replanned = false;
  #known = false;
  #countedAt = Number.NEGATIVE_INFINITY;
  #counting: Promise<void> | null = null;
  /** Bumped by `opened()`: a count that started before it answers for an older log. */
  #generation = 0;
  #segments = 0;

  constructor(db: Runner, schema: string, limit = GENERIC_PLAN_MAX_SEGMENTS) {
    this.#db = db;
    this.#schema = schema;
    this.#limit = limit;
  }

  /** The tables in the log at the last count (0 before one). */
  get segments(): number {
    return this.#segments;
  }

  /**
   * `generic` or `replanned`, whichever this call should run. `runner`: the
   * connection the call itself runs on, which a count it waits for uses too
   * (an application's transaction may hold the only one a pool has, as on
   * PGlite).
   */
  pick<T>(generic: T, replanned: T, runner: Runner = this.#db): T | Promise<T> {
    if (!this.#known) return this.#count(runner).then(() => (this.#replanned ? replanned : generic));
    if (performance.now() - this.#countedAt >= RECOUNT_MS) void this.#count();
    return this.#replanned ? replanned : generic;
  }

  /** This process opened a segment: the next call counts first. */
  opened(): void {
    this.#known = false;
    this.#generation++;
    this.#counting = null;
  }

  #count(runner: Runner = this.#db): Promise<void> {
    // A count already on its way may wait for a connection this call holds: this call counts on its own.
    if (runner !== this.#db) return this.#countOn(runner);
    if (this.#counting === null) {
      const counting = this.#countOn(runner).finally(() => {
        if (this.#counting === counting) this.#counting = null;
      });
      this.#counting = counting;
    }
    return this.#counting;
  }

  /**
   * On a runner other than the pool (an application's transaction), within a
   * savepoint: a count that fails there (a full lock table, say) must not
   * abort the transaction in the call's place; the call then meets the
   * failure itself.
   */
  async #countOn(runner: Runner): Promise<void> {
    const inTransaction = runner !== this.#db;
    const generation = this.#generation;
    const label = { action: 'count the segments of the log', writes: false };
    let segments: number | null = null;
    try {
      if (inTransaction) await runner.query(label, `SAVEPOINT ${SAVEPOINT}`, []);
      const [row] = await runner.query<{ n: number }>(label, COUNT_SEGMENTS_SQL, [this.#schema]);
      segments = row?.n ?? 0;
      if (inTransaction) await runner.query(label, `RELEASE SAVEPOINT ${SAVEPOINT}`, []);
    } catch {
      // Unknown: the last choice stands. The call that waited goes on and meets the failure itself.
      if (inTransaction) await runner.query(label, `ROLLBACK TO SAVEPOINT ${SAVEPOINT}`, []).catch(() => undefined);
    }
    // A segment opened here since the count began: the next call counts again.
    if (generation !== this.#generation) return;
    if (segments !== null) {
      this.#segments = segments;
      this.#replanned = segments > this.#limit;
    }
    this.#known = true;
    this.#countedAt = performance.now();
  }
}
