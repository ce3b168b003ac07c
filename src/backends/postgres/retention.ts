import type { RetentionPolicy, RetentionStore, TrimReport, TrimRequest } from '../../core/backend.js';
import { groupNotFound, isRheoError, streamNotFound } from '../../core/errors.js';
import type { StreamRef } from './catalog.js';
import { txQuery, type Queryable, type StatementContext } from './connection.js';
import type { SegmentRoller } from './segments.js';
import type { RetentionStatements } from './sql/retention.js';
import type { PostgresStore, StoreContext } from './store.js';

/** Retention and deletion on PostgreSQL (capability `retention`): policies, trims, and the deletion of groups and streams. */
export class PostgresRetention implements RetentionStore {
  readonly #store: PostgresStore;

  constructor(store: PostgresStore) {
    this.#store = store;
  }

  async setRetention(stream: string, retention: RetentionPolicy | null): Promise<void> {
    await this.#store.ensureSchema();
    await setRetention(this.#store, stream, retention);
  }

  async trim(stream: string, request: TrimRequest): Promise<TrimReport> {
    await this.#store.ensureSchema();
    // The background trimmer also finishes purging streams whose deleting process died.
    if (request.skipIfBusy) await purgeLeftovers(this.#store);
    const s = await this.#store.catalog.stream(stream);
    try {
      return await trimStream(this.#store, s, request);
    } catch (error) {
      if (isRheoError(error, 'stream_not_found')) this.#store.catalog.forgetStream(stream);
      throw error;
    }
  }

  async deleteGroup(stream: string, group: string): Promise<void> {
    await this.#store.ensureSchema();
    const g = await this.#store.catalog.group(stream, group);
    this.#store.catalog.forgetGroup(stream, group);
    await deleteGroup(this.#store, stream, group, g.id);
  }

  async deleteStream(stream: string): Promise<void> {
    await this.#store.ensureSchema();
    this.#store.catalog.forgetStream(stream);
    await deleteStream(this.#store, stream);
    this.#store.listener.wake(stream);
  }
}

interface RetentionContext extends StoreContext {
  readonly retention: RetentionStatements;
  readonly schema: string;
  readonly segments: SegmentRoller;
}

interface BoundRow {
  partition: number;
  low_watermark: number;
  high_watermark: number;
  bound: number;
}

interface FrontierRow {
  group_id: number;
  name: string;
  partition: number;
  frontier: number;
}

/** Events per batch when a deleted stream's events are purged. */
const PURGE_BATCH = 10_000;

/**
 * One trim batch in one transaction (docs/semantics.md, "Retention";
 * statement order and lock order in sql/retention.ts). Bounds come from the
 * request or the stream's policy, are capped per partition by the batch
 * budget (partitions in order) and, unless forced, by every group's
 * frontier. A forced bound that passes a group's frontier costs that group
 * its unsettled sequences below it, counted in `forced`.
 *
 * Segments (migration 009) wholly at or below the bounds are dropped: no
 * row is deleted in them. What is left up to the bound (segment 0, the one
 * segment per partition the bound cuts through, a segment whose DROP gave
 * up on its lock) goes by row deletes as before, so the bound holds exactly
 * either way; those dead rows go when their segment is dropped later.
 * Sequences are gapless, so `deleted` is the number of sequences passed.
 */
async function trimStream(ctx: RetentionContext, stream: StreamRef, request: TrimRequest): Promise<TrimReport> {
  const r = ctx.retention;
  const explicit = request.before !== null || request.keep !== null;
  const label = { stream: stream.name, writes: true };
  // Age-based policies roll segments by time; a stream appended only from SQL or in transactions rolls here.
  await ctx.segments.roll(stream.id, stream.name);
  return ctx.db.transaction({ action: `trim stream "${stream.name}"`, ...label }, async (tx) => {
    const [lock] = await txQuery<{ locked: boolean }>(tx, request.skipIfBusy ? r.trimLockTry : r.trimLockWait, [
      ctx.schema,
      stream.id,
    ]);
    const report: TrimReport = { deleted: 0, partitions: {}, forced: [] };
    if (!lock?.locked) return report;
    const lows = await txQuery<{ partition: number }>(tx, r.lockLows, [stream.id]);
    // The stream was deleted while this call looked it up: its rows are gone.
    if (lows.length === 0) throw streamNotFound(stream.name);
    const bounds = await txQuery<BoundRow>(tx, r.trimBounds, [
      stream.id,
      explicit,
      request.before?.toISOString() ?? null,
      request.keep,
      request.limit,
      ctx.now(),
    ]);
    const frontiers = await txQuery<FrontierRow>(tx, r.trimFrontiers, [stream.id]);
    let budget = request.limit;
    const plan: Array<{ partition: number; low: number; bound: number }> = [];
    for (const row of bounds) {
      let bound = Math.min(row.bound, row.low_watermark - 1 + Math.max(0, budget));
      if (!request.force) {
        for (const f of frontiers) if (f.partition === row.partition) bound = Math.min(bound, f.frontier);
      }
      if (bound >= row.low_watermark) budget -= bound - row.low_watermark + 1;
      plan.push({ partition: row.partition, low: row.low_watermark, bound });
    }
    const passed = frontiers.filter((f) => {
      const p = plan.find((x) => x.partition === f.partition);
      return p !== undefined && p.bound >= p.low && f.frontier < p.bound;
    });
    if (passed.length > 0) report.forced = await forgetUnsettled(ctx, tx, passed, plan);
    for (const p of plan) {
      if (p.bound >= p.low) await txQuery(tx, r.trimDeadLetters, [stream.id, p.partition, p.bound]);
    }
    const droppable = await txQuery<{ segment: string | number }>(tx, r.droppableSegments, [
      stream.id,
      plan.map((p) => p.partition),
      plan.map((p) => Math.max(p.bound, p.low - 1)),
    ]);
    for (const { segment } of droppable) await txQuery(tx, r.dropSegment, [stream.id, segment]);
    for (const p of plan) {
      let deleted = 0;
      if (p.bound >= p.low) {
        await txQuery(tx, r.trimEvents, [stream.id, p.partition, p.low, p.bound]);
        deleted = p.bound - p.low + 1;
        await txQuery(tx, r.setLow, [stream.id, p.partition, p.bound + 1]);
      }
      report.deleted += deleted;
      report.partitions[p.partition] = { deleted, lowWatermark: Math.max(p.low, p.bound + 1) };
    }
    return report;
  });
}

/** Forced trim: the passed groups drop their state up to the bound; returns what each lost. */
async function forgetUnsettled(
  ctx: RetentionContext,
  tx: Queryable,
  passed: FrontierRow[],
  plan: Array<{ partition: number; bound: number }>,
): Promise<TrimReport['forced']> {
  const r = ctx.retention;
  const groupIds = passed.map((f) => f.group_id);
  const partitions = passed.map((f) => f.partition);
  const bounds = passed.map((f) => plan.find((p) => p.partition === f.partition)!.bound);
  await txQuery(tx, r.trimLockCursors, [groupIds, partitions]);
  for (const groupId of new Set(groupIds)) {
    const scope = passed.filter((f) => f.group_id === groupId).map((f) => f.partition);
    await txQuery(tx, ctx.sql.explodeGroup, [groupId, scope]);
  }
  const counts = await txQuery<{ group_id: number; partition: number; unsettled: string | number }>(tx, r.trimUnsettled, [
    groupIds,
    partitions,
    bounds,
  ]);
  await txQuery(tx, r.trimGroupState, [groupIds, partitions, bounds]);
  for (const groupId of new Set(groupIds)) {
    const scope = passed.filter((f) => f.group_id === groupId).map((f) => f.partition);
    await txQuery(tx, ctx.sql.replayAdvance, [groupId, scope]);
  }
  const names = new Map(passed.map((f) => [f.group_id, f.name]));
  return counts
    .map((c) => ({ group: names.get(c.group_id)!, partition: c.partition, unsettled: Number(c.unsettled) }))
    .filter((c) => c.unsettled > 0)
    .sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : a.partition - b.partition));
}

async function setRetention(ctx: RetentionContext, stream: string, policy: RetentionPolicy | null): Promise<void> {
  const rows = await ctx.db.query<{ id: number }>(
    { action: `set the retention of stream "${stream}"`, stream, writes: true },
    ctx.retention.setRetention,
    [stream, policy?.maxAgeMs ?? null, policy?.maxEvents ?? null],
  );
  if (rows.length === 0) throw streamNotFound(stream);
  // Its next append checks the segment again, spaced by the new policy from then on.
  ctx.segments.forget(rows[0]!.id);
}

async function deleteGroup(ctx: RetentionContext, stream: string, group: string, groupId: number): Promise<void> {
  const rows = await ctx.db.transaction(
    { action: `delete group "${group}" of stream "${stream}"`, stream, group, writes: true },
    (tx) => txQuery(tx, ctx.retention.deleteGroup, [groupId]),
  );
  if (rows.length === 0) throw groupNotFound(stream, group);
}

/**
 * The catalog rows and group state in one transaction, then the events in
 * bounded batches (each its own statement) so a large stream never holds one
 * long transaction.
 */
async function deleteStream(ctx: RetentionContext, stream: string): Promise<void> {
  const rows = await ctx.db.transaction({ action: `delete stream "${stream}"`, stream, writes: true }, (tx) =>
    txQuery<{ id: number }>(tx, ctx.retention.deleteStream, [stream]),
  );
  const [row] = rows;
  if (!row) throw streamNotFound(stream);
  await purgeStream(ctx, row.id, stream);
  // And one batch of whatever a process that died mid-purge left behind.
  await purgeLeftovers(ctx);
}

async function purgeStream(ctx: RetentionContext, streamId: number, name: string): Promise<void> {
  const label = { action: `delete the events of deleted stream "${name}"`, stream: name, writes: true };
  ctx.segments.forget(streamId);
  await dropStreamSegments(ctx, streamId, label);
  for (;;) {
    const [res] = await ctx.db.query<{ deleted: number }>(label, ctx.retention.purgeEvents, [streamId, PURGE_BATCH]);
    if ((res?.deleted ?? 0) < PURGE_BATCH) break;
  }
  await ctx.db.query(label, ctx.retention.purgeDone, [streamId]);
}

/** One batch of the events of a stream deleted by a process that died before purging them. */
async function purgeLeftovers(ctx: RetentionContext): Promise<void> {
  const [row] = await ctx.db.query<{ stream_id: number }>(
    { action: 'look for deleted streams to purge', writes: false },
    ctx.retention.nextPurge,
    [],
  );
  if (!row) return;
  const label = { action: `purge the events of deleted stream ${row.stream_id}`, writes: true };
  await dropStreamSegments(ctx, row.stream_id, label);
  const [res] = await ctx.db.query<{ deleted: number }>(label, ctx.retention.purgeEvents, [row.stream_id, PURGE_BATCH]);
  if ((res?.deleted ?? 0) < PURGE_BATCH) await ctx.db.query(label, ctx.retention.purgeDone, [row.stream_id]);
}

/**
 * A deleted stream's segments go whole (each its own statement); a DROP that
 * gives up on its lock leaves that segment's rows to the purge's batches, and
 * its empty table to the next purge of leftovers.
 */
async function dropStreamSegments(ctx: RetentionContext, streamId: number, label: StatementContext): Promise<void> {
  const segments = await ctx.db.query<{ segment: string | number }>(label, ctx.retention.streamSegments, [streamId]);
  for (const { segment } of segments) await ctx.db.query(label, ctx.retention.dropSegment, [streamId, segment]);
}
