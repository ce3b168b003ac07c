import type { AppendOutcome, SettleOp, TransactionScope } from '../core/backend.js';
import { assertBatchSize, assertOptions, messageOf, prepareAppend, settleOp } from '../core/arguments.js';
import type { Clock } from '../core/clock.js';
import { RheoError, invalidArgument, isRheoError } from '../core/errors.js';
import type { RheoLimits } from '../core/limits.js';
import type {
  AppendInput,
  AppendedEvent,
  JsonValue,
  Lease,
  NackOptions,
  RheoEvent,
  SettleRequest,
  SettleResult,
} from '../core/types.js';
import { assertName, describe } from '../core/validation.js';

/** What a transaction needs from the rheo instance that made it. */
export interface TransactionOwner {
  readonly clock: Clock;
  readonly limits: Readonly<RheoLimits>;
  readonly closed: boolean;
}

/**
 * rheo's calls bound to a transaction the application owns
 * (`rheo.transaction(client)`): the same arguments, validation and errors as
 * the calls of the same names on `Rheo`, but every write joins the
 * application's transaction and becomes visible, or is undone, with it.
 *
 * - Appended events are invisible to every reader until COMMIT, and a
 *   ROLLBACK leaves no trace: no event, no gap, no sequence taken. Until the
 *   transaction ends it holds the sequence counter of each partition it
 *   appended to, so other appends to those partitions wait for it (that is
 *   what keeps sequences committing in order): keep such transactions short.
 * - A settle holds its delivery until the transaction ends (no one can claim
 *   it meanwhile). A settle rheo refuses (`stale_lease`: the lease expired
 *   and someone else claimed it) also aborts the transaction: PostgreSQL
 *   refuses its later statements and turns COMMIT into ROLLBACK, so effects
 *   written for a lease someone else now holds can never commit.
 * - rheo never commits, rolls back or releases the client.
 */
export class RheoTransaction {
  readonly #owner: TransactionOwner;
  readonly #scope: TransactionScope;

  /** @internal Made by `rheo.transaction(client)`. */
  constructor(owner: TransactionOwner, scope: TransactionScope) {
    this.#owner = owner;
    this.#scope = scope;
  }

