import type { AppendOutcome, LogStore, NormalizedQuery, NotificationStore, PreparedAppend, RetentionPolicy } from '../../core/backend.js';
import { RheoError, isRheoError } from '../../core/errors.js';
import { uuidv7 } from '../../core/ids.js';
import { encodeQueryCursor } from '../../core/query-cursor.js';
import type { JsonObject, JsonValue, QueryResult, RheoEvent, StreamInfo } from '../../core/types.js';
import { routePartition } from '../../core/validation.js';
import { intArrayLiteral, textArrayLiteral } from './array-literal.js';
import { checkPartitions, type StreamRef } from './catalog.js';
import type { Runner } from './connection.js';
import { sqlState } from './errors.js';
import { toEvent, type EventRow } from './rows.js';
import { buildQuery } from './sql/query.js';
import type { NotifyTarget, PostgresStore, StoreContext } from './store.js';

/**
 * The log on PostgreSQL: streams, appends (one statement per call, whose
 * NOTIFY wakes producers, sql/append.ts), reads and queries, and the wait
 * for appends on the LISTEN connection (notifications.ts).
 */
export class PostgresLog implements LogStore, NotificationStore {
  readonly #store: PostgresStore;

  constructor(store: PostgresStore) {
    this.#store = store;
  }

  async createStream(name: string, partitions: number, retention: RetentionPolicy | null = null): Promise<void> {
    await this.#store.ensureSchema();
    const rows = await this.#store.db.query(
      { action: `create stream "${name}"`, stream: name, writes: true },
      this.#store.sql.createStream,
      [name, partitions, this.#store.now(), retention?.maxAgeMs ?? null, retention?.maxEvents ?? null],
    );
    if (rows.length === 0) {
      throw new RheoError('already_exists', `stream "${name}" already exists`, { stream: name });
    }
    // Its first segment, so that its events never go to segment 0; if this gives up, its first append rolls.
    const created = await this.#store.catalog.stream(name);
    await this.#store.segments.roll(created.id, name);
  }

  async listStreams(): Promise<StreamInfo[]> {
    await this.#store.ensureSchema();
    const rows = await this.#store.db.query<{
      name: string;
      partitions: number;
      created_at_ms: number;
      retention_max_age_ms: number | null;
      retention_max_events: number | null;
      watermarks: Array<[number, number, number]> | null;
    }>({ action: 'list streams', writes: false }, this.#store.sql.listStreams, []);
    return rows.map((r) => {
      const watermarks: StreamInfo['watermarks'] = {};
      for (const [p, low, high] of r.watermarks ?? []) watermarks[p] = { lowWatermark: low, highWatermark: high };
      const hasRetention = r.retention_max_age_ms !== null || r.retention_max_events !== null;
      return {
        name: r.name,
        partitions: r.partitions,
        createdAt: new Date(r.created_at_ms),
        retention: hasRetention ? { maxAgeMs: r.retention_max_age_ms, maxEvents: r.retention_max_events } : null,
        watermarks,
      };
    });
  }

