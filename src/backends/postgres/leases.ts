import {
  receiptOf,
  type FetchRequest,
  type GroupSpec,
  type LeaseRef,
  type LeaseStore,
  type RenewResult,
  type SettleOp,
  type SettleOutcome,
} from '../../core/backend.js';
import { RheoError, staleLease } from '../../core/errors.js';
import { checkStartScope } from '../../core/partition-scope.js';
import type { JsonObject, JsonValue, Lease } from '../../core/types.js';
import { checkPartitions, groupScope, type Catalog, type GroupRef } from './catalog.js';
import type { Runner } from './connection.js';
import { startParams, type PostgresStore, type StoreContext } from './store.js';
import { intArrayLiteral, textArrayLiteral } from './array-literal.js';

/** Groups and per-event leases on PostgreSQL: group creation, and the claim, renewal and settle statements (sql/claim.ts, sql/settle.ts). */
export class PostgresLeases implements LeaseStore {
  readonly #store: PostgresStore;

  constructor(store: PostgresStore) {
    this.#store = store;
  }

  async createGroup(stream: string, group: string, spec: GroupSpec): Promise<void> {
    await this.#store.ensureSchema();
    const s = await this.#store.catalog.stream(stream);
    const partitions = spec.partitions ?? null;
    if (partitions !== null) checkPartitions(s, partitions);
    const start = startParams(s, spec.start);
    if (spec.start.kind === 'after') {
      checkStartScope(stream, group, spec.start.perPartition, partitions ?? Array.from({ length: s.partitions }, (_, p) => p));
    }
    const rows = await this.#store.db.query(
      { action: `create group "${group}" on stream "${stream}"`, stream, group, writes: true },
      this.#store.sql.createGroup,
      [s.id, group, spec.maxAttempts, this.#store.now(), ...start, partitions],
    );
    if (rows.length === 0) {
      throw new RheoError('already_exists', `group "${group}" already exists on stream "${stream}"`, { stream, group });
    }
  }

  async listGroups(stream: string): Promise<string[]> {
    await this.#store.ensureSchema();
    const s = await this.#store.catalog.stream(stream);
    const rows = await this.#store.db.query<{ name: string }>(
      { action: `list groups of stream "${stream}"`, stream, writes: false },
      this.#store.sql.listGroups,
      [s.id],
    );
    return rows.map((r) => r.name);
  }

  // The hot paths call straight through once the schema is checked: no extra await per call.

  fetch(stream: string, group: string, request: FetchRequest): Promise<Lease[]> {
    const store = this.#store;
    const claim = store.schemaOk ? fetchLeases(store, stream, group, request) : store.ensureSchema().then(() => fetchLeases(store, stream, group, request));
    return claim.then(async ({ leases, known }) => {
      // Nothing under cached ids the claim could not vouch for: the group or
      // stream may have been deleted (or re-created) elsewhere.
      if (leases.length > 0 || known || (await store.catalog.revalidate(stream, group))) return leases;
      return (await fetchLeases(store, stream, group, request)).leases;
    });
  }

  renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    const store = this.#store;
    return store.schemaOk ? renewLeases(store, refs, leaseMs) : store.ensureSchema().then(() => renewLeases(store, refs, leaseMs));
  }

  settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    const store = this.#store;
    return store.schemaOk ? settleLeases(store, ops) : store.ensureSchema().then(() => settleLeases(store, ops));
  }
}

/** After a fetch found a requested cursor held elsewhere, this many fetches lock half of the partitions. */
const CONTENDED_FETCHES = 8;

interface ClaimRow {
  leased_at_ms: number;
  expires_at_ms: number;
  leases: ClaimedLease[];
  /** A requested partition's cursor was held by another transaction and skipped (routines.ts). */
  contended: boolean;
  /** The group of the ids sent still exists (routines.ts). */
  known: boolean;
}

/** One lease as the claim's json_agg sends it (sql/claim.ts). */
type ClaimedLease = [
  leaseId: string,
  attempt: number,
  id: string,
  partition: number,
  sequence: number,
  type: string,
  key: string | null,
  payload: JsonValue,
  metadata: JsonObject,
  tsMs: number,
];

/**
 * Claims in one statement (see sql/claim.ts). The rotating start partition is
 * kept per backend instance rather than in the database: a shared counter row
 * would serialise every fetch of the group on one lock, while per-process
 * rotation is just as fair.
 */
