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
  /** Retention policies: hash name -> `{"maxAgeMs":n|null,"maxEvents":n|null}` (absent: none). */
  readonly retention: string;
  /** Streams deleted whose keys may not all be gone yet: hash name -> the catalog JSON they had. */
  readonly deleted: string;

  constructor(prefix: string) {
    this.prefix = prefix;
    this.retention = `${prefix}:{${prefix}}:retention`;
    this.deleted = `${prefix}:{${prefix}}:deleted`;
    this.streams = `${prefix}:{${prefix}}:streams`;
    this.schema = `${prefix}:{${prefix}}:schema`;
  }

  /** Group catalog of a stream: hash group -> `{"maxAttempts":n,"createdAt":ms}`. */
  groups(stream: string): string {
    return `${this.prefix}:{${this.prefix}|${stream}}:groups`;
  }

  /** Held (with a TTL) by the background trimmer working on a stream, so one trimmer at a time trims it. */
  trimLock(stream: string): string {
    return `${this.prefix}:{${this.prefix}|${stream}}:trimming`;
  }

  /**
   * Every key a group owns in one partition, in the order the retention
   * scripts declare them (st, d, o, t, r, h, dl, dlo: lua/group-prelude.ts).
   * deleteGroup, deleteStream and trim enumerate a group's per-partition
   * keys only through this function: a new per-group key in the partition
   * (e.g. partition ownership) must be added here, at the end.
   */
  groupKeysInPartition(stream: string, group: string, partition: number): string[] {
    return [...this.groupState(stream, group, partition), this.owner(stream, group, partition)];
  }

  /** The eight state keys of a group in a partition that a trim reads and prunes (st, d, o, t, r, h, dl, dlo), in that order. */
  groupState(stream: string, group: string, partition: number): string[] {
    return this.group(stream, group, partition).slice(2, 10);
  }

  /** Groups deleted from the stream's group catalog whose state may not all be gone yet (a set, beside the catalog). */
  deletedGroups(stream: string): string {
    return `${this.prefix}:{${this.prefix}|${stream}}:deleted-groups`;
  }

  /**
   * Every key a group owns outside its partitions: partition ownership's
   * membership state. deleteGroup and deleteStream delete them with
   * single-key commands after the partitions.
   */
  groupKeysOfStream(stream: string, group: string): string[] {
    return [this.members(stream, group)];
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
