import type pg from 'pg';
import type { GroupStart, OwnershipFence } from '../../core/backend.js';
import type { Clock } from '../../core/clock.js';
import type { Coalescer } from '../../core/coalescer.js';
import type { RheoEvent } from '../../core/types.js';
import { Catalog, checkPartitions, type GroupRef, type StreamRef } from './catalog.js';
import type { Database } from './connection.js';
import { checkSchemaVersion } from './migrate.js';
import { AppendListener } from './notifications.js';
import { PlanChoice } from './plan-choice.js';
import { nowParam } from './rows.js';
import { notifyChannel } from './schema-name.js';
import { SegmentRoller } from './segments.js';
import { renderRetentionStatements, type RetentionStatements } from './sql/retention.js';
import { renderStatements, type Statements } from './statements.js';

/** What the statements of every concern run with: the pool, the rendered SQL, the catalog and the time authority. */
export interface StoreContext {
  db: Database;
  sql: Statements;
  /** The validated, quoted schema name, for statements built per call (replay by query). */
  quotedSchema: string;
  catalog: Catalog;
  /** Whether the append, the claim and the owned read run their generic or their replanned routine (plan-choice.ts). */
  plans: PlanChoice;
  /** The `now` parameter: injected clock time as ISO, or null for the database clock. */
  now(): string | null;
  /** Fetch count per group id, for the rotating start partition. */
  rotation: Map<number, number>;
  /**
   * Per group id, how many more fetches lock only part of the requested
   * partitions because a recent fetch found a cursor held elsewhere
   * (created on first use).
   */
  contention?: Map<number, number>;
  /** Owned-partition reads waiting to share a statement (ownership.ts; created on first use). */
  ownedReads?: Coalescer<OwnedRead, OwnedReadResult>;
}

/** One range read of an owned partition, resolved against the catalog. */
export interface OwnedRead {
  g: GroupRef;
  fence: OwnershipFence;
  after: number;
  limit: number;
  maxBytes: number;
}

/** The events of a read, or `null` when its fence is stale. */
export type OwnedReadResult = RheoEvent[] | null;

/** Where an append's NOTIFY goes and which clock stamps it. */
export interface NotifyTarget {
  clock: Clock | null;
  channel: string;
  notify: boolean;
}

/** Bound parameters for a group start: [after, override partitions, override cursors, at]. */
export function startParams(stream: StreamRef, start: GroupStart): [number, number[], number[], string | null] {
  if (start.kind === 'at') return [0, [], [], start.at.toISOString()];
  const keys = Object.keys(start.perPartition).map(Number);
  checkPartitions(stream, keys);
  return [start.after, keys, keys.map((k) => start.perPartition[k] ?? start.after), null];
}

export interface PostgresStoreOptions {
  db: Database;
  schema: string;
  quotedSchema: string;
  clock: Clock | null;
  notify: boolean;
  segmentEvents: number;
  /** The most tables in the log for which the routines run their generic plans (plan-choice.ts). */
  genericPlanSegments: number;
  /** Send named prepared statements (not behind a transaction-mode pooler). */
  named: boolean;
  /** Opens the LISTEN connection; `null`: none, waiters poll. */
  listenClient: (() => pg.Client) | null;
}

/**
 * What every concern of the PostgreSQL backend (log, leases, progress,
 * ownership, retention) shares: the pool, the statements rendered for the
 * schema, the catalog cache, the time authority, the segment roller, the
 * LISTEN connection, and the one check of the schema's version before the
 * first statement.
 */
export class PostgresStore implements StoreContext {
  readonly db: Database;
  readonly sql: Statements;
  readonly schema: string;
  readonly quotedSchema: string;
  readonly catalog: Catalog;
  readonly plans: PlanChoice;
  readonly clock: Clock | null;
  readonly rotation = new Map<number, number>();
  contention?: Map<number, number>;
  ownedReads?: Coalescer<OwnedRead, OwnedReadResult>;
  /** The retention, trim and deletion statements (sql/retention.ts). */
  readonly retention: RetentionStatements;
  readonly segments: SegmentRoller;
  readonly target: NotifyTarget;
  readonly listener: AppendListener;
  #closing: Promise<void> | null = null;
  #schemaOk = false;
  #schemaCheck: Promise<void> | null = null;

  constructor(options: PostgresStoreOptions) {
    this.db = options.db;
    this.schema = options.schema;
    this.quotedSchema = options.quotedSchema;
    this.clock = options.clock;
    this.sql = renderStatements(this.quotedSchema, options.named);
    this.catalog = new Catalog(this.db, this.sql);
    this.retention = renderRetentionStatements(this.quotedSchema);
    this.plans = new PlanChoice(this.db, this.schema, options.genericPlanSegments);
    this.segments = new SegmentRoller(this.db, this.retention.rollSegment, options.segmentEvents, () => this.plans.opened());
    const channel = notifyChannel(this.schema);
    this.target = { clock: this.clock, channel, notify: options.notify };
    this.listener = new AppendListener(options.listenClient, `"${channel}"`);
  }

  now(): string | null {
    return nowParam(this.clock ? this.clock.now() : null);
  }

  /** True once the schema is known to be at this rheo's version (checked, or migrated by this backend). */
  get schemaOk(): boolean {
    return this.#schemaOk;
  }

  /** `migrate()` brought the schema to this rheo's version: no check is needed. */
  migrated(): void {
    this.#schemaOk = true;
  }

  /**
   * Before its first statement, a backend that did not migrate the schema
   * itself checks that the schema is at the version this rheo was written
   * for (one query, once): a newer rheo's schema may hold state this code
   * would misread, and an older one lacks tables and routines it needs.
   * A failed check is repeated on the next call.
   */
  ensureSchema(): Promise<void> {
    if (this.#schemaOk) return Promise.resolve();
    const check =
      this.#schemaCheck ??
      checkSchemaVersion(this.db, this.schema, this.quotedSchema).then(
        () => {
          this.#schemaOk = true;
        },
        (error: unknown) => {
          this.#schemaCheck = null;
          throw error;
        },
      );
    this.#schemaCheck = check;
    return check;
  }

  /** True once `close()` was called. */
  get closed(): boolean {
    return this.#closing !== null;
  }

  /** Ends the LISTEN connection, then the pool when rheo created it; once. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.listener.close();
      await this.db.end();
    })();
    return this.#closing;
  }
}