  /** Resolves to the event (with `existed`) as it will be once the transaction commits. */
  async append<T extends JsonValue = JsonValue>(stream: string, input: AppendInput<T>): Promise<AppendedEvent<T>> {
    this.#assertOpen();
    assertName('stream', stream);
    const prepared = prepareAppend(this.#owner.clock, input, 'append input', {
      stream,
      maxEventBytes: this.#owner.limits.maxEventBytes,
    });
    const [outcome] = await this.#call(() => this.#scope.append(stream, [prepared]));
    if (!outcome) throw new RheoError('internal', `append to stream "${stream}" returned no event`, { stream });
    return appended<T>(outcome);
  }

  /** All or nothing, like `Rheo.appendBatch`. */
  async appendBatch<T extends JsonValue = JsonValue>(stream: string, inputs: AppendInput<T>[]): Promise<AppendedEvent<T>[]> {
    this.#assertOpen();
    assertName('stream', stream);
    if (!Array.isArray(inputs)) throw invalidArgument(`appendBatch expects an array of inputs, got ${describe(inputs)}`);
    if (inputs.length > 100_000) throw invalidArgument('appendBatch accepts at most 100000 inputs per call');
    const limits = { stream, maxEventBytes: this.#owner.limits.maxEventBytes };
    const prepared = inputs.map((input, i) => prepareAppend(this.#owner.clock, input, `appendBatch input [${i}]`, limits));
    if (prepared.length === 0) return [];
    assertBatchSize(stream, prepared, this.#owner.limits.maxBatchBytes);
    const outcomes = await this.#call(() => this.#scope.append(stream, prepared));
    return outcomes.map((outcome) => appended<T>(outcome));
  }

  async ack(lease: Lease<unknown>): Promise<void> {
    await this.#settleOne(settleOp({ kind: 'ack', lease }, 'ack'));
  }

  async nack(lease: Lease<unknown>, reason?: string | null, options: NackOptions = {}): Promise<void> {
    assertOptions('nack options', options);
    await this.#settleOne(settleOp({ kind: 'nack', lease, reason, delayMs: options.delayMs }, 'nack'));
  }

  async reject(lease: Lease<unknown>, reason?: string | null): Promise<void> {
    await this.#settleOne(settleOp({ kind: 'reject', lease, reason }, 'reject'));
  }

  async release(lease: Lease<unknown>): Promise<void> {
    await this.#settleOne(settleOp({ kind: 'release', lease }, 'release'));
  }

  ackMany(leases: Lease<unknown>[]): Promise<SettleResult[]> {
    return this.#settleEach('ackMany', leases, (lease) => ({ kind: 'ack', lease }));
  }

  nackMany(leases: Lease<unknown>[], reason?: string | null, options: NackOptions = {}): Promise<SettleResult[]> {
    assertOptions('nack options', options);
    return this.#settleEach('nackMany', leases, (lease) => ({ kind: 'nack', lease, reason, delayMs: options.delayMs }));
  }

  rejectMany(leases: Lease<unknown>[], reason?: string | null): Promise<SettleResult[]> {
    return this.#settleEach('rejectMany', leases, (lease) => ({ kind: 'reject', lease, reason }));
  }

  releaseMany(leases: Lease<unknown>[]): Promise<SettleResult[]> {
    return this.#settleEach('releaseMany', leases, (lease) => ({ kind: 'release', lease }));
  }

  /** Mixed settles in one statement, one result per op. */
  settleMany(ops: SettleRequest[]): Promise<SettleResult[]> {
    return this.#settleEach('settleMany', ops, (op) => op);
  }

  #assertOpen(): void {
    if (this.#owner.closed) throw new RheoError('closed', 'this rheo instance is closed');
  }

  async #settleOne(op: SettleOp): Promise<void> {
    this.#assertOpen();
    const [result] = await this.#call(() => this.#scope.settle([op]));
    if (!result?.ok) throw result?.error ?? new RheoError('internal', 'settle returned no result');
  }

  /** Each item validated on its own: a bad one gets its own `invalid_argument`, the rest settle in one call. */
  async #settleEach<I>(what: string, items: I[], toRequest: (item: I) => SettleRequest): Promise<SettleResult[]> {
    this.#assertOpen();
    if (!Array.isArray(items)) throw invalidArgument(`${what} expects an array, got ${describe(items)}`);
    const valid: SettleOp[] = [];
    const invalid = new Map<number, RheoError>();
    items.forEach((item, i) => {
      try {
        valid.push(settleOp(toRequest(item), what));
      } catch (error) {
        invalid.set(
          i,
          isRheoError(error) ? error : invalidArgument(`${what} item [${i}] could not be read: ${messageOf(error)}`, { cause: error }),
        );
      }
    });
    const results = valid.length > 0 ? await this.#call(() => this.#scope.settle(valid)) : [];
    let j = 0;
    return items.map((_, i) => {
      const error = invalid.get(i);
      if (error) return { ok: false as const, error };
      return results[j++] ?? { ok: false as const, error: new RheoError('internal', `${what}: the backend returned too few results`) };
    });
  }

  async #call<R>(fn: () => Promise<R>): Promise<R> {
    try {
      return await fn();
    } catch (error) {
      if (error instanceof RheoError) throw error;
      throw new RheoError('internal', `unexpected backend failure: ${(error as Error)?.message ?? String(error)}`, { cause: error });
    }
  }
}

function appended<T>({ event, existed }: AppendOutcome): AppendedEvent<T> {
  return { ...(event as RheoEvent<T>), existed };
}