  async append(stream: string, inputs: PreparedAppend[]): Promise<AppendOutcome[]> {
    await this.#store.ensureSchema();
    for (let attempt = 1; ; attempt++) {
      const s = await this.#store.catalog.stream(stream);
      try {
        const { outcomes, wrote } = await appendEvents(this.#store, s, inputs, this.#store.target);
        if (wrote) {
          this.#store.listener.wake(stream);
          await this.#store.segments.appended(s.id, stream, inputs.length);
        }
        return outcomes;
      } catch (error) {
        // A cached id of a stream another process deleted (and maybe re-created) stores nothing.
        if (attempt === 1 && isRheoError(error, 'internal') && !(await this.#store.catalog.revalidate(stream))) continue;
        throw error;
      }
    }
  }

  async read(stream: string, partition: number, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    await this.#store.ensureSchema();
    const s = await this.#store.catalog.stream(stream);
    checkPartitions(s, [partition]);
    const rows = await this.#store.db.query<EventRow>(
      { action: `read stream "${stream}"`, stream, writes: false },
      this.#store.sql.read,
      [s.id, partition, after, limit, maxBytes],
    );
    if (rows.length === 0 && !(await this.#store.catalog.revalidate(stream))) return this.read(stream, partition, after, limit, maxBytes);
    return rows.map((r) => toEvent(stream, r));
  }

  async query(stream: string, query: NormalizedQuery): Promise<QueryResult> {
    await this.#store.ensureSchema();
    const s = await this.#store.catalog.stream(stream);
    if (query.partition !== null) checkPartitions(s, [query.partition]);
    const { text, values } = buildQuery(this.#store.quotedSchema, s.id, query);
    const rows = await this.#store.db.query<EventRow & { matched: string }>(
      { action: `query stream "${stream}"`, stream, writes: false },
      text,
      values,
    );
    const events = rows.map((r) => toEvent(stream, r));
    const last = events[events.length - 1];
    // Cut by the limit, or by the byte budget before all matched rows of the page.
    const cut = events.length === query.limit || (rows.length > 0 && events.length < Number(rows[0]!.matched));
    const nextCursor =
      last && cut
        ? encodeQueryCursor({ timestampMs: last.timestamp.getTime(), partition: last.partition, sequence: last.sequence })
        : null;
    return { events, nextCursor };
  }

  waitForAppend(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.#store.closed) return Promise.resolve(false);
    return this.#store.listener.wait(stream, timeoutMs, signal);
  }
}

interface AppendRow {
  id: string;
  partition: number;
  sequence: number;
  existed: boolean;
  type: string | null;
  key: string | null;
  payload: JsonValue | null;
  metadata: JsonObject | null;
  ts_ms: number | null;
}

interface Routed {
  id: string;
  input: PreparedAppend;
  partition: number;
}

/** Two appends racing on one new id: the loser's statement fails whole and is retried. */
const MAX_ID_RACE_RETRIES = 5;

/** Where the append runs: the pool by default, or an application's transaction. */
export interface AppendTarget extends NotifyTarget {
  /** Default: the pool (`ctx.db`). */
  runner?: Runner;
  /**
   * The statement runs inside a transaction the caller owns. A statement
   * that fails aborts that whole transaction, so the id race below is
   * retried from a savepoint; it can only happen for caller-given ids
   * (generated ids are unique), so only those appends pay the savepoint's
   * two extra round trips.
   */
  inTransaction?: boolean;
}

const SAVEPOINT = 'rheo_append';

/**
 * Routes and identifies every input before anything is sent (so a bad
 * partition writes nothing), then appends the batch in one statement
 * (sql/append.ts). Returns one outcome per input, in order; `wrote` says
 * whether any new event was stored.
 */
export async function appendEvents(
  ctx: StoreContext,
  stream: StreamRef,
  inputs: PreparedAppend[],
  options: AppendTarget,
): Promise<{ outcomes: AppendOutcome[]; wrote: boolean }> {
  const runner = options.runner ?? ctx.db;
  const ids = inputs.map((input) => input.id ?? uuidv7(options.clock ?? undefined));
  const unique = new Map<string, Routed>();
  inputs.forEach((input, i) => {
    const partition = routePartition(stream.name, stream.partitions, input.partition, input.key);
    const id = ids[i] as string;
    // Within one batch a repeated id yields the event of its first occurrence.
    if (!unique.has(id)) unique.set(id, { id, input, partition });
  });
  const batch = [...unique.values()];
  // Array literals built here (array-literal.ts): node-postgres escapes every
  // element through two regular expressions, most of all the JSON texts,
  // which was 8 % of an appending process's CPU.
  const values = [
    stream.id,
    textArrayLiteral(batch.map((b) => b.id)),
    textArrayLiteral(batch.map((b) => b.input.type)),
    textArrayLiteral(batch.map((b) => b.input.key)),
    textArrayLiteral(batch.map((b) => JSON.stringify(b.input.payload))),
    textArrayLiteral(batch.map((b) => JSON.stringify(b.input.metadata))),
    intArrayLiteral(batch.map((b) => b.partition)),
    textArrayLiteral(batch.map((b) => b.input.timestamp.toISOString())),
    options.channel,
    stream.name,
    options.notify,
    intArrayLiteral(batch.map((b) => b.input.size)),
    // Only caller-given ids can be stored already: the ones generated above are new.
    textArrayLiteral(batch.filter((b) => b.input.id !== null).map((b) => b.id)),
  ];
  const action = `append ${inputs.length} event(s) to stream "${stream.name}"`;
  const label = { action, stream: stream.name, writes: true };
  const savepoint = options.inTransaction === true && inputs.some((input) => input.id !== null);
  const statement = await ctx.plans.pick(ctx.sql.append, ctx.sql.appendReplanned, runner);
  let rows: AppendRow[] = [];
  for (let attempt = 1; ; attempt++) {
    if (savepoint) await runner.query(label, `SAVEPOINT ${SAVEPOINT}`, []);
    try {
      rows = await runner.query<AppendRow>(label, statement, values);
      if (savepoint) await runner.query(label, `RELEASE SAVEPOINT ${SAVEPOINT}`, []);
      break;
    } catch (error) {
      const idRace = error instanceof RheoError && sqlState(error.cause) === '23505';
      if (idRace && savepoint) await runner.query(label, `ROLLBACK TO SAVEPOINT ${SAVEPOINT}`, []);
      if (idRace && attempt < MAX_ID_RACE_RETRIES && (savepoint || options.inTransaction !== true)) continue;
      throw error;
    }
  }
  const byId = new Map<string, RheoEvent>();
  const fresh = new Set<string>();
  let wrote = false;
  for (const row of rows) {
    if (row.existed) {
      byId.set(row.id, toEvent(stream.name, row as AppendRow & { type: string; payload: JsonValue; metadata: JsonObject; ts_ms: number }));
      continue;
    }
    wrote = true;
    fresh.add(row.id);
    const routed = unique.get(row.id);
    if (!routed) continue;
    const { input } = routed;
    byId.set(row.id, {
      id: row.id,
      stream: stream.name,
      partition: row.partition,
      sequence: row.sequence,
      type: input.type,
      key: input.key,
      payload: input.payload,
      metadata: input.metadata,
      timestamp: new Date(input.timestamp.getTime()),
    });
  }
  const outcomes: AppendOutcome[] = [];
  // Only the first occurrence of a new id wrote it; a repeat in the batch found it stored.
  const written = new Set<string>();
  for (const id of ids) {
    const event = byId.get(id);
    if (event === undefined) {
      throw new RheoError('internal', `append to stream "${stream.name}" returned fewer events than it was given`, {
        stream: stream.name,
      });
    }
    const existed = !fresh.has(id) || written.has(id);
    if (!existed) written.add(id);
    outcomes.push({ event, existed });
  }
  return { outcomes, wrote };
}
