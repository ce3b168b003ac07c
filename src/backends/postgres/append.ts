import type { AppendOutcome, PreparedAppend } from '../../core/backend.js';
import type { Clock } from '../../core/clock.js';
import { RheoError } from '../../core/errors.js';
import { uuidv7 } from '../../core/ids.js';
import type { JsonObject, JsonValue, RheoEvent } from '../../core/types.js';
import { routePartition } from '../../core/validation.js';
import type { StreamRef } from './catalog.js';
import type { Runner } from './connection.js';
import { sqlState } from './errors.js';
import type { LeaseContext } from './leases.js';
import { toEvent } from './rows.js';

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
export interface AppendTarget {
  clock: Clock | null;
  channel: string;
  notify: boolean;
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
  ctx: LeaseContext,
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
  const values = [
    stream.id,
    batch.map((b) => b.id),
    batch.map((b) => b.input.type),
    batch.map((b) => b.input.key),
    batch.map((b) => JSON.stringify(b.input.payload)),
    batch.map((b) => JSON.stringify(b.input.metadata)),
    batch.map((b) => b.partition),
    batch.map((b) => b.input.timestamp.toISOString()),
    options.channel,
    stream.name,
    options.notify,
    batch.map((b) => b.input.size),
  ];
  const action = `append ${inputs.length} event(s) to stream "${stream.name}"`;
  const label = { action, stream: stream.name, writes: true };
  const savepoint = options.inTransaction === true && inputs.some((input) => input.id !== null);
  let rows: AppendRow[] = [];
  for (let attempt = 1; ; attempt++) {
    if (savepoint) await runner.query(label, `SAVEPOINT ${SAVEPOINT}`, []);
    try {
      rows = await runner.query<AppendRow>(label, ctx.sql.append, values);
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
