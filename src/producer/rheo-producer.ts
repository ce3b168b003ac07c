/*
 * Past ~400 lines on purpose: one class, RheoProducer, is a Readable whose
 * demand accounting (the inflight tracker), settle batcher, fetch loop and
 * teardown share private state that every public method and stream hook
 * touches; split across files, that state would be handed around in the
 * open and the per-lease paths (push, confirm, settle) would call through
 * it. Its options and their validation live in producer-options.ts.
 */
import { Readable } from 'node:stream';
import type { Backend, FetchRequest, SettleOp } from '../core/backend.js';
import { settleOp } from '../core/arguments.js';
import { RheoError, isRheoError } from '../core/errors.js';
import type { JsonValue, Lease, SettleRequest } from '../core/types.js';
import { describe } from '../core/validation.js';
import { leaseRefOf, settleOpFor } from '../runtime/lease-ops.js';
import type { LeaseSource } from '../runtime/sources.js';
import type { FailurePolicy } from '../runtime/lease-outcome.js';
import { backoffDelay, type BackoffOptions } from '../runtime/backoff.js';
import { InflightTracker } from './inflight-tracker.js';
import { resolveProducerOptions, type ProducerOptions, type RheoProducerEvents } from './producer-options.js';
import { SettleBatcher, type SettleRetry } from './settle-batcher.js';
import { sleep, systemTimers, type Timers } from '../runtime/timers.js';
import { AppendListener, idleClaim } from '../runtime/append-wait.js';
import { producerReporter } from '../observability/producer-diagnostics.js';
import { attachTelemetry, telemetryOf } from '../observability/telemetry.js';


/**
 * Typed overloads for the producer's own events and for the `Readable`
 * events a caller usually wants (`data` carries a `Lease<T>`).
 */
export interface RheoProducer<T extends JsonValue = JsonValue> {
  on<E extends keyof RheoProducerEvents<T>>(event: E, listener: (...args: RheoProducerEvents<T>[E]) => void): this;
  on(event: 'data', listener: (lease: Lease<T>) => void): this;
  on(event: 'error', listener: (error: Error) => void): this;
  on(event: string | symbol, listener: (...args: unknown[]) => void): this;
  once<E extends keyof RheoProducerEvents<T>>(event: E, listener: (...args: RheoProducerEvents<T>[E]) => void): this;
  once(event: 'data', listener: (lease: Lease<T>) => void): this;
  once(event: 'error', listener: (error: Error) => void): this;
  once(event: string | symbol, listener: (...args: unknown[]) => void): this;
  off<E extends keyof RheoProducerEvents<T>>(event: E, listener: (...args: RheoProducerEvents<T>[E]) => void): this;
  off(event: string | symbol, listener: (...args: unknown[]) => void): this;
  read(size?: number): Lease<T> | null;
  /**
   * Node's own iterator type, with the lease type filled in: under
   * `lib: ESNext` it includes `[Symbol.asyncDispose]`, which a plain
   * `AsyncIterableIterator` lacks, and `Readable`'s signature would not accept.
   */
  [Symbol.asyncIterator](): NodeJS.AsyncIterator<Lease<T>>;
}

/**
 * An object-mode `Readable` of leases, with GenStage-style demand: it holds
 * at most `maxDemand` unsettled leases (buffered plus handed downstream and
 * not yet confirmed), fetches only `maxDemand - inflightCount` at a time, and
 * resumes fetching when a confirm frees a slot (never on a timer).
 *
 * Settle through the producer (`ack`, `nack`, `reject`, `release`): that
 * settles durably and confirms in one step, and settles issued close together
 * go to the backend in one `settleMany` call. Callers that settle through
 * `rheo` directly must call `confirm(leaseId)` afterwards, or the producer
 * keeps renewing the lease and counting it against `maxDemand`.
 *
 * Teardown (`destroy()`, a `pipeline` error, a `for await` break, the
 * `signal` option, `close()`) stops fetching and renewal and releases the
 * leases that were fetched but never read, so they are redelivered at once
 * without spending an attempt.
 */
