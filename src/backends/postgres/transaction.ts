import type pg from 'pg';
import type {
  AppendOutcome,
  CommitOp,
  OwnedTransaction,
  PreparedAppend,
  SettleOp,
  SettleOutcome,
  TransactionClient,
  TransactionScope,
} from '../../core/backend.js';
import { RheoError, invalidArgument } from '../../core/errors.js';
import { appendEvents, type AppendTarget } from './log.js';
import type { Catalog } from './catalog.js';
import { TYPES, asError, brokenConnection, type CheckedOut, type PreparedText, type Runner, type StatementContext } from './connection.js';
import { classifyError, sqlState } from './errors.js';
import { settleLeases } from './leases.js';
import { commit as commitOffsets } from './ownership.js';
import type { StoreContext } from './store.js';

/** The pg client surface rheo really calls: a config object with pinned type parsers. */
interface ConfigQueryable {
  query(config: { text: string; name?: string; values: unknown[]; types: pg.CustomTypesConfig }): Promise<pg.QueryResult>;
}

/**
 * SQLSTATE of the error rheo raises inside an application's transaction when
 * one of its settles was refused: PostgreSQL then refuses every later
 * statement of that transaction and turns its COMMIT into a ROLLBACK.
 */
export const REFUSED_SETTLE_STATE = 'RH409';

const POISON = `DO $rheo$ BEGIN
  RAISE EXCEPTION USING ERRCODE = '${REFUSED_SETTLE_STATE}',
    MESSAGE = 'rheo refused a settle or offset commit in this transaction (stale lease or generation): it can only roll back';
END $rheo$`;

/**
 * Runs rheo's statements on a client whose transaction the application (or
 * `beginTransaction`) owns. Nothing written there is durable before COMMIT,
 * so a connection lost mid-statement wrote nothing: `backend_unavailable`,
 * never `ambiguous`.
 */
class ClientRunner implements Runner {
  readonly #client: ConfigQueryable;

  constructor(client: TransactionClient) {
    this.#client = client as unknown as ConfigQueryable;
  }

  async query<R>(ctx: StatementContext, statement: string | PreparedText, values: unknown[]): Promise<R[]> {
    const config = typeof statement === 'string' ? { text: statement } : { name: statement.name, text: statement.text };
    try {
      const result = await this.#client.query({ ...config, values, types: TYPES });
      return result.rows as R[];
    } catch (error) {
      throw classifyInTransaction(error, ctx);
    }
  }
}

function classifyInTransaction(error: unknown, ctx: StatementContext): RheoError {
  const state = sqlState(error);
  if (state === '25P02' || state === REFUSED_SETTLE_STATE) {
    return new RheoError(
      'transaction_aborted',
      `${ctx.action} failed: the transaction had already failed (an earlier statement in it raised an error); roll it back`,
      { stream: ctx.stream, group: ctx.group, cause: error },
    );
  }
  return classifyError(error, { ...ctx, sent: true, writes: false });
}

/**
 * Idle limit of a transaction once an offset commit joined it: only the
 * COMMIT is left to send, so a longer silence means a frozen process.
 */
export const HELD_OWNER_IDLE_MS = 5_000;

/** What a scope needs from its backend. */
export interface ScopeDeps {
  ctx: StoreContext;
  catalog: Catalog;
  target: Omit<AppendTarget, 'runner' | 'inTransaction'>;
  ensureSchema(): Promise<void>;
}

/**
 * The transactional calls bound to one client. Appends take the partition
 * counter rows' locks (sql/append.ts) until the transaction ends, so
 * sequences stay gapless and commit in order (invariant 3); their NOTIFY is
 * delivered by PostgreSQL at commit only. Settles lock the delivery (its
 * `deliveries` row or its lease range) until the transaction ends: a claim
 * skips it (SKIP LOCKED), a competing settle waits and then finds it gone.
 * A refused settle (`stale_lease`) also aborts the transaction, so writes
 * made for a lease someone else now holds can never commit, even if the
 * caller ignores the error and sends COMMIT.
 */
export class PostgresTransactionScope implements TransactionScope {
  readonly #deps: ScopeDeps;
  readonly #runner: ClientRunner;
  /** Streams this scope appended to (for an owned transaction's local wakeup at commit). */
  readonly appended = new Set<string>();
  /** The error that aborted the transaction on rheo's initiative, if any. */
  refused: RheoError | null = null;

  constructor(client: TransactionClient, deps: ScopeDeps) {
    this.#runner = new ClientRunner(client);
    this.#deps = deps;
  }

