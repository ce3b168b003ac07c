import type { Logger } from '../../src/core/logger.js';
import type { Backend, LeaseRef, RenewResult, SettleOp, SettleOutcome } from '../../src/core/backend.js';
import { RheoError, type RheoErrorCode } from '../../src/core/errors.js';

/** Which calls a fault applies to. */
export type FaultTarget = 'fetch' | 'settle' | 'renew';

export interface FaultOptions {
  /** How many matching calls (settle: matching ops) fail before the fault is used up. Default 1; `Infinity` until cleared. */
  times?: number;
  /** Settle only: fail only ops of these kinds (default: every kind). Other ops of the same batch pass through. */
  kinds?: SettleOp['kind'][];
  /**
   * Apply the call to the real backend first, then report the failure: a
   * write whose outcome the caller cannot know (the commit landed, the reply
   * was lost). Default false: nothing is applied.
   */
  applied?: boolean;
  /** Settle/renew: throw for the whole call instead of failing matching ops one by one. Default false. */
  wholeCall?: boolean;
}

interface Fault extends Required<Omit<FaultOptions, 'kinds'>> {
  code: RheoErrorCode;
  kinds: SettleOp['kind'][] | null;
}

/** One settle op as the wrapper saw it, and what it answered. */
export interface SettleRecord {
  kind: SettleOp['kind'];
  partition: number;
  sequence: number;
  leaseId: string;
  ok: boolean;
  code: RheoErrorCode | null;
}

/**
 * A Backend that forwards to `inner` and fails `fetch`, `settle` or `renew`
 * on demand with any `RheoError` code (`backend_unavailable`, `ambiguous`,
 * `internal`, ...). It records every settle op so tests can assert what the
 * code under test did, e.g. that it did *not* nack after an ambiguous ack.
 */
export class FaultyBackend implements Backend {
  readonly inner: Backend;
  readonly settles: SettleRecord[] = [];
  readonly calls = { fetch: 0, settle: 0, renew: 0, query: 0 };
  readonly #faults: Record<FaultTarget, Fault[]> = { fetch: [], settle: [], renew: [] };
  readonly #holds: Record<FaultTarget, Promise<void> | null> = { fetch: null, settle: null, renew: null };
  readonly #active: Record<FaultTarget, number> = { fetch: 0, settle: 0, renew: 0 };

  constructor(inner: Backend) {
    this.inner = inner;
  }

  get name(): string {
    return `faulty(${this.inner.name})`;
  }

  get capabilities(): Backend['capabilities'] {
    return this.inner.capabilities;
  }

  /** The inner store's hint, unless a test sets its own. */
  #claimsInFlight: number | undefined = undefined;

  get claimsInFlight(): number | undefined {
    return this.#claimsInFlight ?? this.inner.claimsInFlight;
  }

  set claimsInFlight(value: number | undefined) {
    this.#claimsInFlight = value;
  }