async function fetchLeases(
  ctx: StoreContext,
  stream: string,
  group: string,
  request: FetchRequest,
): Promise<{ leases: Lease[]; known: boolean }> {
  const g = await ctx.catalog.group(stream, group);
  const all = groupScope(g, request.partitions);
  const turn = ctx.rotation.get(g.id) ?? 0;
  ctx.rotation.set(g.id, turn + 1);
  const start = turn % all.length;
  const order = [...all.slice(start), ...all.slice(0, start)];
  // While other fetches of the group are active, lock half of the partitions
  // (from the rotating start), so concurrent fetches claim from disjoint
  // partitions instead of one taking every cursor and the others skipping
  // them all; otherwise all of them, for exact round-robin (routines.ts).
  const contention = (ctx.contention ??= new Map<number, number>());
  const contendedLeft = contention.get(g.id) ?? 0;
  let lockAtMost = contendedLeft > 0 ? Math.ceil(order.length / 2) : order.length;
  let row: ClaimRow | undefined;
  const claim = await ctx.plans.pick(ctx.sql.claim, ctx.sql.claimReplanned);
  for (;;) {
    [row] = await ctx.db.query<ClaimRow>(
      { action: `fetch from group "${group}" of stream "${stream}"`, stream, group, writes: true },
      claim,
      [g.id, g.stream.id, order, request.limit, ctx.now(), request.leaseMs, request.consumerId, request.maxBytes, g.maxAttempts, lockAtMost],
    );
    if (row?.contended) contention.set(g.id, CONTENDED_FETCHES);
    else if (contendedLeft > 0) contention.set(g.id, contendedLeft - 1);
    // Half the partitions had nothing: the other half may, so try them all
    // before answering empty (empty means nothing claimable that it could lock).
    if ((!row || row.leases.length === 0) && lockAtMost < order.length) {
      lockAtMost = order.length;
      continue;
    }
    break;
  }
  if (!row || row.leases.length === 0) return { leases: [], known: row?.known === true };
  const { leased_at_ms: leasedAtMs, expires_at_ms: expiresAtMs } = row;
  const leases = roundRobin(row.leases, order).map(([leaseId, attempt, id, partition, sequence, type, key, payload, metadata, tsMs]) => ({
    leaseId,
    receipt: receiptOf(stream, group, partition, sequence),
    stream,
    group,
    consumerId: request.consumerId,
    attempt,
    leasedAt: new Date(leasedAtMs),
    expiresAt: new Date(expiresAtMs),
    event: { id, stream, partition, sequence, type, key, payload, metadata, timestamp: new Date(tsMs) },
  }));
  return { leases, known: true };
}

/**
 * The claimed leases in fetch order: within a partition by sequence, across
 * partitions one per round in visiting order. The statement picks exactly the
 * set this order would take (sql/claim.ts \`picked\`) but returns it unordered,
 * which spares it a sort and lets a new range's events come from one range scan.
 */
function roundRobin(leases: ClaimedLease[], order: number[]): ClaimedLease[] {
  const bySequence = (a: ClaimedLease, b: ClaimedLease) => a[4] - b[4];
  if (order.length === 1) return leases.sort(bySequence);
  const byPartition = new Map<number, ClaimedLease[]>();
  for (const lease of leases) {
    const list = byPartition.get(lease[3]);
    if (list) list.push(lease);
    else byPartition.set(lease[3], [lease]);
  }
  const lists: ClaimedLease[][] = [];
  for (const partition of order) {
    const list = byPartition.get(partition);
    if (list) lists.push(list.sort(bySequence));
  }
  const out: ClaimedLease[] = [];
  for (let round = 0; out.length < leases.length; round++) {
    for (const list of lists) if (round < list.length) out.push(list[round]!);
  }
  return out;
}

/**
 * Each item's group, `null` where it does not exist, looked up once per
 * distinct (stream, group): a batch nearly always names one, so the last
 * pair is compared before the map is consulted (a key string per lease was
 * measurable garbage on the settle path).
 */
async function groupsOf(catalog: Catalog, items: LeaseRef[], runner?: Runner): Promise<Array<GroupRef | null>> {
  const found = new Map<string, GroupRef | null>();
  const out: Array<GroupRef | null> = [];
  let lastStream: string | null = null;
  let lastGroup: string | null = null;
  let last: GroupRef | null = null;
  for (const item of items) {
    if (item.stream !== lastStream || item.group !== lastGroup) {
      const key = `${item.stream}\u0000${item.group}`;
      let group = found.get(key);
      if (group === undefined) {
        group = await catalog.findGroup(item.stream, item.group, runner);
        found.set(key, group);
      }
      lastStream = item.stream;
      lastGroup = item.group;
      last = group;
    }
    out.push(last);
  }
  return out;
}

/**
 * Assigns each item the slot (index into `sent`, the items sent) of the
 * distinct (group, partition, sequence, lease id) it names, or `-1` when its
 * group does not exist. A repeat of an earlier item gets the earlier one's
 * slot and is listed in `repeats`. Keyed by lease id first: ids are unique
 * per grant, so a full key is built only for the rare id that names two
 * deliveries (a key string per lease was measurable garbage on this path).
 */
