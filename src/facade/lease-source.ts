import type { Backend, BackendCapabilities, FetchRequest, LeaseRef, RenewResult, SettleOp, SettleOutcome } from '../core/backend.js';
import type { CallTarget } from '../core/call-options.js';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import type { JsonValue, Lease } from '../core/types.js';
import { attachTelemetry, type RheoTelemetry } from '../observability/telemetry.js';
import type { LeaseSource, RuntimeDefaults } from '../runtime/sources.js';

/** What the facade lends its lease source: the store, its settings, and its lifecycle and call wrapper. */
export interface LeaseSourceHost {
  readonly backend: Backend;
  readonly defaults: Readonly<RuntimeDefaults>;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly telemetry: RheoTelemetry | null;
  /** Throws `closed` once rheo is closed (claims and renewals stop then). */
  assertOpen(): void;
  /** Throws `closed` once the consumers' last settles are done too. */
  assertCanSettle(): void;
  /** Runs one backend call: a non-rheo error that escapes becomes `internal`. */
  call<R>(fn: () => Promise<R>, target: CallTarget | (() => CallTarget)): Promise<R>;
}

/**
 * The facade's side of `LeaseSource` (runtime/sources.ts): what the
 * competing consumer claims, renews and settles through. Requests arrive
 * normalised (the consumer built them from validated options and from
 * leases the store handed out), so nothing is validated again here; each call
 * is traced and runs under the instance's lifecycle, like the public calls.
 */
export function createLeaseSource(host: LeaseSourceHost): LeaseSource {
  const { backend, telemetry } = host;
  const source: LeaseSource = {
    defaults: host.defaults,
    clock: host.clock,
    logger: host.logger,
    backend,
    get capabilities(): Readonly<BackendCapabilities> {
      return backend.capabilities;
    },

    async claim<T extends JsonValue = JsonValue>(stream: string, group: string, request: FetchRequest): Promise<Lease<T>[]> {
      host.assertOpen();
      const claimed = traced(telemetry?.receive(stream, group, request.consumerId), () =>
        host.call(() => backend.fetch(stream, group, request), fetchTarget(stream, group)),
      );
      return (await claimed) as Lease<T>[];
    },

    async renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
      host.assertOpen();
      return host.call(() => backend.renew(refs, leaseMs), RENEW_MANY);
    },

    async settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
      host.assertCanSettle();
      return traced(telemetry?.settle(ops), () => host.call(() => backend.settle(ops), SETTLE_MANY));
    },

    async claimAfterAppend<T extends JsonValue = JsonValue>(
      stream: string,
      group: string,
      request: FetchRequest,
      timeoutMs: number,
      signal: AbortSignal,
    ): Promise<{ leases: Lease<T>[]; appended: boolean } | null> {
      if (!backend.capabilities.blockingFetch || !backend.fetchAfterAppend) return null;
      host.assertOpen();
      // Recorded as a fetch whose time includes its wait; one that could not wait ran nothing and records nothing.
      const finish = telemetry?.receive(stream, group, request.consumerId);
      let got: { leases: Lease[]; appended: boolean } | null;
      try {
        got = await host.call(() => backend.fetchAfterAppend!(stream, group, request, timeoutMs, signal), fetchTarget(stream, group));
      } catch (error) {
        finish?.(null, error);
        throw error;
      }
      if (got !== null) finish?.(got.leases);
      return got as { leases: Lease<T>[]; appended: boolean } | null;
    },

    waitForAppend(stream: string, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
      if (!backend.capabilities.notifications || !backend.waitForAppend) return Promise.resolve(false);
      return backend.waitForAppend(stream, timeoutMs, signal);
    },
  };
  attachTelemetry(source, telemetry);
  return source;
}

/** A fetch's call target, named only if the call is cancellable (never, from the runtime): no string built per claim. */
function fetchTarget(stream: string, group: string): () => CallTarget {
  return () => ({ action: `fetch from group "${group}" of stream "${stream}"`, writes: true, stream, group });
}

const RENEW_MANY: CallTarget = { action: 'renewMany', writes: true };
const SETTLE_MANY: CallTarget = { action: 'settleMany', writes: true };

/** Reports the answer of `call` to a telemetry finisher, when there is one. */
async function traced<R>(finish: ((result: R | null, error?: unknown) => void) | undefined, call: () => Promise<R>): Promise<R> {
  if (!finish) return call();
  let result: R;
  try {
    result = await call();
  } catch (error) {
    finish(null, error);
    throw error;
  }
  finish(result);
  return result;
}
