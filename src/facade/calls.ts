import type { Backend, GroupMembership, LeaseRef, OwnershipStore, RetentionStore } from '../core/backend.js';
import { capability, hasCapability } from '../core/capabilities.js';
import { arrayLength, assertOptions, messageOf } from '../core/arguments/common.js';
import { callScope, runCancellable, type CallScope, type CallTarget } from '../core/call-options.js';
import type { Clock } from '../core/clock.js';
import { RheoError, invalidArgument, isRheoError } from '../core/errors.js';
import { MAX_CONFIGURABLE_BYTES, type RheoLimits } from '../core/limits.js';
import type { Logger } from '../core/logger.js';
import { optionalInteger } from '../core/validation.js';
import type { RheoTelemetry } from '../observability/telemetry.js';
import type { RuntimeDefaults } from '../runtime/sources.js';

/**
 * The call machinery every area of the facade shares: the instance's
 * settings and lifecycle, and the one way a validated call reaches the
 * backend (under the caller's cancellation, traced, with foreign errors
 * wrapped). The areas (admin, log, leases, operations, ownership) are
 * functions over it; `Rheo` only delegates.
 */
export class FacadeCalls {
  readonly backend: Backend;
  readonly clock: Clock;
  readonly defaults: Readonly<RuntimeDefaults>;
  readonly limits: Readonly<RheoLimits>;
  readonly logger: Logger;
  readonly telemetry: RheoTelemetry | null;
  /** Events deleted per backend call by `trim`. */
  readonly trimBatchSize: number;
  #closed = false;
  /** Settles outlive `closed` until the attached producers and consumers have ended. */
  #settlesClosed = false;

  /** The instance's settings, resolved by `Rheo`. */
  constructor(settings: Pick<FacadeCalls, 'backend' | 'clock' | 'defaults' | 'limits' | 'logger' | 'telemetry' | 'trimBatchSize'>) {
    this.backend = settings.backend;
    this.clock = settings.clock;
    this.defaults = settings.defaults;
    this.limits = settings.limits;
    this.logger = settings.logger;
    this.telemetry = settings.telemetry;
    this.trimBatchSize = settings.trimBatchSize;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** From now on every new call fails with `closed`; settles still go through until `closeSettles()`. */
  closeCalls(): void {
    this.#closed = true;
  }

  closeSettles(): void {
    this.#settlesClosed = true;
  }

  assertOpen(): void {
    if (this.#closed) throw new RheoError('closed', 'this rheo instance is closed');
  }

  /** Settles are refused only once `close()` has ended the producers and consumers that may still issue them. */
  assertCanSettle(): void {
    if (this.#settlesClosed) throw new RheoError('closed', 'this rheo instance is closed');
  }

  ownership(call: string): OwnershipStore {
    return capability(this.backend, 'partitionOwnership', call);
  }

  /** Retention and deletion are a capability: a backend without it answers `unsupported` and is never called. */
  retention(call: string): RetentionStore {
    return capability(this.backend, 'retention', call);
  }

  /** The group's membership when it is consumed by partition ownership (members or owners present). */
  async membershipIfOwned(stream: string, group: string): Promise<GroupMembership | null> {
    if (!hasCapability(this.backend, 'partitionOwnership')) return null;
    const backend = this.backend;
    const m = await this.call(() => backend.members(stream, group));
    return m.members.length > 0 || Object.values(m.owners).some((o) => o !== null) ? m : null;
  }

  maxBytes(value: unknown): number {
    return optionalInteger('maxBytes', value, this.defaults.maxFetchBytes, { min: 1, max: MAX_CONFIGURABLE_BYTES });
  }

  /**
   * Batch calls validate each item on its own: an invalid item gets its own
   * `invalid_argument` result while the valid ones go to the backend in one call.
   */
  async perItem<I, P, R>(
    what: string,
    scope: CallScope,
    items: I[],
    prepare: (item: I) => P,
    call: (prepared: P[]) => Promise<R[]>,
  ): Promise<Array<R | { ok: false; error: RheoError }>> {
    const count = arrayLength(what, items);
    // Plain loops: this runs once per settled or renewed lease of every pipeline.
    const valid: P[] = [];
    let invalid: Map<number, RheoError> | null = null;
    for (let i = 0; i < count; i++) {
      try {
        valid.push(prepare(items[i]!));
      } catch (error) {
        // A getter or proxy trap of the caller's item threw: that item is bad input, the others still go.
        const problem = isRheoError(error)
          ? error
          : invalidArgument(`${what} item [${i}] could not be read: ${messageOf(error)}`, { cause: error });
        (invalid ??= new Map()).set(i, problem);
      }
    }
    const results = valid.length ? await this.call(() => call(valid), scope, { action: what, writes: true }) : [];
    if (invalid === null && results.length === count) return results;
    const out: Array<R | { ok: false; error: RheoError }> = [];
    let j = 0;
    for (let i = 0; i < count; i++) {
      const error = invalid?.get(i);
      if (error) out.push({ ok: false, error });
      else out.push(results[j++] ?? { ok: false, error: new RheoError('internal', `${what}: the backend returned too few results`) });
    }
    return out;
  }

  /** `call`, reporting the answer to a telemetry finisher when there is one. */
  async traced<R>(
    finish: ((result: R | null, error?: unknown) => void) | undefined,
    fn: () => Promise<R>,
    scope: CallScope = NO_CANCEL,
    target: CallTarget | (() => CallTarget) = UNNAMED,
  ): Promise<R> {
    if (!finish) return this.call(fn, scope, target);
    let result: R;
    try {
      result = await this.call(fn, scope, target);
    } catch (error) {
      finish(null, error);
      throw error;
    }
    finish(result);
    return result;
  }

  /** `signal` and `timeoutMs` of a call's last options argument, checked before anything is sent. */
  scope(what: string, options: unknown): CallScope {
    assertOptions(what, options);
    return callScope(what, options);
  }

  /**
   * Runs one backend call under the caller's cancellation (core/call-options.ts).
   * Backends classify their own driver errors; anything else that escapes is
   * wrapped, never leaked. An abort reason is the caller's own value and
   * passes through unchanged.
   */
  call<R>(fn: () => Promise<R>, scope: CallScope = NO_CANCEL, target: CallTarget | (() => CallTarget) = UNNAMED): Promise<R> {
    return runCancellable(scope, target, async () => {
      try {
        return await fn();
      } catch (error) {
        if (error instanceof RheoError) throw error;
        throw new RheoError('internal', `unexpected backend failure: ${(error as Error)?.message ?? String(error)}`, {
          cause: error,
        });
      }
    });
  }
}

const NO_CANCEL = callScope('', undefined);
const UNNAMED: CallTarget = { action: 'the call', writes: true };

/** Names a settle or renewal in cancellation errors: they always write. */
export function leaseTarget(what: string, ref: LeaseRef): CallTarget {
  return {
    action: `${what} of delivery ${ref.partition}/${ref.sequence} in group "${ref.group}" of stream "${ref.stream}"`,
    writes: true,
    stream: ref.stream,
    group: ref.group,
  };
}
