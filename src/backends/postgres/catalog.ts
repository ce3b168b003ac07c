import { groupNotFound, invalidPartition, streamNotFound } from '../../core/errors.js';
import { scopedPartitions } from '../../core/partition-scope.js';
import type { Database, Runner } from './connection.js';
import type { Statements } from './statements.js';

export interface StreamRef {
  id: number;
  name: string;
  partitions: number;
}

export interface GroupRef {
  id: number;
  name: string;
  stream: StreamRef;
  maxAttempts: number;
  /** The partitions the group covers, ascending. */
  partitions: number[];
}

/**
 * Name -> id lookups for streams and groups. A stream's partition count and
 * a group's maxAttempts never change, and ids are never reused, so a found
 * entry is cached; misses are not cached (another process may create the
 * name a moment later). After warm-up every hot path is a single statement.
 * Deletion (issue 14) is the one way an entry goes stale: this process
 * forgets what it deletes, and the paths that find nothing under a cached id
 * (an empty fetch or read, an append that stored nothing) look the name up
 * again (`revalidate`) to notice another process deleted or re-created it.
 */
export class Catalog {
  readonly #db: Database;
  readonly #sql: Statements;
  readonly #streams = new Map<string, StreamRef>();
  readonly #groups = new Map<string, GroupRef>();
  /** When each name was last revalidated (monotonic ms). */
  readonly #validated = new Map<string, number>();

  constructor(db: Database, sql: Statements) {
    this.#db = db;
    this.#sql = sql;
  }

  /**
   * `runner`: where a cache miss is looked up; a transaction's client, so a
   * transaction never waits for a second pooled connection (with every
   * connection held by a transactional handler that would never end).
   */
  async findStream(name: string, runner: Runner = this.#db): Promise<StreamRef | null> {
    const cached = this.#streams.get(name);
    if (cached) return cached;
    const [row] = await runner.query<{ id: number; partitions: number }>(
      { action: `look up stream "${name}"`, stream: name, writes: false },
      this.#sql.lookupStream,
      [name],
    );
    if (!row) return null;
    const ref = { id: row.id, name, partitions: row.partitions };
    this.#streams.set(name, ref);
    return ref;
  }

  async stream(name: string, runner: Runner = this.#db): Promise<StreamRef> {
    const ref = await this.findStream(name, runner);
    if (!ref) throw streamNotFound(name);
    return ref;
  }

  async findGroup(stream: string, group: string, runner: Runner = this.#db): Promise<GroupRef | null> {
    const key = `${stream}\u0000${group}`;
    const cached = this.#groups.get(key);
    if (cached) return cached;
    const streamRef = await this.findStream(stream, runner);
    if (!streamRef) return null;
    const [row] = await runner.query<{ id: number; max_attempts: number; partitions: number[] }>(
      { action: `look up group "${group}" of stream "${stream}"`, stream, group, writes: false },
      this.#sql.lookupGroup,
      [streamRef.id, group],
    );
    if (!row) return null;
    const ref = { id: row.id, name: group, stream: streamRef, maxAttempts: row.max_attempts, partitions: row.partitions };
    this.#groups.set(key, ref);
    return ref;
  }

  /** Drops the cached stream and its groups. */
  forgetStream(name: string): void {
    this.#streams.delete(name);
    const prefix = `${name}\u0000`;
    for (const key of [...this.#groups.keys()]) if (key.startsWith(prefix)) this.#groups.delete(key);
  }

  forgetGroup(stream: string, group: string): void {
    this.#groups.delete(`${stream}\u0000${group}`);
  }

  /**
   * Whether the cached ids of `stream` (and `group`) are still current;
   * when not, forgets them so the next lookup finds the current ones (or
   * reports them missing). Costs one lookup of both names.
   */
  async revalidate(stream: string, group?: string): Promise<boolean> {
    // At most once a second per name: idle producers fetch nothing every poll.
    const key = group === undefined ? stream : `${stream}\u0000${group}`;
    const now = performance.now();
    const last = this.#validated.get(key);
    if (last !== undefined && now - last < 1000) return true;
    this.#validated.set(key, now);
    if (this.#validated.size > 10_000) this.#validated.clear();
    const cached = this.#streams.get(stream);
    const g = group === undefined ? undefined : this.#groups.get(`${stream}\u0000${group}`);
    if (!cached && !g) return true;
    const [row] = await this.#db.query<{ stream_id: number; group_id: number | null }>(
      { action: `look up stream "${stream}"${group === undefined ? '' : ` and its group "${group}"`}`, stream, group, writes: false },
      this.#sql.currentIds,
      [stream, group ?? null],
    );
    if (cached && row?.stream_id !== cached.id) {
      this.forgetStream(stream);
      return false;
    }
    if (g && row?.group_id !== g.id) {
      this.forgetGroup(stream, group!);
      return false;
    }
    return true;
  }

  async group(stream: string, group: string): Promise<GroupRef> {
    const streamRef = await this.stream(stream);
    const ref = await this.findGroup(streamRef.name, group);
    if (!ref) throw groupNotFound(stream, group);
    return ref;
  }
}

/** Throws `invalid_partition` for the first partition outside the stream. */
export function checkPartitions(stream: StreamRef, partitions: Iterable<number>): void {
  for (const p of partitions) {
    if (p < 0 || p >= stream.partitions) throw invalidPartition(stream.name, p, stream.partitions);
  }
}

/** The partitions a call on `g` covers: the group's, or the requested ones (each in the stream and in the group). */
export function groupScope(g: GroupRef, requested: number[] | null): number[] {
  if (requested !== null) checkPartitions(g.stream, requested);
  return scopedPartitions(g.stream.name, g.name, g.partitions, requested);
}
