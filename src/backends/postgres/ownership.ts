import type {
  CommitOp,
  GroupMembership,
  HeartbeatRequest,
  MemberView,
  OwnershipFence,
  OwnershipStore,
  SettleOutcome,
} from '../../core/backend.js';
import {
  assertWholeStreamGroup,
  commitBeyondLog,
  emptySlot,
  groupModeConflict,
  heartbeatStep,
  leaveStep,
  memberView,
  staleGeneration,
  type MembershipState,
  type StepReport,
} from '../../core/membership.js';
import type { RheoEvent } from '../../core/types.js';
import { RheoError } from '../../core/errors.js';
import { callSignals, currentCallSignal } from '../../core/call-options.js';
import { Coalescer } from '../../core/coalescer.js';
import { checkPartitions, type Catalog, type GroupRef } from './catalog.js';
import { txQuery, type Queryable, type Runner } from './connection.js';
import { toEvent, type EventRow } from './rows.js';
import type { OwnedRead, OwnedReadResult, PostgresStore, StoreContext } from './store.js';

/**
 * Partition ownership on PostgreSQL (docs/design.md#two-ways-to-consume-a-group):
 * the steps of `core/membership.ts` applied under the group's ownership lock,
 * and the fenced reads and offset commits (sql/ownership.ts).
 */
export class PostgresOwnership implements OwnershipStore {
  readonly #store: PostgresStore;

  constructor(store: PostgresStore) {
    this.#store = store;
  }

