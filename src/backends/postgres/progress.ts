import type { GroupStart, GroupStorageStats, NormalizedReplay, ProgressStore } from '../../core/backend.js';
import { RheoError, invalidArgument } from '../../core/errors.js';
import { checkStartScope } from '../../core/partition-scope.js';
import type { DeadLetter, GroupInfo, LagReport, PartitionLag } from '../../core/types.js';
import { groupScope, type GroupRef } from './catalog.js';
import { txQuery } from './connection.js';
import { toEvent, type EventRow } from './rows.js';
import { reopenSql } from './sql/groups.js';
import { buildReplayQuery } from './sql/query.js';
import { startParams, type PostgresStore, type StoreContext } from './store.js';

/** A group's progress on PostgreSQL: lag and counts, replay, reset, dead letters and their redrive (sql/groups.ts). */
export class PostgresProgress implements ProgressStore {
  readonly #store: PostgresStore;

  constructor(store: PostgresStore) {
    this.#store = store;
  }

  async lag(stream: string, group: string, partitions: number[] | null = null): Promise<LagReport> {
    await this.#store.ensureSchema();
    return lagReport(this.#store, await this.#store.catalog.group(stream, group), partitions);
  }

  async replay(stream: string, group: string, spec: NormalizedReplay, partitions: number[] | null): Promise<void> {
    await this.#store.ensureSchema();
    await replayGroup(this.#store, await this.#store.catalog.group(stream, group), spec, partitions);
  }

  async resetGroup(stream: string, group: string, start: GroupStart, partitions: number[] | null = null): Promise<void> {
    await this.#store.ensureSchema();
    await resetGroup(this.#store, await this.#store.catalog.group(stream, group), start, partitions);
  }

  async groupInfo(stream: string, group: string): Promise<GroupInfo> {
    await this.#store.ensureSchema();
    const g = await this.#store.catalog.group(stream, group);
    const lag = await lagReport(this.#store, g);
    // Totals are the partitions' sums, so the two always agree.
    const partitions = await partitionCounts(this.#store, g);
    let inflight = 0;
    let deadLetters = 0;
    for (const c of Object.values(partitions)) {
      inflight += c.inflight;
      deadLetters += c.deadLetters;
    }
    return { stream, group, maxAttempts: g.maxAttempts, lag, inflight, deadLetters, partitions };
  }

  async deadLetters(stream: string, group: string, limit: number, after: string | null, maxBytes: number): Promise<DeadLetter[]> {
    await this.#store.ensureSchema();
    return listDeadLetters(this.#store, await this.#store.catalog.group(stream, group), limit, after, maxBytes);
  }

  async redrive(stream: string, group: string, eventIds: string[] | null): Promise<number> {
    await this.#store.ensureSchema();
    return redrive(this.#store, await this.#store.catalog.group(stream, group), eventIds);
  }

  async storageStats(stream: string, group: string): Promise<GroupStorageStats> {
    await this.#store.ensureSchema();
    const counts = await groupCounts(this.#store, await this.#store.catalog.group(stream, group));
    return { deliveries: counts.deliveries, deadLetters: counts.dead_letters };
  }
}

interface LagRow {
  partition: number;
  cursor: number;
  high_watermark: number;
  min_open: number | null;
  oldest_ms: number | null;
  low_watermark: number;
}

async function lagReport(ctx: StoreContext, g: GroupRef, only: number[] | null = null): Promise<LagReport> {
  const rows = await ctx.db.query<LagRow>(
    { action: `lag of group "${g.name}" on stream "${g.stream.name}"`, stream: g.stream.name, group: g.name, writes: false },
    ctx.sql.lag,
    [g.id, g.stream.id, groupScope(g, only)],
  );
  const partitions: Record<number, PartitionLag> = {};
  let total = 0;
  for (const row of rows) {
    // Never above the cursor: see lagSql.
    const frontier = row.min_open === null ? row.cursor : Math.min(row.cursor, row.min_open - 1);
    const lag = Math.max(0, row.high_watermark - frontier);
    total += lag;
    partitions[row.partition] = {
      lowWatermark: row.low_watermark,
      frontier,
      highWatermark: row.high_watermark,
      lag,
      oldestUnsettledAt: frontier < row.high_watermark && row.oldest_ms !== null ? new Date(row.oldest_ms) : null,
    };
  }
  return { stream: g.stream.name, group: g.name, lag: total, partitions };
}

interface GroupCounts {
  deliveries: number;
  inflight: number;
  dead_letters: number;
}

async function partitionCounts(
  ctx: StoreContext,
  g: GroupRef,
): Promise<Record<number, { inflight: number; deadLetters: number }>> {
  const rows = await ctx.db.query<{ partition: number; inflight: string | number; dead_letters: string | number }>(
    { action: `count state of group "${g.name}" per partition`, stream: g.stream.name, group: g.name, writes: false },
    ctx.sql.partitionCounts,
    [g.id],
  );
  return Object.fromEntries(rows.map((r) => [r.partition, { inflight: Number(r.inflight), deadLetters: Number(r.dead_letters) }]));
}

async function groupCounts(ctx: StoreContext, g: GroupRef): Promise<GroupCounts> {
  const [row] = await ctx.db.query<GroupCounts>(
    { action: `count state of group "${g.name}"`, stream: g.stream.name, group: g.name, writes: false },
    ctx.sql.counts,
    [g.id],
  );
  return row ?? { deliveries: 0, inflight: 0, dead_letters: 0 };
}

/**
 * Replay and reset run in a transaction that first locks the group's cursors
 * (in partition order, like fetch), so they queue behind in-flight claims and
 * their later statements see every committed claim.
 */
async function replayGroup(
  ctx: StoreContext,
  g: GroupRef,
  spec: NormalizedReplay,
  partitions: number[] | null,
): Promise<void> {
  const scope = groupScope(g, partitions);
  const { sql } = ctx;
  const label = { stream: g.stream.name, group: g.name, writes: true };
  await ctx.db.transaction({ action: `replay group "${g.name}" of stream "${g.stream.name}"`, ...label }, async (tx) => {
    const lows = await txQuery<{ partition: number; low_watermark: number }>(tx, sql.lockLowWatermarks, [g.stream.id]);
    const lowOf = new Map(lows.map((r) => [r.partition, r.low_watermark]));
    // Owners of replayed partitions are fenced (a new generation) so they
    // read again from the moved frontier. Lock order everywhere: low
    // watermarks, then owner rows, then cursors (sql/ownership.ts, retention).
    if (spec.kind !== 'eventIds') {
      await txQuery(tx, sql.ownership.bumpGenerations, [g.id, scope]);
      await txQuery(tx, sql.lockCursors, [g.id, scope]);
      // A replay moves cursors back below lease ranges or reopens sequences
      // inside them; both paths work on rows, so the ranges become rows first.
      await txQuery(tx, sql.explodeGroup, [g.id, scope]);
    }
    if (spec.kind === 'fromSequence') {
      // Below the low watermark a replay starts at it (docs/semantics.md, "Retention").
      const from = scope.map((p) => Math.max(spec.fromSequence, lowOf.get(p) ?? 1));
      await txQuery(tx, sql.replayFrom, [g.id, scope, from]);
      await txQuery(tx, sql.replayAdvance, [g.id, scope]);
      return;
    }
    if (spec.kind === 'from') {
      const starts = await txQuery<{ partition: number; from_seq: number }>(tx, sql.resolveFromTime, [
        g.stream.id,
        scope,
        spec.from.toISOString(),
      ]);
      if (starts.length === 0) return;
      const partitions = starts.map((r) => r.partition);
      await txQuery(tx, sql.replayFrom, [g.id, partitions, starts.map((r) => r.from_seq)]);
      await txQuery(tx, sql.replayAdvance, [g.id, partitions]);
      return;
    }
    if (spec.kind === 'query') {
      const { text, values } = buildReplayQuery(
        ctx.quotedSchema,
        (target) => reopenSql(ctx.quotedSchema, target),
        { groupId: g.id, partitions: scope, streamId: g.stream.id, now: ctx.now() },
        spec.query,
      );
      await txQuery(tx, text, values);
      return;
    }
    const found = await txQuery<{ id: string; partition: number; sequence: number }>(tx, sql.eventsById, [
      g.stream.id,
      spec.eventIds,
    ]);
    if (found.length < spec.eventIds.length) {
      const known = new Set(found.map((r) => r.id));
      const missing = spec.eventIds.filter((id) => !known.has(id));
      throw invalidArgument(
        `replay of group "${g.name}": no event with id ${missing.slice(0, 5).map((id) => JSON.stringify(id)).join(', ')} in stream "${g.stream.name}"`,
        { stream: g.stream.name, group: g.name },
      );
    }
    const inScope = found.filter((r) => scope.includes(r.partition));
    await txQuery(tx, sql.ownership.bumpGenerations, [g.id, [...new Set(inScope.map((r) => r.partition))]]);
    await txQuery(tx, sql.lockCursors, [g.id, scope]);
    await txQuery(tx, sql.explodeGroup, [g.id, scope]);
    if (inScope.length === 0) return;
    await txQuery(tx, sql.reopen, [g.id, inScope.map((r) => r.partition), inScope.map((r) => r.sequence), ctx.now()]);
  });
}

async function resetGroup(ctx: StoreContext, g: GroupRef, start: GroupStart, partitions: number[] | null = null): Promise<void> {
  const scope = groupScope(g, partitions);
  const params = startParams(g.stream, start);
  if (start.kind === 'after') checkStartScope(g.stream.name, g.name, start.perPartition, scope);
  await ctx.db.transaction(
    { action: `reset group "${g.name}" of stream "${g.stream.name}"`, stream: g.stream.name, group: g.name, writes: true },
    async (tx) => {
      await txQuery(tx, ctx.sql.lockLowWatermarks, [g.stream.id]);
      await txQuery(tx, ctx.sql.ownership.bumpGenerations, [g.id, scope]);
      await txQuery(tx, ctx.sql.lockCursors, [g.id, scope]);
      await txQuery(tx, ctx.sql.reset, [g.id, g.stream.id, ...params, scope]);
    },
  );
}

interface DeadLetterRow extends EventRow {
  dead_letter_id: string;
  attempt: number;
  reason: string | null;
  dead_lettered_at_ms: number;
}

async function listDeadLetters(
  ctx: StoreContext,
  g: GroupRef,
  limit: number,
  after: string | null,
  maxBytes: number,
): Promise<DeadLetter[]> {
  const label = { stream: g.stream.name, group: g.name, writes: false };
  if (after !== null) {
    const notFound = new RheoError(
      'cursor_not_found',
      `dead-letter cursor ${JSON.stringify(after)} names no current dead letter of group "${g.name}" on stream "${g.stream.name}"`,
      { stream: g.stream.name, group: g.name },
    );
    if (!/^[1-9][0-9]{0,17}$/.test(after)) throw notFound;
    const found = await ctx.db.query({ action: 'check dead-letter cursor', ...label }, ctx.sql.deadLetterExists, [g.id, after]);
    if (found.length === 0) throw notFound;
  }
  const rows = await ctx.db.query<DeadLetterRow>(
    { action: `list dead letters of group "${g.name}" on stream "${g.stream.name}"`, ...label },
    ctx.sql.deadLetters,
    [g.id, g.stream.id, after ?? '0', limit, maxBytes],
  );
  return rows.map((row) => ({
    id: row.dead_letter_id,
    stream: g.stream.name,
    group: g.name,
    attempt: row.attempt,
    reason: row.reason,
    deadLetteredAt: new Date(row.dead_lettered_at_ms),
    event: toEvent(g.stream.name, row),
  }));
}

async function redrive(ctx: StoreContext, g: GroupRef, eventIds: string[] | null): Promise<number> {
  const [row] = await ctx.db.query<{ moved: number }>(
    { action: `redrive dead letters of group "${g.name}" on stream "${g.stream.name}"`, stream: g.stream.name, group: g.name, writes: true },
    ctx.sql.redrive,
    [g.id, g.stream.id, eventIds, ctx.now()],
  );
  return row?.moved ?? 0;
}
