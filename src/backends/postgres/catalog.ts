import { groupNotFound, invalidPartition, streamNotFound } from '../../core/errors.js';
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
}

/**
 * Name -> id lookups for streams and groups. Streams and groups are never
 * deleted and their partition count and maxAttempts never change, so a found
 * entry is cached for the backend's lifetime; misses are not cached (another
 * process may create the name a moment later). After warm-up every hot path
 * is a single statement.
 */
export class Catalog {
  readonly #db: Database;
  readonly #sql: Statements;
  readonly #streams = new Map<string, StreamRef>();
  readonly #groups = new Map<string, GroupRef>();

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
    const [row] = await runner.query<{ id: number; max_attempts: number }>(
      { action: `look up group "${group}" of stream "${stream}"`, stream, group, writes: false },
      this.#sql.lookupGroup,
      [streamRef.id, group],
    );
    if (!row) return null;
    const ref = { id: row.id, name: group, stream: streamRef, maxAttempts: row.max_attempts };
    this.#groups.set(key, ref);
    return ref;
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
