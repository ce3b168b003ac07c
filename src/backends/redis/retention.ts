import { randomBytes } from 'node:crypto';
import type { RetentionPolicy, TrimReport, TrimRequest } from '../../core/backend.js';
import { RheoError, groupNotFound, streamNotFound } from '../../core/errors.js';
import type { FailureContext } from './errors.js';
import type { KeyLayout } from './keys.js';
import type { LuaScript } from './lua/scripts.js';
import {
  CREATE_STREAM,
  DROP_GROUP,
  DROP_PARTITION,
  RELEASE_LOCK,
  SET_RETENTION,
  TRIM_PARTITION,
  UNLIST_GROUP,
  UNLIST_STREAM,
} from './lua/retention-scripts.js';

/*
 * Retention, trimming and deletion on Redis (capability `retention`;
 * docs/semantics.md, "Retention"). Each step over a partition is one script
 * on that partition's slot (lua/retention-scripts.ts); the catalog steps run
 * on the catalog's slot. Multi-step operations are ordered so that a crash
 * between two steps leaves a consistent state:
 *
 * - trim: partition by partition. Each partition's script trims its log, its
 *   id index, every group's state there and its low watermark together, so a
 *   partition is always either trimmed or not; a crash between partitions
 *   leaves some partitions trimmed and the rest as they were, which is what
 *   a smaller batch limit would have produced. The next trim carries on.
 * - deleteStream: the catalog entry moves to the `deleted` hash first (one
 *   script), so no new lookup finds the stream; then each partition's keys go
 *   (one script each), then the group catalog, then the `deleted` entry. A
 *   crash leaves the `deleted` entry: createStream of that name purges the
 *   leftovers before creating it, and the background trimmer purges them too.
 *   Processes that still have the stream cached cannot write into it again:
 *   append and trim check the partition's incarnation (`inc`, written by
 *   createStream, gone with the partition) and group scripts find no group
 *   state (RHEO_NOGROUP); both write nothing.
 * - deleteGroup: the same with the stream's deleted-groups set: catalog entry
 *   first, then the group's keys per partition, then the set member;
 *   createGroup of that name finishes a deletion cut short before it starts.
 */

/** The backend's side of the retention steps: its caches, clock and connection. */
export interface RetentionHost {
  readonly keys: KeyLayout;
  /** The time argument of the scripts: the injected clock's `now`, or '' for the server's TIME. */
  now(): string;
  run(script: LuaScript, keys: string[], args: (string | number)[], ctx: FailureContext): Promise<unknown>;
  command(args: [string, ...(string | number)[]], ctx: FailureContext): Promise<unknown>;
  /** The stream's catalog entry (may be cached). */
  stream(name: string): Promise<StreamCatalogEntry>;
  /** Drops what the backend cached about the stream (every group of it when `group` is absent). */
  forget(stream: string, group?: string): void;
}

export interface StreamCatalogEntry {
  partitions: number;
  createdAt: number;
  /** The incarnation written into each partition's meta hash; absent for streams created before retention. */
  inc?: string;
}

interface GroupCatalogEntry {
  maxAttempts: number;
  partitions?: number[];
}

/**
 * Most events one trim script deletes: a script blocks the server while it
 * runs (7 to 37 ms per 1,000 events with their ids and group state on a busy
 * two-core host; 10,000 per script took up to 260 ms), so a
 * batch is split into scripts of this size per partition.
 */
const EVENTS_PER_SCRIPT = 1_000;

/** How long a background trimmer holds a stream before another may take it over. */
const TRIM_LOCK_MS = 60_000;

function range(n: number): number[] {
  return [...Array(n).keys()];
}

function policyJson(policy: RetentionPolicy | null): string {
  return policy === null ? '' : JSON.stringify({ maxAgeMs: policy.maxAgeMs, maxEvents: policy.maxEvents });
}

/** Reads an HGETALL reply, which ioredis turns into an object even through call(). */
export function hashEntries(reply: unknown): Array<[string, string]> {
  if (Array.isArray(reply)) return Array.from({ length: reply.length / 2 }, (_, i) => [reply[2 * i] as string, reply[2 * i + 1] as string]);
  return Object.entries((reply ?? {}) as Record<string, string>);
}

