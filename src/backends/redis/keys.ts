import { invalidArgument } from '../../core/errors.js';

/**
 * Key layout, designed for Redis Cluster. Everything of one
 * `(stream, partition)` (its log, id index and every group's state there)
 * shares the hash tag `{prefix|stream|partition}`, so each Lua step over a
 * partition runs on one slot. Per-prefix metadata (the stream catalog, the
 * schema version) and per-stream metadata (the group catalog) have tags of
 * their own and are only read or written by single-key commands.
 *
 * Stream and group names match `[A-Za-z0-9._:-]` (checked by the facade) and
 * the prefix is checked here, so `|`, `{` and `}` never occur inside a part
 * and no two names map to the same key: a group's keys end in one fixed
 * suffix without `:`, so the group name is everything before it.
 */
export const PREFIX_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

export function checkPrefix(prefix: unknown): string {
  if (typeof prefix !== 'string' || !PREFIX_PATTERN.test(prefix)) {
    throw invalidArgument(`redisBackend prefix must be 1-64 characters of [A-Za-z0-9._-], got ${JSON.stringify(prefix)}`);
  }
  return prefix;
}

export interface PartitionKeys {
  log: string;
  meta: string;
  ids: string;
}

export class KeyLayout {
  readonly prefix: string;
  /** Stream catalog: hash name -> `{"partitions":n,"createdAt":ms}`. */
  readonly streams: string;
  /** Schema version written by migrate(). */
  readonly schema: string;
  /** Pub/sub pattern covering every stream's append channel. */
  readonly appendPattern: string;

  constructor(prefix: string) {
    this.prefix = prefix;
    this.streams = `${prefix}:{${prefix}}:streams`;
    this.schema = `${prefix}:{${prefix}}:schema`;
    this.appendPattern = `${prefix}:append:*`;
  }

  /** Group catalog of a stream: hash group -> `{"maxAttempts":n,"createdAt":ms}`. */
  groups(stream: string): string {
    return `${this.prefix}:{${this.prefix}|${stream}}:groups`;
  }

  appendChannel(stream: string): string {
    return `${this.prefix}:append:${stream}`;
  }

  streamOfChannel(channel: string): string | null {
    const head = `${this.prefix}:append:`;
    return channel.startsWith(head) ? channel.slice(head.length) : null;
  }

  partition(stream: string, partition: number): PartitionKeys {
    const base = this.#base(stream, partition);
    return { log: `${base}:log`, meta: `${base}:meta`, ids: `${base}:ids` };
  }

  /** The ten keys every group script declares, in the order lua/group-prelude.ts names them. */
  group(stream: string, group: string, partition: number): string[] {
    const base = this.#base(stream, partition);
    const g = `${base}:g:${group}`;
    return [`${base}:log`, `${base}:meta`, `${g}:st`, `${g}:d`, `${g}:o`, `${g}:t`, `${g}:r`, `${g}:h`, `${g}:dl`, `${g}:dlo`];
  }

  /**
   * Partition ownership: a group's membership state, under a hash tag of its
   * own (`|g|` cannot be a partition number), read and written by one key at a time.
   */
  members(stream: string, group: string): string {
    return `${this.prefix}:{${this.prefix}|${stream}|g|${group}}:members`;
  }

  /** Partition ownership: the fence of a group in one partition, in the partition's slot (ownership.ts). */
  owner(stream: string, group: string, partition: number): string {
    return `${this.#base(stream, partition)}:g:${group}:own`;
  }

  #base(stream: string, partition: number): string {
    return `${this.prefix}:{${this.prefix}|${stream}|${partition}}`;
  }
}