function distinctSlots(items: LeaseRef[], groups: Array<GroupRef | null>): { slots: number[]; sent: number[]; repeats: Set<number> | null } {
  const firstById = new Map<string, number>();
  let others: Map<string, number> | null = null;
  let repeats: Set<number> | null = null;
  const slots: number[] = [];
  const sent: number[] = [];
  for (let i = 0; i < items.length; i++) {
    const group = groups[i];
    const item = items[i]!;
    if (!group) {
      slots.push(-1);
      continue;
    }
    const first = firstById.get(item.leaseId);
    if (first === undefined) {
      firstById.set(item.leaseId, sent.length);
      slots.push(sent.length);
      sent.push(i);
      continue;
    }
    const earlier = items[sent[first]!]!;
    let slot: number | undefined;
    if (groups[sent[first]!] === group && earlier.partition === item.partition && earlier.sequence === item.sequence) slot = first;
    else {
      const key = `${group.id}/${item.partition}/${item.sequence}/${item.leaseId}`;
      others ??= new Map();
      slot = others.get(key);
      if (slot === undefined) {
        others.set(key, sent.length);
        slots.push(sent.length);
        sent.push(i);
        continue;
      }
    }
    (repeats ??= new Set()).add(i);
    slots.push(slot);
  }
  return { slots, sent, repeats };
}

function stale(ref: LeaseRef, detail: string) {
  return staleLease(ref.stream, ref.group, `${detail} (partition ${ref.partition}, sequence ${ref.sequence})`);
}

const NOT_HELD = 'the delivery is not leased under this leaseId (settled, released, or expired and reclaimed)';

async function renewLeases(ctx: StoreContext, refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
  const groups = await groupsOf(ctx.catalog, refs);
  // One row per distinct (delivery, leaseId); a repeat shares its result.
  const { slots: slotOf, sent } = distinctSlots(refs, groups);
  const expiries = new Map<number, Date>();
  if (sent.length > 0) {
    const rows = await ctx.db.query<{ i: number; expires_at_ms: number }>(
      { action: `renew ${sent.length} lease(s)`, stream: refs[0]?.stream, group: refs[0]?.group, writes: true },
      ctx.sql.renew,
      [
        intArrayLiteral(sent.map((i) => groups[i]!.id)),
        intArrayLiteral(sent.map((i) => refs[i]!.partition)),
        intArrayLiteral(sent.map((i) => refs[i]!.sequence)),
        textArrayLiteral(sent.map((i) => refs[i]!.leaseId)),
        leaseMs,
        ctx.now(),
      ],
    );
    for (const row of rows) expiries.set(row.i - 1, new Date(row.expires_at_ms));
  }
  return refs.map((ref, i) => {
    const expiresAt = expiries.get(slotOf[i] ?? -1);
    return expiresAt ? { ok: true as const, expiresAt } : { ok: false as const, error: stale(ref, NOT_HELD) };
  });
}

/** `runner`: the pool by default, or an application's transaction (transaction.ts). */
export async function settleLeases(ctx: StoreContext, ops: SettleOp[], runner: Runner = ctx.db): Promise<SettleOutcome[]> {
  const groups = await groupsOf(ctx.catalog, ops, runner);
  // Each op is judged by its own lease id. The first op per (delivery, lease
  // id) is sent; a later one with the same id finds the delivery already
  // settled, exactly as if the calls were sequential. Ops on one delivery
  // under different ids are all sent: at most one id is current (a delivery
  // sits in one range or one row under one id), so the statement applies at
  // most one of them, and keying by delivery alone would judge a fresh lease
  // by the stale op ahead of it.
  const { slots: slotOf, sent, repeats } = distinctSlots(ops, groups);
  let applied: (slot: number) => boolean = () => false;
  if (sent.length > 0) {
    const label = { action: `settle ${sent.length} lease(s)`, stream: ops[0]?.stream, group: ops[0]?.group, writes: true };
    const keys = [
      intArrayLiteral(sent.map((i) => groups[i]!.id)),
      intArrayLiteral(sent.map((i) => ops[i]!.partition)),
      intArrayLiteral(sent.map((i) => ops[i]!.sequence)),
      textArrayLiteral(sent.map((i) => ops[i]!.leaseId)),
    ];
    if (sent.every((i) => ops[i]!.kind === 'ack')) {
      // The ack statement names the ops that failed instead.
      const rows = await runner.query<{ i: number }>(label, ctx.sql.ack, keys);
      const failed = new Set(rows.map((row) => row.i - 1));
      applied = (slot) => !failed.has(slot);
    } else {
      const rows = await runner.query<{ i: number }>(label, ctx.sql.settle, [
        ...keys,
        sent.map((i) => ops[i]!.kind),
        sent.map((i) => {
          const op = ops[i]!;
          return op.kind === 'nack' || op.kind === 'reject' ? op.reason : null;
        }),
        sent.map((i) => {
          const op = ops[i]!;
          return op.kind === 'nack' ? op.delayMs : 0;
        }),
        sent.map((i) => groups[i]!.maxAttempts),
        ctx.now(),
      ]);
      const done = new Set(rows.map((row) => row.i - 1));
      applied = (slot) => done.has(slot);
    }
  }
  return ops.map((op, i) => {
    const slot = slotOf[i]!;
    if (repeats?.has(i)) return { ok: false as const, error: stale(op, 'the delivery was already settled earlier in this batch') };
    return slot >= 0 && applied(slot) ? { ok: true as const } : { ok: false as const, error: stale(op, NOT_HELD) };
  });
}