  async append(stream: string, inputs: PreparedAppend[]): Promise<AppendOutcome[]> {
    await this.#deps.ensureSchema();
    const s = await this.#deps.catalog.stream(stream, this.#runner);
    const { outcomes, wrote } = await appendEvents(this.#deps.ctx, s, inputs, {
      ...this.#deps.target,
      runner: this.#runner,
      inTransaction: true,
    });
    if (wrote) this.appended.add(stream);
    return outcomes;
  }

  async settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    await this.#deps.ensureSchema();
    return this.#poisonOnRefusal(await settleLeases(this.#deps.ctx, ops, this.#runner));
  }

  /**
   * Offset commits of partition ownership in this transaction. The owner
   * row stays share-locked until the transaction ends, so the partition
   * cannot change hands meanwhile; a stale generation (the partition moved
   * on) is refused and aborts the transaction, as a refused settle does.
   */
  async commit(ops: CommitOp[]): Promise<SettleOutcome[]> {
    await this.#deps.ensureSchema();
    // From here on the transaction holds owner rows, and every heartbeat that
    // moves one of those partitions waits for it: a process frozen before
    // its COMMIT (SIGSTOP, a long pause) must not stall the group's
    // rebalances for good, so the server ends such a transaction once idle
    // (set by the statement that locks the partitions, ownership.ts).
    return this.#poisonOnRefusal(await commitOffsets(this.#deps.ctx, ops, this.#runner, { idleMs: HELD_OWNER_IDLE_MS }));
  }

  async #poisonOnRefusal(outcomes: SettleOutcome[]): Promise<SettleOutcome[]> {
    const refused = outcomes.find((o) => !o.ok);
    if (refused && !refused.ok) {
      this.refused ??= refused.error;
      try {
        await this.#runner.query({ action: 'abort the transaction after a refused settle or commit', writes: false }, POISON, []);
      } catch {
        // Expected: the statement exists to fail. A lost connection rolls back as well.
      }
    }
    return outcomes;
  }
}

/** A transaction on a pooled connection rheo checked out (`beginTransaction`). */
export class PostgresOwnedTransaction implements OwnedTransaction {
  readonly client: TransactionClient;
  readonly scope: PostgresTransactionScope;
  readonly #held: CheckedOut;
  readonly #onCommit: (streams: ReadonlySet<string>) => void;
  #ended = false;

  constructor(held: CheckedOut, deps: ScopeDeps, onCommit: (streams: ReadonlySet<string>) => void) {
    this.#held = held;
    this.client = held.connection;
    this.scope = new PostgresTransactionScope(this.client, deps);
    this.#onCommit = onCommit;
  }

  async commit(): Promise<void> {
    if (this.#ended) throw new RheoError('invalid_argument', 'this transaction has already ended');
    this.#ended = true;
    let command: string;
    try {
      command = (await this.#held.connection.query('COMMIT')).command;
    } catch (error) {
      this.#held.release(brokenConnection(error) ? asError(error) : undefined);
      throw classifyError(error, { action: 'commit a transaction', sent: true, writes: true });
    }
    this.#held.release();
    // PostgreSQL answers COMMIT of a failed transaction with ROLLBACK, not an error.
    if (command === 'ROLLBACK') {
      throw (
        this.scope.refused ??
        new RheoError('transaction_aborted', 'the transaction had failed (a statement in it raised an error) and was rolled back')
      );
    }
    if (this.scope.appended.size > 0) this.#onCommit(this.scope.appended);
  }

  async rollback(): Promise<void> {
    if (this.#ended) return;
    this.#ended = true;
    try {
      await this.#held.connection.query('ROLLBACK');
      this.#held.release();
    } catch (error) {
      // A connection that cannot roll back is destroyed, which rolls back as well.
      this.#held.release(asError(error));
    }
  }
}

/**
 * Binds append and settle to `client`, a `pg` client (`pg.Client` or a
 * checked-out `pg.PoolClient`) on which the application ran BEGIN. See
 * PostgresTransactionScope for what the locks taken there mean for other callers.
 */
export function openTransactionScope(client: TransactionClient, deps: ScopeDeps): PostgresTransactionScope {
  if (client === null || typeof client !== 'object' || typeof (client as { query?: unknown }).query !== 'function') {
    throw invalidArgument('transaction expects a pg client (pg.Client or a checked-out pg.PoolClient) with a transaction begun on it');
  }
  return new PostgresTransactionScope(client, deps);
}

/** BEGIN on a connection of rheo's pool; commit() or rollback() gives it back, and `onCommit` hears the streams appended to. */
export async function beginOwnedTransaction(
  deps: ScopeDeps,
  onCommit: (streams: ReadonlySet<string>) => void,
): Promise<PostgresOwnedTransaction> {
  await deps.ensureSchema();
  const ctx = { action: 'begin a transaction', writes: false };
  const held = await deps.ctx.db.connect(ctx);
  try {
    await held.connection.query('BEGIN');
  } catch (error) {
    held.release(asError(error));
    throw classifyError(error, { ...ctx, sent: true });
  }
  return new PostgresOwnedTransaction(held, deps, onCommit);
}
