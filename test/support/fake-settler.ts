import { EventEmitter } from 'node:events';
import type { Backend, CommitOp, OwnedTransaction, SettleOp, SettleOutcome } from '../../src/core/backend.js';
import { ManualClock } from '../../src/core/clock.js';
import type { Lease } from '../../src/core/types.js';
import type { RheoProducer } from '../../src/producer/rheo-producer.js';
import type { LeaseSettler } from '../../src/runtime/lease-outcome.js';
import { ManualTimers } from '../streams/support/manual-timers.js';

/** What a sink's `producer` option takes, as a transactional batch sink needs it. */
export type FakeProducer = LeaseSettler<{ n: number }> & Partial<Pick<RheoProducer<{ n: number }>, 'backend' | 'confirm'>>;

/** One settle a sink asked the fake producer for. */
export interface FakeSettle {
  kind: 'ack' | 'nack' | 'reject' | 'release';
  sequence: number;
  reason?: string | null | undefined;
  delayMs?: number | undefined;
}

/** A lease as `fetch` returns it, on stream `s`, group `g`, partition 0. */
export function fakeLease(sequence: number): Lease<{ n: number }> {
  return {
    leaseId: `lease-${sequence}`,
    receipt: `s/g/0/${sequence}`,
    stream: 's',
    group: 'g',
    consumerId: 'c',
    attempt: 1,
    leasedAt: new Date(0),
    expiresAt: new Date(60_000),
    event: {
      id: `e${sequence}`,
      stream: 's',
      partition: 0,
      sequence,
      type: 'tick',
      key: null,
      payload: { n: sequence },
      metadata: {},
      createdAt: new Date(0),
    },
  } as unknown as Lease<{ n: number }>;
}

/**
 * What the sinks need from a producer (`LeaseSettler`), recording every settle
 * and confirm instead of reaching a backend. `answer` decides each settle's
 * promise (default: resolves); `emit('lease-lost', ...)` plays a lost renewal.
 */
export class FakeSettler extends EventEmitter {
  readonly clock = new ManualClock(0);
  readonly timers = new ManualTimers(this.clock);
  readonly settles: FakeSettle[] = [];
  readonly confirmed: string[] = [];
  answer: (settle: FakeSettle) => Promise<void> = () => Promise.resolve();
  backend?: Backend;

  /** This fake, typed as the producer a sink takes. */
  get settler(): FakeProducer {
    return this as unknown as FakeProducer;
  }

  ack(lease: Lease): Promise<void> {
    return this.#record({ kind: 'ack', sequence: lease.event.sequence });
  }

  nack(lease: Lease, reason?: string | null, options: { delayMs?: number } = {}): Promise<void> {
    return this.#record({ kind: 'nack', sequence: lease.event.sequence, reason, delayMs: options.delayMs });
  }

  reject(lease: Lease, reason?: string | null): Promise<void> {
    return this.#record({ kind: 'reject', sequence: lease.event.sequence, reason });
  }

  release(lease: Lease): Promise<void> {
    return this.#record({ kind: 'release', sequence: lease.event.sequence });
  }

  holds(): boolean {
    return true;
  }

  confirm(leaseId: string): boolean {
    this.confirmed.push(leaseId);
    return true;
  }

  /** Plays the producer's renewal answering `stale_lease` for `lease`. */
  lose(lease: Lease, error: Error): void {
    this.emit('lease-lost', { lease, error });
  }

  #record(settle: FakeSettle): Promise<void> {
    this.settles.push(settle);
    return this.answer(settle);
  }
}

/** The calls a fake transaction saw, in order: `begin`, `settle ack,reject`, `commit`, `rollback`. */
export interface FakeTransactionLog {
  calls: string[];
  ops: SettleOp[];
  /** Offset commits made in a transaction. */
  offsets: CommitOp[];
}

export interface FakeTransactionOptions {
  /** What the transaction's `scope.settle` answers (default: ok for every op). */
  settle?: (ops: SettleOp[]) => Promise<SettleOutcome[]>;
  /** What `commit` does (default: resolves). */
  commit?: () => Promise<void>;
  /** Gives the scope an offset `commit` (partition ownership) answering this; without it the scope has none. */
  offsets?: (ops: CommitOp[]) => Promise<SettleOutcome[]>;
  /** A `beginTransaction` that fails with this. */
  beginError?: unknown;
}

/** A backend with the `transactions` capability whose transactions only record what was asked of them. */
export function fakeTransactionalBackend(options: FakeTransactionOptions = {}): { backend: Backend; log: FakeTransactionLog } {
  const log: FakeTransactionLog = { calls: [], ops: [], offsets: [] };
  let opened = 0;
  const beginTransaction = (): Promise<OwnedTransaction> => {
    const n = ++opened;
    log.calls.push(`begin ${n}`);
    if (options.beginError !== undefined) return Promise.reject(options.beginError);
    const offsets = options.offsets;
    const tx: OwnedTransaction = {
      client: { query: () => Promise.resolve({ tx: n }) },
      scope: {
        append: () => Promise.reject(new Error('not used')),
        settle: (ops) => {
          log.calls.push(`settle ${n} ${ops.map((op) => op.kind).join(',')}`);
          log.ops.push(...ops);
          return options.settle ? options.settle(ops) : Promise.resolve(ops.map(() => ({ ok: true as const })));
        },
        ...(offsets && {
          commit: (ops: CommitOp[]) => {
            log.calls.push(`offsets ${n} ${ops.map((op) => op.upTo).join(',')}`);
            log.offsets.push(...ops);
            return offsets(ops);
          },
        }),
      },
      commit: () => {
        log.calls.push(`commit ${n}`);
        return options.commit ? options.commit() : Promise.resolve();
      },
      rollback: () => {
        log.calls.push(`rollback ${n}`);
        return Promise.resolve();
      },
    };
    return Promise.resolve(tx);
  };
  const backend = { name: 'fake-tx', capabilities: { transactions: true }, beginTransaction } as unknown as Backend;
  return { backend, log };
}