/**
 * Writes the stream's incarnation into each partition, then its catalog
 * entry (and policy) in one script: a lookup that finds the entry finds
 * every partition ready. A name whose earlier stream is still being purged
 * is purged first.
 */
export async function createStream(host: RetentionHost, name: string, partitions: number, policy: RetentionPolicy | null, createdAt: number): Promise<void> {
  const ctx = { action: `create stream "${name}"`, stream: name, writes: true };
  const k = host.keys;
  const exists = await host.command(['hexists', k.streams, name], { ...ctx, writes: false });
  if (exists === 1) throw alreadyExists(name);
  const inc = `${createdAt.toString(36)}.${randomBytes(6).toString('hex')}`;
  const entry: StreamCatalogEntry = { partitions, createdAt, inc };
  for (let attempt = 0; ; attempt++) {
    await purgeDeleted(host, name);
    // Not yet listed: no other process writes these keys until the catalog names the stream.
    // maxz only where absent: a process that created this name meanwhile may have appended already.
    await Promise.all(
      range(partitions).map((p) =>
        Promise.all([host.command(['hset', k.partition(name, p).meta, 'inc', inc], ctx), host.command(['hsetnx', k.partition(name, p).meta, 'maxz', 0], ctx)]),
      ),
    );
    const created = await host.run(CREATE_STREAM, [k.streams, k.retention, k.deleted], [name, JSON.stringify(entry), policyJson(policy)], ctx);
    if (created === 1) break;
    // -1: a purge of an earlier stream of this name (ours or another process's) is not finished yet.
    if (created === -1 && attempt >= 3) {
      throw new RheoError('backend_unavailable', `create stream "${name}" failed: an earlier stream of that name is still being deleted; retry`, {
        stream: name,
      });
    }
    if (created === 0) {
      // Someone else created it meanwhile: their partitions must keep their incarnation.
      const theirs = await host.command(['hget', k.streams, name], { ...ctx, writes: false });
      if (typeof theirs === 'string') {
        const other = JSON.parse(theirs) as StreamCatalogEntry;
        if (other.inc !== undefined) {
          await Promise.all(range(other.partitions).map((p) => host.command(['hset', k.partition(name, p).meta, 'inc', other.inc!], ctx)));
        }
      }
      throw alreadyExists(name);
    }
  }
  host.forget(name);
}

function alreadyExists(name: string): RheoError {
  return new RheoError('already_exists', `stream "${name}" already exists`, { stream: name });
}

/** Each stream's policy, by name. */
export async function policies(host: RetentionHost): Promise<Map<string, RetentionPolicy>> {
  const reply = await host.command(['hgetall', host.keys.retention], { action: 'list retention policies', writes: false });
  return new Map(hashEntries(reply).map(([name, raw]) => [name, JSON.parse(raw) as RetentionPolicy]));
}

export async function setRetention(host: RetentionHost, stream: string, policy: RetentionPolicy | null): Promise<void> {
  const ctx = { action: `set the retention of stream "${stream}"`, stream, writes: true };
  const ok = await host.run(SET_RETENTION, [host.keys.streams, host.keys.retention], [stream, policyJson(policy)], ctx);
  if (ok !== 1) throw streamNotFound(stream);
}