  async heartbeat(stream: string, group: string, request: HeartbeatRequest): Promise<MemberView> {
    await this.#store.ensureSchema();
    return heartbeat(this.#store, stream, group, request);
  }

  async leaveGroup(stream: string, group: string, memberId: string): Promise<void> {
    await this.#store.ensureSchema();
    await leaveGroup(this.#store, stream, group, memberId);
  }

  async releasePartitions(fences: OwnershipFence[]): Promise<SettleOutcome[]> {
    await this.#store.ensureSchema();
    return releasePartitions(this.#store, fences);
  }

  async readOwned(fence: OwnershipFence, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    await this.#store.ensureSchema();
    return readOwned(this.#store, fence, after, limit, maxBytes);
  }

  async commit(ops: CommitOp[]): Promise<SettleOutcome[]> {
    await this.#store.ensureSchema();
    return commit(this.#store, ops);
  }

  async members(stream: string, group: string): Promise<GroupMembership> {
    await this.#store.ensureSchema();
    return members(this.#store, stream, group);
  }
}

/** Idle limit of a heartbeat's or leave's transaction, which holds the group's ownership lock. */
export const GROUP_LOCK_IDLE_MS = 5_000;

/**
 * Opens a heartbeat's or leave's transaction. The group lock load() takes
 * stops every heartbeat of the group until the transaction ends: a member
 * frozen in the middle of it (SIGSTOP, a long pause) must not stall the
 * others for good, so the server ends it once it has been idle that long,
 * and the lock with it. Set in BEGIN's own round trip.
 */
const BEGIN_GROUP_LOCK = `BEGIN; SET LOCAL idle_in_transaction_session_timeout = ${GROUP_LOCK_IDLE_MS}`;

type SlotRow = [partition: number, owner: string | null, target: string | null, generation: number, revokedAtMs: number | null];

interface Loaded {
  state: MembershipState;
  nowMs: number;
  /** Members as read, to write only the difference. */
  before: Set<string>;
}

function label(g: GroupRef, action: string) {
  return { action: `${action} in group "${g.name}" of stream "${g.stream.name}"`, stream: g.stream.name, group: g.name, writes: true };
}

/**
 * Locks the group, refuses beside live leases when asked to, and loads its
 * membership with the owner rows locked (sql/ownership.ts). Runs in a
 * transaction opened with BEGIN_GROUP_LOCK.
 */
async function load(ctx: StoreContext, tx: Queryable, g: GroupRef, refuseLeased: boolean): Promise<Loaded> {
  const [lock] = await txQuery<{ generation: number; now_ms: number; leased: boolean }>(tx, ctx.sql.ownership.lockGroup, [g.id, ctx.now()]);
  if (!lock) throw new Error('the group ownership lock returned no row');
  if (refuseLeased && lock.leased) throw groupModeConflict(g.stream.name, g.name);
  const [row] = await txQuery<{ members: Array<[string, number]>; slots: SlotRow[] }>(tx, ctx.sql.ownership.readMembership, [g.id]);
  const slots = Array.from({ length: g.stream.partitions }, emptySlot);
  for (const [partition, owner, target, generation, revokedAt] of row?.slots ?? []) {
    if (partition < slots.length) slots[partition] = { owner, target, generation, revokedAt };
  }
  const members = new Map(row?.members ?? []);
  return { state: { groupGeneration: lock.generation, members, slots }, nowMs: lock.now_ms, before: new Set(members.keys()) };
}

/**
 * Writes the step's changes. With `frontiers` (partitions), also reads their
 * frontiers: in the same statement when no partition changed hands, else
 * after the exploded ranges are rows.
 */
async function write(
  ctx: StoreContext,
  tx: Queryable,
  g: GroupRef,
  loaded: Loaded,
  report: StepReport,
  refreshed: string | null,
  frontiers: number[] = [],
): Promise<Map<number, number>> {
  const { state, before } = loaded;
  const upsert = refreshed === null ? [] : [refreshed];
  const removed = [...before].filter((m) => !state.members.has(m));
  const changed = [...report.changed].sort((a, b) => a - b);
  const slots = changed.map((p) => state.slots[p]!);
  const read = frontiers.length > 0;
  const together = read && changed.length === 0;
  const written = await txQuery<FrontierRow>(tx, together ? ctx.sql.ownership.writeMembershipFrontiers : ctx.sql.ownership.writeMembership, [
    g.id,
    upsert,
    upsert.map((m) => state.members.get(m)!),
    removed,
    changed,
    slots.map((s) => s.owner),
    slots.map((s) => s.target),
    slots.map((s) => s.generation),
    slots.map((s) => s.revokedAt),
    state.groupGeneration,
    ...(together ? [frontiers] : []),
  ]);
  // Expired lease ranges of partitions that change hands become rows, which
  // the new owner's commits delete (sql/ownership.ts commitSql).
  if (changed.length > 0) await txQuery(tx, ctx.sql.explodeGroup, [g.id, changed]);
  const rows = together ? written : read ? await txQuery<FrontierRow>(tx, ctx.sql.ownership.frontiers, [g.id, frontiers]) : [];
  return new Map(rows.map((row) => [row.partition, row.frontier]));
}

interface FrontierRow {
  partition: number;
  frontier: number;
}

async function heartbeat(ctx: StoreContext, stream: string, group: string, request: HeartbeatRequest): Promise<MemberView> {
  const g = await ctx.catalog.group(stream, group);
  assertWholeStreamGroup(g.stream.name, g.name, g.partitions, g.stream.partitions);
  return ctx.db.transaction(
    label(g, `heartbeat of member "${request.memberId}"`),
    async (tx) => {
      const loaded = await load(ctx, tx, g, true);
      const report = heartbeatStep(loaded.state, request, loaded.nowMs);
      const mine = loaded.state.slots.flatMap((slot, p) => (slot.owner === request.memberId ? [p] : []));
      const frontiers = await write(ctx, tx, g, loaded, report, request.memberId, mine);
      return memberView(loaded.state, request.memberId, (p) => frontiers.get(p) ?? 0);
    },
    BEGIN_GROUP_LOCK,
  );
}

async function leaveGroup(ctx: StoreContext, stream: string, group: string, memberId: string): Promise<void> {
  const g = await ctx.catalog.group(stream, group);
  await ctx.db.transaction(
    label(g, `leave of member "${memberId}"`),
    async (tx) => {
      const loaded = await load(ctx, tx, g, false);
      const report = leaveStep(loaded.state, memberId, loaded.nowMs);
      if (report.changed.size > 0 || loaded.before.has(memberId)) await write(ctx, tx, g, loaded, report, null);
    },
    BEGIN_GROUP_LOCK,
  );
}

/** Looks each distinct (stream, group) up once; `null` for one that does not exist. */
async function groupsOf(catalog: Catalog, items: OwnershipFence[], runner?: Runner): Promise<Array<GroupRef | null>> {
  const found = new Map<string, GroupRef | null>();
  const out: Array<GroupRef | null> = [];
  for (const item of items) {
    const key = `${item.stream}\u0000${item.group}`;
    let g = found.get(key);
    if (g === undefined) {
      g = await catalog.findGroup(item.stream, item.group, runner);
      found.set(key, g);
    }
    out.push(g && item.partition < g.stream.partitions ? g : null);
  }
  return out;
}

async function releasePartitions(ctx: StoreContext, fences: OwnershipFence[]): Promise<SettleOutcome[]> {
  const groups = await groupsOf(ctx.catalog, fences);
  const sent = fences.flatMap((f, i) => (groups[i] ? [{ f, g: groups[i]!, i }] : []));
  const applied = new Set<number>();
  if (sent.length > 0) {
    const rows = await ctx.db.query<{ i: number }>(
      { action: `release ${sent.length} partition(s)`, stream: fences[0]?.stream, group: fences[0]?.group, writes: true },
      ctx.sql.ownership.release,
      [sent.map((s) => s.g.id), sent.map((s) => s.f.partition), sent.map((s) => s.f.memberId), sent.map((s) => s.f.generation)],
    );
    for (const row of rows) applied.add(sent[row.i - 1]!.i);
  }
  return fences.map((f, i) => (applied.has(i) ? { ok: true as const } : { ok: false as const, error: staleGeneration(f) }));
}

async function readOwned(ctx: StoreContext, fence: OwnershipFence, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
  const g = await ctx.catalog.group(fence.stream, fence.group);
  checkPartitions(g.stream, [fence.partition]);
  const read: OwnedRead = { g, fence, after, limit, maxBytes };
  // A call with its own signal or timeout is sent alone, so cancelling it
  // cancels only its own statement; the rest share one statement per round.
  const events = currentCallSignal() ? (await readOwnedBatch(ctx, [read]))[0]! : await ownedReads(ctx).submit(read);
  if (events === null) throw staleGeneration(fence);
  return events;
}

/**
 * The reads that a consumer's partition workers ask for together (every
 * owned partition that has caught up reads again at about the same time)
 * go out as one statement while another is in flight: one round trip and
 * one connection instead of one per partition.
 */
function ownedReads(ctx: StoreContext): Coalescer<OwnedRead, OwnedReadResult> {
  // Sent outside the async context of whichever call happened to start the
  // round: no caller's signal may cancel a statement the others share.
  ctx.ownedReads ??= new Coalescer((reads: OwnedRead[]) => callSignals.exit(() => readOwnedBatch(ctx, reads)), { maxBatch: 64 });
  return ctx.ownedReads;
}

async function readOwnedBatch(ctx: StoreContext, reads: OwnedRead[]): Promise<OwnedReadResult[]> {
  const first = reads[0]!;
  const statement = await ctx.plans.pick(ctx.sql.ownership.readOwned, ctx.sql.ownership.readOwnedReplanned);
  const rows = await ctx.db.query<EventRow & { i: number; fenced: boolean }>(
    {
      action:
        reads.length === 1
          ? `read owned partition ${first.fence.partition} of group "${first.g.name}" on stream "${first.g.stream.name}"`
          : `read ${reads.length} owned partitions of group "${first.g.name}" on stream "${first.g.stream.name}"`,
      stream: first.g.stream.name,
      group: first.g.name,
      writes: false,
    },
    statement,
    [
      reads.map((r) => r.g.stream.id),
      reads.map((r) => r.fence.partition),
      reads.map((r) => r.after),
      reads.map((r) => r.limit),
      reads.map((r) => r.maxBytes),
      reads.map((r) => r.g.id),
      reads.map((r) => r.fence.memberId),
      reads.map((r) => r.fence.generation),
    ],
  );
  const results: OwnedReadResult[] = reads.map(() => null);
  for (const row of rows) {
    const k = row.i - 1;
    if (!row.fenced) continue;
    const events = (results[k] ??= []);
    if (row.id !== null) events.push(toEvent(reads[k]!.g.stream.name, row));
  }
  return results;
}

/** An offset commit joining a transaction: its partitions are locked first, and the transaction's idle time bounded. */
export interface HeldCommit {
  idleMs: number;
}

/** A `once` commit that found its frontier already past: an earlier run committed (sql/ownership.ts commitSql). */
function alreadyCommitted(op: CommitOp): RheoError {
  return new RheoError(
    'already_exists',
    `partition ${op.partition} of group "${op.group}" on stream "${op.stream}" is already committed up to ${op.upTo}: an earlier run of this transaction committed (its COMMIT answer was lost), so this one must roll back`,
    { stream: op.stream, group: op.group },
  );
}

/**
 * Offset commits (sql/ownership.ts commitSql). `runner` is the pool by
 * default, or an application's transaction (transaction.ts): the owner row's
 * share lock and the cursor's row lock are then held until that transaction
 * ends, so an ownership change of the partition waits for it and the
 * handler's writes commit with the offset or not at all.
 */
export async function commit(ctx: StoreContext, ops: CommitOp[], runner: Runner = ctx.db, held?: HeldCommit): Promise<SettleOutcome[]> {
  // A cache miss is looked up on the same runner: a transaction never waits for a second pooled connection.
  const groups = await groupsOf(ctx.catalog, ops, runner);
  const sent = ops.flatMap((op, i) => (groups[i] ? [{ op, g: groups[i]!, i }] : []));
  const status = new Map<number, { status: string; high_watermark: number }>();
  if (held) {
    await runner.query(
      { action: 'lock the partitions of an offset commit in a transaction', stream: ops[0]?.stream, group: ops[0]?.group, writes: false },
      ctx.sql.ownership.lockCommitCursors,
      [String(held.idleMs), sent.map((s) => s.g.id), sent.map((s) => s.op.partition)],
    );
  }
  if (sent.length > 0) {
    const dead = sent.flatMap((s, k) => s.op.deadLetters.map((d) => ({ ...d, k: k + 1 })));
    const rows = await runner.query<{ i: number; status: string; high_watermark: number }>(
      { action: `commit ${sent.length} partition(s)`, stream: ops[0]?.stream, group: ops[0]?.group, writes: true },
      ctx.sql.ownership.commit,
      [
        sent.map((s) => s.g.id),
        sent.map((s) => s.g.stream.id),
        sent.map((s) => s.op.partition),
        sent.map((s) => s.op.memberId),
        sent.map((s) => s.op.generation),
        sent.map((s) => s.op.upTo),
        dead.map((d) => d.k),
        dead.map((d) => d.sequence),
        dead.map((d) => d.attempt),
        dead.map((d) => d.reason),
        ctx.now(),
        sent.map((s) => s.op.once === true),
      ],
    );
    for (const row of rows) status.set(sent[row.i - 1]!.i, row);
  }
  return ops.map((op, i) => {
    const row = status.get(i);
    if (row?.status === 'ok') return { ok: true as const };
    if (row?.status === 'done') return { ok: false as const, error: alreadyCommitted(op) };
    if (row?.status === 'beyond') return { ok: false as const, error: commitBeyondLog(op, op.upTo, row.high_watermark) };
    return { ok: false as const, error: staleGeneration(op) };
  });
}

async function members(ctx: StoreContext, stream: string, group: string): Promise<GroupMembership> {
  const g = await ctx.catalog.group(stream, group);
  const [row] = await ctx.db.query<{ generation: number | null; members: Array<[string, number]>; slots: Array<[number, string | null, string | null]> }>(
    { action: `members of group "${g.name}" on stream "${g.stream.name}"`, stream, group, writes: false },
    ctx.sql.ownership.members,
    [g.id, ctx.now()],
  );
  const owners: Record<number, string | null> = {};
  for (let p = 0; p < g.stream.partitions; p++) owners[p] = null;
  const slots = row?.slots ?? [];
  for (const [p, owner] of slots) owners[p] = owner;
  return {
    groupGeneration: row?.generation ?? 0,
    members: (row?.members ?? []).map(([memberId, expiresAtMs]) => ({
      memberId,
      expiresAt: new Date(expiresAtMs),
      partitions: slots.filter(([, owner]) => owner === memberId).map(([p]) => p),
      revoking: slots.filter(([, owner, target]) => owner === memberId && target !== memberId).map(([p]) => p),
    })),
    owners,
  };
}