// Declaration merging adds typed event overloads; the interface declares no fields.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class RheoProducer<T extends JsonValue = JsonValue> extends Readable {
  readonly stream: string;
  readonly group: string;
  readonly maxDemand: number;
  /** Slots that must be free before the producer fetches again. */
  readonly minDemand: number;
  readonly leaseMs: number;
  readonly pollMs: number;
  /** The longest idle wait while the store's notifications are trusted (`ProducerOptions.maxPollMs`). */
  readonly maxPollMs: number;
  readonly consumerId: string;
  /** The failure policy every stage settling through this producer starts from (`ProducerOptions.onFailure`). */
  readonly onFailure: FailurePolicy;
  readonly partitions: readonly number[] | undefined;
  /** The timer source; sinks and transforms fed by this producer default to it. */
  readonly timers: Timers;

  readonly #source: LeaseSource;
  /** The claim every fetch sends: built once from the validated options (only `limit` changes). */
  readonly #request: FetchRequest;
  /** The store's wait for an append, registered with each claim (runtime/append-wait.ts); ends with `#stop`. */
  readonly #appends: AppendListener;
  readonly #tracker: InflightTracker<T>;
  readonly #batcher: SettleBatcher<QueuedSettle<T>>;
  readonly #backoff: BackoffOptions;
  readonly #settleBackoff: BackoffOptions & { maxRetries: number };
  readonly #random: () => number;
  readonly #report: ReturnType<typeof producerReporter>;
  /** Aborted on drain or destroy: cuts poll and backoff waits short. */
  readonly #stop = new AbortController();
  /** Whether the idle wait and the claim after it go to the store as one step (capability `blockingFetch`). */
  readonly #blocking: boolean;
  #wanted = false;
  #loop: Promise<void> | null = null;
  #draining = false;
  #ended = false;
  #fetchFailures = 0;
  readonly #emptyWaiters = new Set<() => void>();
  #closing: Promise<void> | null = null;

  /**
   * Built by `rheo.producer()` on the facade's lease source
   * (runtime/sources.ts): options are validated here, once; the source
   * validates nothing again.
   */
  constructor(source: LeaseSource, options: ProducerOptions) {
    const resolved = resolveProducerOptions(source, options);
    super({ objectMode: true, highWaterMark: resolved.maxDemand, signal: options.signal });
    this.stream = options.stream;
    this.group = options.group;
    this.maxDemand = resolved.maxDemand;
    this.minDemand = resolved.minDemand;
    this.leaseMs = resolved.leaseMs;
    this.pollMs = resolved.pollMs;
    this.maxPollMs = resolved.maxPollMs;
    this.consumerId = resolved.consumerId;
    this.onFailure = resolved.onFailure;
    this.partitions = options.partitions ? [...options.partitions] : undefined;
    this.timers = options.timers ?? systemTimers;
    // A blocking wait is timed by the store, not by timers of the caller's.
    this.#blocking = source.capabilities.blockingFetch && options.timers === undefined;
    this.#source = source;
    this.#request = {
      limit: this.maxDemand,
      consumerId: this.consumerId,
      leaseMs: this.leaseMs,
      partitions: resolved.partitions,
      maxBytes: source.defaults.maxFetchBytes,
    };
    this.#appends = new AppendListener(
      source.capabilities.notifications ? (stream, ms, signal) => source.waitForAppend(stream, ms, signal) : null,
      this.stream,
      this.pollMs,
      this.maxPollMs,
      this.timers,
      this.#stop.signal,
      () => source.clock.now(),
    );
    this.#report = producerReporter(this, source.logger);
    const telemetry = telemetryOf(source);
    if (telemetry) {
      attachTelemetry(this, telemetry);
      const untrack = telemetry.track(this);
      this.once('close', untrack);
    }
    this.#random = options.random ?? Math.random;
    this.#backoff = resolved.fetchBackoff;
    this.#settleBackoff = resolved.settleRetry;
    const retry: SettleRetry<QueuedSettle<T>> = { timers: this.timers, delayMs: (op, error, failures) => this.#settleRetryMs(op, error, failures) };
    // The answer of each settle is reported and confirmed by the batcher's
    // hook, before the caller's promise settles: no promise per settle here.
    this.#batcher = new SettleBatcher(
      (queued) => source.settle(queued.map((q) => q.op)),
      resolved.maxSettleBatch,
      2,
      (op, error) => {
        const leaseId = op.op.leaseId;
        // A delayed retry becomes claimable with no notification: no idle wait runs past it.
        if (error === null && op.op.kind === 'nack') this.#appends.expect(source.clock.now() + op.op.delayMs);
        try {
          this.#report.settled(op.request, error, this.#tracker.has(leaseId));
        } finally {
          // A fenced or expired lease must not be renewed either: confirm regardless.
          this.confirm(leaseId);
        }
      },
      retry,
    );
    this.#tracker = new InflightTracker<T>({
      leaseMs: resolved.leaseMs,
      timers: this.timers,
      random: this.#random,
      renewMany: (leases) => this.#renew(leases),
      onLost: (lease, error) => {
        this.#report.lost(lease, error);
        this.#freed();
      },
      onRenewError: (error, leases) => {
        // A closed facade will never renew again: stop rather than retry forever.
        if (error.code === 'closed') void this.#tracker.stop();
        this.#report.renewFailed({ stream: this.stream, group: this.group, consumerId: this.consumerId, error, leases: leases.length });
        this.emit('renew-error', { error, leases });
      },
      onRenewed: (summary) => this.emit('renewed', summary),
    });
  }

  /** Unsettled leases held: buffered plus handed downstream and not yet confirmed. Never exceeds `maxDemand`. */
  get inflightCount(): number {
    return this.#tracker.size;
  }

  /** The backend the leases come from: sinks that settle in a transaction (`createBatchSink({ transaction: true })`) begin it there. */
  get backend(): Backend {
    return this.#source.backend;
  }

  /** Whether the producer still holds (and renews) this lease. `false` once confirmed or lost. */
  holds(leaseId: string): boolean {
    return this.#tracker.has(leaseId);
  }

  /** Acks durably, then confirms (the confirm happens even when the ack fails). */
  ack(lease: Lease<T>): Promise<void> {
    return this.#settle({ kind: 'ack', lease });
  }

  /** Retry later (after `delayMs`); dead-letters at `maxAttempts`. Confirms even when the nack fails. */
  nack(lease: Lease<T>, reason?: string | null, options: { delayMs?: number } = {}): Promise<void> {
    return this.#settle({ kind: 'nack', lease, reason, delayMs: options.delayMs });
  }

  /** Dead-letters now. Confirms even when the reject fails. */
  reject(lease: Lease<T>, reason?: string | null): Promise<void> {
    return this.#settle({ kind: 'reject', lease, reason });
  }

  /** Gives the lease back unprocessed, without spending an attempt. Confirms even when the release fails. */
  release(lease: Lease<T>): Promise<void> {
    return this.#settle({ kind: 'release', lease });
  }

  /**
   * Stops renewing the lease and frees its demand slot, for callers that
   * settled through `rheo` directly. Returns whether the lease was held;
   * given several ids (an array), whether every one of them was.
   * Anything but a lease id or an array of them is `invalid_argument`.
   */
  confirm(leaseIds: string | readonly string[]): boolean {
    if (typeof leaseIds === 'string') return this.#confirmOne(leaseIds);
    if (!Array.isArray(leaseIds) || !leaseIds.every((id) => typeof id === 'string')) {
      throw new RheoError('invalid_argument', `confirm expects a lease id or an array of lease ids, got ${describe(leaseIds)}`);
    }
    let all = true;
    for (const id of leaseIds as readonly string[]) all = this.#confirmOne(id) && all;
    return all;
  }

  #confirmOne(leaseId: string): boolean {
    const held = this.#tracker.delete(leaseId);
    if (held) this.#freed();
    return held;
  }

  /**
   * Stops fetching and ends the stream once the buffered leases are read, then
   * resolves `true` when every held lease is confirmed, or `false` when
   * `timeoutMs` passes first (the caller may then `destroy()`).
   */
  async drain(timeoutMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    this.#beginDrain();
    if (this.#tracker.size === 0 && !this.#loop) return true;
    return new Promise<boolean>((resolve) => {
      const done = (drained: boolean): void => {
        timer?.cancel();
        this.#emptyWaiters.delete(onEmpty);
        resolve(drained);
      };
      const onEmpty = (): void => done(true);
      this.#emptyWaiters.add(onEmpty);
      const timer = Number.isFinite(timeoutMs) ? this.timers.schedule(timeoutMs, () => done(false)) : null;
    });
  }

  /** Destroys (releasing leases never read), waits for teardown and for settles already issued. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= new Promise<void>((resolve) => {
      if (this.closed) return resolve();
      this.once('close', () => resolve());
      this.destroy();
    }).then(async () => {
      // After a drain the stream ended naturally and renewal went on for leases
      // still being worked on; an explicit close stops it.
      await this.#tracker.stop();
      // Closing should not wait out settle backoffs: one last try each.
      this.#batcher.stopRetrying();
      await this.#batcher.idle();
    });
    return this.#closing;
  }

  override async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  override _read(): void {
    this.#wanted = true;
    this.#kick();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.#stop.abort();
    // After a drain the stream ends normally while leases handed downstream
    // are still being worked on: keep renewing those until they are confirmed.
    const naturalEnd = error === null && this.#ended;
    const teardown = async (): Promise<void> => {
      await this.#loop;
      if (!naturalEnd) await this.#tracker.stop();
      const unread = this.#tracker.takeUnhanded();
      if (unread.length > 0) await this.#releaseUnread(unread);
      this.#freed();
    };
    teardown().then(
      () => callback(error),
      (failure: unknown) => callback(error ?? (failure as Error)),
    );
  }

  /** Records hand-over: a `'data'` event is exactly the moment a lease leaves the buffer. */
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'data') {
      const lease = args[0] as Lease<T> | undefined;
      if (lease) this.#tracker.markHanded(lease.leaseId);
    }
    return super.emit(event, ...args);
  }

  /**
   * Validates the settle (the producer's methods are a public boundary: the
   * source checks nothing again), then settles durably through the batcher,
   * whose hook reports and confirms (see the constructor). A refused settle
   * writes nothing, and is reported and confirmed like a failed one.
   */
  #settle(request: SettleRequest & { lease: Lease<T> }): Promise<void> {
    let op: SettleOp;
    try {
      op = settleOp(request, request.kind);
    } catch (error) {
      return this.#refused(request, error as RheoError);
    }
    this.#tracker.markSettling(op.leaseId);
    return this.#batcher.settle({ request, op });
  }

  #refused(request: SettleRequest & { lease: Lease<T> }, error: RheoError): Promise<void> {
    const leaseId = (request.lease as { leaseId?: unknown } | null | undefined)?.leaseId;
    if (typeof leaseId === 'string' && this.#tracker.has(leaseId)) {
      try {
        this.#report.settled(request, error, true);
      } finally {
        this.confirm(leaseId);
      }
    }
    return Promise.reject(error);
  }

  /** Renews through the source; a renewed lease is a copy with the new expiry. */
  async #renew(leases: Lease<T>[]): Promise<Array<{ ok: true; lease: Lease<T> } | { ok: false; error: RheoError }>> {
    const results = await this.#source.renew(leases.map(leaseRefOf), this.leaseMs);
    return leases.map((lease, i) => {
      const r = results[i];
      if (!r) return { ok: false as const, error: new RheoError('internal', 'renewMany: the backend returned too few results') };
      return r.ok ? { ok: true as const, lease: { ...lease, expiresAt: r.expiresAt } } : r;
    });
  }

  /**
   * `backend_unavailable` means the settle wrote nothing, so sending it again
   * cannot apply it twice; abandoning it would instead cost a redelivery once
   * the lease expires (after a server restart: tens per run). It is retried
   * while the lease, as last renewed, has not expired by the facade's clock:
   * past that another holder may own the delivery and the retry would be
   * fenced anyway. `ambiguous` (the write may have landed) and every other
   * failure are answered at once.
   */
  #settleRetryMs(op: QueuedSettle<T>, error: RheoError, failures: number): number | null {
    if (error.code !== 'backend_unavailable' || failures > this.#settleBackoff.maxRetries) return null;
    const delayMs = backoffDelay(failures, this.#settleBackoff, this.#random);
    const lease = this.#tracker.get(op.op.leaseId) ?? op.request.lease;
    return this.#source.clock.now() + delayMs < lease.expiresAt.getTime() ? delayMs : null;
  }

  #freed(): void {
    this.#wakeIfEmpty();
    if (this.#wanted) this.#kick();
  }

  /** Wakes `drain()`: nothing held, and no fetch on its way that could still hand out leases. */
  #wakeIfEmpty(): void {
    if (this.#tracker.size === 0 && !this.#loop) for (const wake of [...this.#emptyWaiters]) wake();
  }

  #kick(): void {
    if (this.#loop || this.destroyed || this.#draining) return;
    this.#loop = this.#fetchLoop().finally(() => {
      this.#loop = null;
      if (this.#draining) {
        this.#end();
        this.#wakeIfEmpty();
      }
      // A confirm may have freed room while the loop was winding down.
      else if (this.#wanted && this.maxDemand - this.#tracker.size >= this.minDemand) this.#kick();
    });
  }

  async #fetchLoop(): Promise<void> {
    // Whether the last fetch left nothing claimable: wait for an append or the poll before the next.
    let idle = false;
    while (this.#wanted && !this.destroyed && !this.#draining) {
      const room = this.maxDemand - this.#tracker.size;
      if (room < this.minDemand) return; // near the cap: confirms resume us
      let leases: Lease<T>[];
      try {
        this.#request.limit = room;
        if (idle) {
          idle = false;
          // The wait and the claim as one step where the store can (runtime/append-wait.ts).
          const found = await idleClaim<T>(this.#appends, this.#source, this.#blocking, this.stream, this.group, this.#request);
          // Waited as usual: claim with the room there is now.
          if (found === null) continue;
          leases = found;
        } else {
          const claimed = this.#source.claim<T>(this.stream, this.group, this.#request);
          // Right after the claim is issued (consumer/consumer.ts): an append that lands while it is on its way still finds this wait.
          this.#appends.listen();
          leases = await claimed;
        }
      } catch (error) {
        if (this.destroyed || this.#draining) return;
        this.#fetchFailures++;
        const retryInMs = backoffDelay(this.#fetchFailures, this.#backoff, this.#random);
        const failure = asRheoError(error, 'fetch');
        this.#report.fetchFailed({
          stream: this.stream,
          group: this.group,
          consumerId: this.consumerId,
          error: failure,
          failures: this.#fetchFailures,
          backoffMs: retryInMs,
        });
        if (failure.code === 'closed') {
          // rheo was closed: no fetch can succeed again, so end instead of retrying
          // forever (a listener, such as a consumer's, may have begun a drain already).
          if (!this.destroyed && !this.#draining) this.destroy(this.listenerCount('error') > 0 ? failure : undefined);
          return;
        }
        await sleep(this.timers, retryInMs, this.#stop.signal);
        continue;
      }
      this.#fetchFailures = 0;
      if (this.destroyed || this.#ended) {
        // Node drops pushes after destroy: give these back instead.
        if (leases.length > 0) await this.#releaseUnread(leases);
        return;
      }
      if (leases.length === 0) {
        idle = true;
        continue;
      }
      this.#appends.found();
      // A short fetch means nothing else was claimable: the next fetch waits
      // for an append or the poll, instead of an immediate claim that would
      // come back empty (measured: 355 claims for 200 notified events).
      const caughtUp = leases.length < room;
      for (const lease of leases) this.#tracker.add(lease);
      this.#report.fetched(leases);
      this.emit('fetched', { count: leases.length, inflight: this.#tracker.size });
      let more = true;
      for (const lease of leases) more = this.push(lease);
      if (!more) this.#wanted = false; // Node calls _read again when the buffer drains
      idle = caughtUp;
    }
  }

  #beginDrain(): void {
    if (this.#draining) return;
    this.#draining = true;
    this.#stop.abort();
    if (!this.#loop) this.#end();
  }

  #end(): void {
    if (this.#ended || this.destroyed) return;
    this.#ended = true;
    this.push(null);
  }

  async #releaseUnread(leases: Lease<T>[]): Promise<void> {
    let failure: RheoError | null = null;
    try {
      const results = await this.#source.settle(leases.map(releaseOpOf));
      const failed = results.find((r) => !r.ok);
      if (failed && !failed.ok) failure = failed.error;
    } catch (error) {
      failure = asRheoError(error, 'release');
    }
    this.emit('released', { leases, error: failure });
  }
}

function asRheoError(error: unknown, what: string): RheoError {
  if (isRheoError(error)) return error;
  return new RheoError('internal', `${what} failed: ${(error as Error)?.message ?? String(error)}`, { cause: error });
}

/** A settle the producer queued: the caller's request (reported by) and its validated store op (sent). */
interface QueuedSettle<T extends JsonValue> {
  readonly request: SettleRequest & { lease: Lease<T> };
  readonly op: SettleOp;
}

/** The release of a lease the store handed out and nobody read. */
function releaseOpOf(lease: Lease<unknown>): SettleOp {
  return settleOpFor(lease, 'release', null, 0);
}