/** The stream's groups with the partitions each covers, sorted by name. */
async function groupsOf(host: RetentionHost, stream: string, partitions: number, ctx: FailureContext): Promise<Array<{ name: string; covered: number[] }>> {
  const reply = await host.command(['hgetall', host.keys.groups(stream)], { ...ctx, writes: false });
  return hashEntries(reply)
    .map(([name, raw]) => {
      const g = JSON.parse(raw) as GroupCatalogEntry;
      return { name, covered: g.partitions ? [...g.partitions] : range(partitions) };
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * One trim batch: partition by partition (each one script, see the top of
 * this file), the budget shared in partition order as the other backends
 * share it. With `skipIfBusy` (the background trimmer) it first takes the
 * stream's trim lock, and returns an empty report when another trimmer holds
 * it; explicit trims need no lock, each partition's script recomputing its
 * bound atomically. The group catalog is read before each script (it lives
 * on another slot, so the script cannot read it): a createGroup whose first
 * step lands between that read and the script can still start below the
 * new low watermark (a window of one round trip, open in issue 12).
 */
export async function trim(host: RetentionHost, stream: string, request: TrimRequest): Promise<TrimReport> {
  const ctx = { action: `trim stream "${stream}"`, stream, writes: true };
  const meta = await host.stream(stream);
  const report: TrimReport = { deleted: 0, partitions: {}, forced: [] };
  let token: string | null = null;
  if (request.skipIfBusy) {
    await purgeOneLeftover(host);
    token = randomBytes(9).toString('hex');
    const taken = await host.command(['set', host.keys.trimLock(stream), token, 'NX', 'PX', TRIM_LOCK_MS], ctx);
    if (taken === null) return report;
  }
  try {
    const explicit = request.before !== null || request.keep !== null;
    let keep = '';
    let before = '';
    let maxAge = '';
    if (explicit) {
      if (request.keep !== null) keep = String(request.keep);
      if (request.before !== null) before = String(request.before.getTime());
    } else {
      const raw = await host.command(['hget', host.keys.retention, stream], { ...ctx, writes: false });
      if (typeof raw === 'string') {
        const policy = JSON.parse(raw) as RetentionPolicy;
        if (policy.maxEvents !== null) keep = String(policy.maxEvents);
        if (policy.maxAgeMs !== null) maxAge = String(policy.maxAgeMs);
      }
    }
    let budget = request.limit;
    for (let p = 0; p < meta.partitions; p++) {
      const pk = host.keys.partition(stream, p);
      let deleted = 0;
      let low = '1';
      const lost = new Map<string, number>();
      for (;;) {
        // Read again before every script: a group created meanwhile holds trimming back from its start on.
        const here = (await groupsOf(host, stream, meta.partitions, ctx)).filter((g) => g.covered.includes(p));
        const keys = [pk.log, pk.meta, pk.ids];
        for (const g of here) keys.push(...host.keys.groupState(stream, g.name, p));
        const chunk = Math.min(Math.max(0, budget), EVENTS_PER_SCRIPT);
        const args = [host.now(), meta.inc ?? '', keep, before, maxAge, chunk, request.force ? '1' : '0'];
        let reply: [number, string, number[]];
        try {
          reply = (await host.run(TRIM_PARTITION, keys, args, ctx)) as [number, string, number[]];
        } catch (error) {
          if (error instanceof RheoError && error.code === 'stream_not_found') host.forget(stream);
          throw error;
        }
        deleted += reply[0];
        budget -= reply[0];
        low = reply[1];
        here.forEach((g, i) => lost.set(g.name, (lost.get(g.name) ?? 0) + (reply[2][i] ?? 0)));
        if (reply[0] < chunk || chunk === 0) break;
      }
      report.deleted += deleted;
      report.partitions[p] = { deleted, lowWatermark: Number(low) };
      for (const [group, unsettled] of lost) if (unsettled > 0) report.forced.push({ group, partition: p, unsettled });
    }
    report.forced.sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : a.partition - b.partition));
    return report;
  } finally {
    if (token !== null) {
      await host.run(RELEASE_LOCK, [host.keys.trimLock(stream)], [token], ctx).catch(() => {
        // The lock expires by itself; a failed release only delays the next pass.
      });
    }
  }
}

/** Catalog entry first, then the group's keys partition by partition (see the top of this file). */
export async function deleteGroup(host: RetentionHost, stream: string, group: string): Promise<void> {
  const ctx = { action: `delete group "${group}" of stream "${stream}"`, stream, group, writes: true };
  host.forget(stream, group);
  const meta = await host.stream(stream);
  const raw = await host.run(UNLIST_GROUP, [host.keys.groups(stream), host.keys.deletedGroups(stream)], [group], ctx);
  if (typeof raw !== 'string') throw groupNotFound(stream, group);
  await dropGroup(host, stream, group, meta.partitions, ctx);
  host.forget(stream, group);
}

/**
 * Deletes a deleted group's keys (every partition of the stream: a
 * deletion cut short may have left them anywhere the group covered), then
 * its deleted-groups entry.
 */
async function dropGroup(host: RetentionHost, stream: string, group: string, partitions: number, ctx: FailureContext): Promise<void> {
  await Promise.all(range(partitions).map((p) => host.run(DROP_GROUP, host.keys.groupKeysInPartition(stream, group, p), [], ctx)));
  const outside = host.keys.groupKeysOfStream(stream, group);
  if (outside.length > 0) await Promise.all(outside.map((key) => host.command(['del', key], ctx)));
  await host.command(['srem', host.keys.deletedGroups(stream), group], ctx);
}

/** createGroup's first step: finishes the deletion of an earlier group of that name, if one was cut short. */
export async function finishGroupDeletion(host: RetentionHost, stream: string, group: string, partitions: number): Promise<void> {
  const ctx = { action: `create group "${group}" on stream "${stream}"`, stream, group, writes: true };
  const pending = await host.command(['sismember', host.keys.deletedGroups(stream), group], { ...ctx, writes: false });
  if (pending === 1) await dropGroup(host, stream, group, partitions, ctx);
}

/** Catalog first, then every key the stream owns (see the top of this file). */
export async function deleteStream(host: RetentionHost, stream: string): Promise<void> {
  const ctx = { action: `delete stream "${stream}"`, stream, writes: true };
  const k = host.keys;
  host.forget(stream);
  const raw = await host.run(UNLIST_STREAM, [k.streams, k.retention, k.deleted], [stream, `${Date.now()}|`], ctx);
  if (typeof raw !== 'string') throw streamNotFound(stream);
  await purge(host, stream, JSON.parse(raw) as StreamCatalogEntry);
  host.forget(stream);
}

/** Deletes every key of a deleted stream, then its `deleted` entry. */
async function purge(host: RetentionHost, stream: string, meta: StreamCatalogEntry): Promise<void> {
  const ctx = { action: `delete the keys of deleted stream "${stream}"`, stream, writes: true };
  const k = host.keys;
  const groups = await groupsOf(host, stream, meta.partitions, ctx);
  const half = (await host.command(['smembers', k.deletedGroups(stream)], { ...ctx, writes: false })) as string[];
  const names = [...new Set([...groups.map((g) => g.name), ...half])];
  await Promise.all(
    range(meta.partitions).map((p) => {
      const pk = k.partition(stream, p);
      const keys = [pk.log, pk.meta, pk.ids];
      for (const g of names) keys.push(...k.groupKeysInPartition(stream, g, p));
      return host.run(DROP_PARTITION, keys, [meta.inc ?? ''], ctx);
    }),
  );
  const single = [k.groups(stream), k.deletedGroups(stream), k.trimLock(stream), ...names.flatMap((g) => k.groupKeysOfStream(stream, g))];
  await Promise.all(single.map((key) => host.command(['del', key], ctx)));
  await host.command(['hdel', k.deleted, stream], ctx);
}

/** A `deleted` entry: `<deleted at ms>|<catalog JSON>`. */
function parseDeleted(raw: string): { at: number; meta: StreamCatalogEntry } {
  const bar = raw.indexOf('|');
  return { at: Number(raw.slice(0, bar)), meta: JSON.parse(raw.slice(bar + 1)) as StreamCatalogEntry };
}

/** Purges a deleted stream of this name whose keys a crash left behind (or another process is still deleting). */
async function purgeDeleted(host: RetentionHost, stream: string): Promise<void> {
  const raw = await host.command(['hget', host.keys.deleted, stream], { action: `create stream "${stream}"`, stream, writes: false });
  if (typeof raw === 'string') await purge(host, stream, parseDeleted(raw).meta);
}

/** Leftovers younger than this may still be being purged by the process that deleted them. */
const LEFTOVER_AGE_MS = 60_000;

/** One deleted stream whose purge a crash cut short, if any (the background trimmer's chore). */
async function purgeOneLeftover(host: RetentionHost): Promise<void> {
  const reply = await host.command(['hgetall', host.keys.deleted], { action: 'look for deleted streams to purge', writes: false });
  for (const [name, raw] of hashEntries(reply)) {
    const { at, meta } = parseDeleted(raw);
    if (Date.now() - at < LEFTOVER_AGE_MS) continue;
    await purge(host, name, meta);
    return;
  }
}