  /** Queues a fault; faults of one target apply in the order they were added. */
  fail(target: FaultTarget, code: RheoErrorCode, options: FaultOptions = {}): this {
    this.#faults[target].push({
      code,
      times: options.times ?? 1,
      kinds: options.kinds ?? null,
      applied: options.applied ?? false,
      wholeCall: options.wholeCall ?? false,
    });
    return this;
  }

  /**
   * Holds every call of `target` (before it reaches the real backend) until
   * the returned function is called: for observing what waits on it.
   */
  hold(target: FaultTarget): () => void {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    this.#holds[target] = held;
    return () => {
      if (this.#holds[target] === held) this.#holds[target] = null;
      release();
    };
  }

  /** Calls of `target` past any hold and not finished yet. */
  active(target: FaultTarget): number {
    return this.#active[target];
  }

  /** Removes every pending fault (of one target, or all). */
  clear(target?: FaultTarget): this {
    for (const t of target ? [target] : (['fetch', 'settle', 'renew'] as const)) this.#faults[t].length = 0;
    return this;
  }

  /** Settle ops recorded for one delivery, in order. */
  settlesOf(partition: number, sequence: number): SettleRecord[] {
    return this.settles.filter((s) => s.partition === partition && s.sequence === sequence);
  }

  async fetch(...args: Parameters<Backend['fetch']>): ReturnType<Backend['fetch']> {
    this.calls.fetch++;
    await this.#holds.fetch;
    this.#active.fetch++;
    try {
      return await this.#fetch(...args);
    } finally {
      this.#active.fetch--;
    }
  }

  async #fetch(...args: Parameters<Backend['fetch']>): ReturnType<Backend['fetch']> {
    const fault = this.#take('fetch', null);
    if (!fault) return this.inner.fetch(...args);
    if (fault.applied) await this.inner.fetch(...args);
    throw injected(fault.code, 'fetch');
  }

  async renew(...args: Parameters<Backend['renew']>): ReturnType<Backend['renew']> {
    this.calls.renew++;
    await this.#holds.renew;
    this.#active.renew++;
    try {
      return await this.#renew(...args);
    } finally {
      this.#active.renew--;
    }
  }

  async #renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    const fault = this.#take('renew', null);
    if (!fault) return this.inner.renew(refs, leaseMs);
    if (fault.applied) await this.inner.renew(refs, leaseMs);
    if (fault.wholeCall) throw injected(fault.code, 'renew');
    return refs.map(() => ({ ok: false as const, error: injected(fault.code, 'renew') }));
  }

  async settle(...args: Parameters<Backend['settle']>): ReturnType<Backend['settle']> {
    this.calls.settle++;
    await this.#holds.settle;
    this.#active.settle++;
    try {
      return await this.#settle(...args);
    } finally {
      this.#active.settle--;
    }
  }

  async #settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    const decided = ops.map((op) => this.#take('settle', op.kind));
    const whole = decided.find((f) => f?.wholeCall);
    if (whole) {
      if (whole.applied) await this.inner.settle(ops);
      for (const op of ops) this.#record(op, { ok: false, error: injected(whole.code, 'settle') });
      throw injected(whole.code, 'settle');
    }
    const forward = ops.filter((_, i) => !decided[i] || decided[i]!.applied);
    const results = forward.length ? await this.inner.settle(forward) : [];
    let j = 0;
    return ops.map((op, i) => {
      const fault = decided[i];
      const real = !fault || fault.applied ? results[j++] : undefined;
      const outcome: SettleOutcome = fault
        ? { ok: false, error: injected(fault.code, `${op.kind}`) }
        : (real ?? { ok: false, error: new RheoError('internal', 'inner settle returned too few results') });
      this.#record(op, outcome);
      return outcome;
    });
  }

  #take(target: FaultTarget, kind: SettleOp['kind'] | null): Fault | null {
    const queue = this.#faults[target];
    const index = queue.findIndex((f) => kind === null || f.kinds === null || f.kinds.includes(kind));
    if (index < 0) return null;
    const fault = queue[index]!;
    fault.times -= 1;
    if (fault.times <= 0) queue.splice(index, 1);
    return fault;
  }

  #record(op: SettleOp, outcome: SettleOutcome): void {
    this.settles.push({
      kind: op.kind,
      partition: op.partition,
      sequence: op.sequence,
      leaseId: op.leaseId,
      ok: outcome.ok,
      code: outcome.ok ? null : outcome.error.code,
    });
  }

  // Everything else forwards unchanged.
  migrate(): Promise<void> {
    return this.inner.migrate();
  }
  close(): Promise<void> {
    return this.inner.close();
  }
  createStream(...a: Parameters<Backend['createStream']>): ReturnType<Backend['createStream']> {
    return this.inner.createStream(...a);
  }
  listStreams(): ReturnType<Backend['listStreams']> {
    return this.inner.listStreams();
  }
  setRetention(...a: Parameters<NonNullable<Backend['setRetention']>>): ReturnType<NonNullable<Backend['setRetention']>> {
    return this.inner.setRetention!(...a);
  }
  trim(...a: Parameters<NonNullable<Backend['trim']>>): ReturnType<NonNullable<Backend['trim']>> {
    return this.inner.trim!(...a);
  }
  deleteGroup(...a: Parameters<NonNullable<Backend['deleteGroup']>>): ReturnType<NonNullable<Backend['deleteGroup']>> {
    return this.inner.deleteGroup!(...a);
  }
  deleteStream(...a: Parameters<NonNullable<Backend['deleteStream']>>): ReturnType<NonNullable<Backend['deleteStream']>> {
    return this.inner.deleteStream!(...a);
  }
  createGroup(...a: Parameters<Backend['createGroup']>): ReturnType<Backend['createGroup']> {
    return this.inner.createGroup(...a);
  }
  listGroups(...a: Parameters<Backend['listGroups']>): ReturnType<Backend['listGroups']> {
    return this.inner.listGroups(...a);
  }
  append(...a: Parameters<Backend['append']>): ReturnType<Backend['append']> {
    return this.inner.append(...a);
  }
  read(...a: Parameters<Backend['read']>): ReturnType<Backend['read']> {
    return this.inner.read(...a);
  }
  query(...a: Parameters<Backend['query']>): ReturnType<Backend['query']> {
    this.calls.query++;
    return this.inner.query(...a);
  }
  lag(...a: Parameters<Backend['lag']>): ReturnType<Backend['lag']> {
    return this.inner.lag(...a);
  }
  replay(...a: Parameters<Backend['replay']>): ReturnType<Backend['replay']> {
    return this.inner.replay(...a);
  }
  resetGroup(...a: Parameters<Backend['resetGroup']>): ReturnType<Backend['resetGroup']> {
    return this.inner.resetGroup(...a);
  }
  groupInfo(...a: Parameters<Backend['groupInfo']>): ReturnType<Backend['groupInfo']> {
    return this.inner.groupInfo(...a);
  }
  deadLetters(...a: Parameters<Backend['deadLetters']>): ReturnType<Backend['deadLetters']> {
    return this.inner.deadLetters(...a);
  }
  redrive(...a: Parameters<Backend['redrive']>): ReturnType<Backend['redrive']> {
    return this.inner.redrive(...a);
  }
  storageStats(...a: Parameters<Backend['storageStats']>): ReturnType<Backend['storageStats']> {
    return this.inner.storageStats(...a);
  }
  useLogger(logger: Logger): void {
    this.inner.useLogger?.(logger);
  }

  ping(): ReturnType<Backend['ping']> {
    return this.inner.ping();
  }
  waitForAppend(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    // Without the capability callers never call this; with it, forward.
    return this.inner.waitForAppend ? this.inner.waitForAppend(stream, timeoutMs, signal) : Promise.resolve(false);
  }
}

function injected(code: RheoErrorCode, what: string): RheoError {
  return new RheoError(code, `injected ${code} failure on ${what}`);
}
