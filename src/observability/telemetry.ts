/*
 * Past ~400 lines on purpose: one class, RheoTelemetry, owns one set of
 * instruments (two histograms, four counters, four observable gauges and
 * the batch callback that reads them) and every method records to several
 * of them; split across files, those private instruments would have to be
 * handed around in the open.
 */
import type * as OtelApi from '@opentelemetry/api';
import type { PreparedAppend, SettleOp } from '../core/backend.js';
import type { Clock } from '../core/clock.js';
import type { LagReport, Lease, SettleResult } from '../core/types.js';
import { loadApi, type Api } from './otel-loader.js';
import { SYSTEM, errorType, leaseAttributes, messageOf, remoteContext, seconds } from './span-attributes.js';
import { formatTraceparent, injectTraceContext } from './trace-context.js';

/** How often #tracingOn looks again for a tracer provider or context manager. */
const PROBE_INTERVAL_MS = 1_000;

/** A tracer provider other than the API's no-op one is registered (public API only: the proxy's delegate). */
function tracerRegistered(api: Api): boolean {
  const provider = api.trace.getTracerProvider();
  if (!(provider instanceof api.ProxyTracerProvider)) return true;
  return provider.getDelegate() !== new api.ProxyTracerProvider().getDelegate();
}

/** A context manager is registered: without one, a context set around a call is not active inside it. */
function contextManagerRegistered(api: Api): boolean {
  const key = api.createContextKey('rheo.telemetry.probe');
  return api.context.with(api.ROOT_CONTEXT.setValue(key, true), () => api.context.active().getValue(key) === true);
}

/** Instrumentation scope name: spans and metrics of rheo carry it. */
export const INSTRUMENTATION_NAME = 'rheo';

/** A held lease counted in `rheo.consumer.leases.held`. */
export interface HeldLeases {
  readonly stream: string;
  readonly group: string;
  readonly inflightCount: number;
}

/** A partition consumer counted in `rheo.consumer.partitions.owned`. */
export interface OwnedPartitions {
  readonly stream: string;
  readonly group: string;
  readonly ownedCount: number;
}

/** What the process and settle spans of one lease need from the sink that runs it. */
export interface ProcessScope {
  /** Runs the handler with the process span as the active context. */
  run<R>(fn: () => R): R;
  /**
   * The handler finished; `failure` is what it threw, if it did. Starts the
   * settle span named after `settle`; `null`: nothing will be settled (the
   * lease was lost meanwhile).
   */
  handled(settle: 'ack' | 'nack' | 'reject' | 'release' | null, failure?: unknown): void;
  /** The settle was answered. */
  settled(): void;
}

export interface Finish<R> {
  (result: R | null, error?: unknown): void;
}

/**
 * OpenTelemetry spans and metrics for one `Rheo`, following the messaging
 * semantic conventions (see docs/observability.md). Created only when the
 * API loaded; every span is started only to be ended in the same call path,
 * and nothing is recorded while no provider is registered (the API's no-op
 * tracer and meter).
 */
export class RheoTelemetry {
  readonly #api: Api;
  readonly #tracer: OtelApi.Tracer;
  readonly #clock: Clock;
  readonly #operationDuration: OtelApi.Histogram;
  readonly #processDuration: OtelApi.Histogram;
  readonly #sent: OtelApi.Counter;
  readonly #consumed: OtelApi.Counter;
  readonly #settled: OtelApi.Counter;
  readonly #lagGauge: OtelApi.ObservableGauge;
  readonly #ageGauge: OtelApi.ObservableGauge;
  readonly #heldGauge: OtelApi.ObservableUpDownCounter;
  readonly #ownedGauge: OtelApi.ObservableUpDownCounter;
  readonly #rebalances: OtelApi.Counter;
  readonly #observe: OtelApi.BatchObservableCallback;
  readonly #meter: OtelApi.Meter;
  readonly #holders = new Set<HeldLeases>();
  readonly #owners = new Set<OwnedPartitions>();
  /** The groups whose owned count was last observed: one that lost its last consumer is observed at 0 once more. */
  #ownedGroups = new Map<string, { stream: string; group: string }>();
  readonly #lag: (stream: string, group: string) => Promise<LagReport>;
  /**
   * A meter provider was registered before this rheo was made. The metrics
   * API has no proxy meter: one taken from the no-op provider stays a no-op,
   * so without a provider no process duration is worth timing.
   */
  readonly #metering: boolean;
  /** See #tracingOn. */
  #tracing = false;
  #probeAt = 0;

  constructor(api: Api, clock: Clock, lag: (stream: string, group: string) => Promise<LagReport>) {
    this.#api = api;
    this.#clock = clock;
    this.#lag = lag;
    this.#tracer = api.trace.getTracer(INSTRUMENTATION_NAME);
    const meter = api.metrics.getMeter(INSTRUMENTATION_NAME);
    this.#meter = meter;
    this.#metering = meter !== api.createNoopMeter();
    this.#operationDuration = meter.createHistogram('messaging.client.operation.duration', {
      unit: 's',
      description: 'Duration of append (send), fetch (receive) and settle calls',
    });
    this.#processDuration = meter.createHistogram('messaging.process.duration', {
      unit: 's',
      description: 'Duration of handlers run by rheo sinks and consumers',
    });
    this.#sent = meter.createCounter('messaging.client.sent.messages', { unit: '{message}', description: 'Events appended' });
    this.#consumed = meter.createCounter('messaging.client.consumed.messages', {
      unit: '{message}',
      description: 'Events fetched (leases claimed)',
    });
    this.#settled = meter.createCounter('rheo.client.settled.messages', {
      unit: '{message}',
      description: 'Deliveries settled, by messaging.operation.name: ack, nack (retried), reject (dead-lettered), release',
    });
    this.#lagGauge = meter.createObservableGauge('rheo.consumer.lag', {
      unit: '{message}',
      description: 'Events of a partition not yet settled by the group (high watermark minus frontier)',
    });
    this.#ageGauge = meter.createObservableGauge('rheo.consumer.lag.age', {
      unit: 's',
      description: 'Age of the oldest unsettled event of a partition for the group (0 when none)',
    });
    this.#heldGauge = meter.createObservableUpDownCounter('rheo.consumer.leases.held', {
      unit: '{lease}',
      description: 'Unsettled leases held by producers and consumers of this process',
    });
    this.#ownedGauge = meter.createObservableUpDownCounter('rheo.consumer.partitions.owned', {
      unit: '{partition}',
      description: "Partitions owned by this process's partition-mode consumers (those being handed over included)",
    });
    this.#rebalances = meter.createCounter('rheo.consumer.rebalances', {
      unit: '{rebalance}',
      description: "Changes of a partition-mode consumer's share: partitions assigned, revoked or lost",
    });
    this.#observe = (result) => this.#collect(result);
    meter.addBatchObservableCallback(this.#observe, this.#observed());
  }

  #observed(): OtelApi.Observable[] {
    return [this.#lagGauge, this.#ageGauge, this.#heldGauge, this.#ownedGauge];
  }

  /** Counts a producer's held leases (and observes its group's lag) until the returned function is called. */
  track(holder: HeldLeases): () => void {
    this.#holders.add(holder);
    return () => void this.#holders.delete(holder);
  }

  /** Counts a partition consumer's owned partitions until the returned function is called. */
  trackOwner(owner: OwnedPartitions): () => void {
    this.#owners.add(owner);
    return () => void this.#owners.delete(owner);
  }

  /** A partition consumer's share changed (one `rebalance` event). */
  rebalanced(stream: string, group: string): void {
    this.#rebalances.add(1, { 'messaging.system': SYSTEM, 'messaging.destination.name': stream, 'messaging.consumer.group.name': group });
  }

  close(): void {
    this.#holders.clear();
    this.#owners.clear();
    this.#meter.removeBatchObservableCallback(this.#observe, this.#observed());
  }

  /**
   * A `send` span for one append call, its context injected into every
   * event's metadata (see trace-context.ts for the size rule).
   */
  send(stream: string, prepared: PreparedAppend[], limits: { maxEventBytes: number; maxBatchBytes: number }): Finish<Array<{ event: { id: string; partition: number } }>> {
    const api = this.#api;
    const started = performance.now();
    const attributes: OtelApi.Attributes = {
      'messaging.system': SYSTEM,
      'messaging.operation.type': 'send',
      'messaging.operation.name': 'send',
      'messaging.destination.name': stream,
    };
    if (prepared.length !== 1) attributes['messaging.batch.message_count'] = prepared.length;
    const span = this.#tracer.startSpan(`send ${stream}`, { kind: api.SpanKind.PRODUCER, attributes });
    if (span.isRecording()) {
      const sc = span.spanContext();
      const state = sc.traceState?.serialize() ?? '';
      injectTraceContext(prepared, { traceparent: formatTraceparent(sc.traceId, sc.spanId, sc.traceFlags), tracestate: state === '' ? null : state }, limits);
    }
    return (outcomes, error) => {
      const common = { 'messaging.system': SYSTEM, 'messaging.destination.name': stream };
      if (error !== undefined) {
        const type = errorType(error);
        span.setAttribute('error.type', type);
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: messageOf(error) });
        this.#operationDuration.record(seconds(started), { ...common, 'messaging.operation.type': 'send', 'messaging.operation.name': 'send', 'error.type': type });
      } else {
        this.#operationDuration.record(seconds(started), { ...common, 'messaging.operation.type': 'send', 'messaging.operation.name': 'send' });
        if (outcomes) {
          if (outcomes.length === 1) {
            span.setAttribute('messaging.message.id', outcomes[0]!.event.id);
            span.setAttribute('messaging.destination.partition.id', String(outcomes[0]!.event.partition));
          }
          this.#sent.add(outcomes.length, common);
        }
      }
      span.end();
    };
  }

  /**
   * Fetch latency always; a `receive` span only for a fetch that returned
   * leases or failed: an idle consumer polls several times a second, and
   * an empty poll is not worth a span.
   */
  receive(stream: string, group: string, consumerId: string): Finish<Lease<unknown>[]> | undefined {
    // Nothing would be recorded: no meter, and the receive span would be a no-op.
    if (!this.#metering && !this.#tracingOn()) return undefined;
    const startedAt = Date.now();
    const started = performance.now();
    return (leases, error) => {
      const durationS = seconds(started);
      const common = {
        'messaging.system': SYSTEM,
        'messaging.destination.name': stream,
        'messaging.consumer.group.name': group,
      };
      const type = error === undefined ? null : errorType(error);
      this.#operationDuration.record(durationS, {
        ...common,
        'messaging.operation.type': 'receive',
        'messaging.operation.name': 'fetch',
        ...(type === null ? {} : { 'error.type': type }),
      });
      const count = leases?.length ?? 0;
      if (count > 0) {
        const perPartition = new Map<number, number>();
        for (const lease of leases!) perPartition.set(lease.event.partition, (perPartition.get(lease.event.partition) ?? 0) + 1);
        for (const [partition, n] of perPartition) {
          this.#consumed.add(n, { ...common, 'messaging.destination.partition.id': String(partition) });
        }
      }
      if (count === 0 && type === null) return;
      const span = this.#tracer.startSpan(`receive ${stream}`, {
        kind: this.#api.SpanKind.CLIENT,
        startTime: startedAt,
        attributes: {
          ...common,
          'messaging.operation.type': 'receive',
          'messaging.operation.name': 'fetch',
          'messaging.client.id': consumerId,
          'messaging.batch.message_count': count,
        },
      });
      if (type !== null) {
        span.setAttribute('error.type', type);
        span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message: messageOf(error) });
      }
      span.end(startedAt + durationS * 1000);
    };
  }

  /** Settle latency and the settled counter, per backend call (the producer coalesces many settles into one). */
  settle(ops: SettleOp[]): Finish<SettleResult[]> | undefined {
    if (!this.#metering) return undefined;
    const started = performance.now();
    return (results, error) => {
      const durationS = seconds(started);
      const first = ops[0];
      if (!first) return;
      const type = error === undefined ? null : errorType(error);
      this.#operationDuration.record(durationS, {
        'messaging.system': SYSTEM,
        'messaging.destination.name': first.stream,
        'messaging.consumer.group.name': first.group,
        'messaging.operation.type': 'settle',
        'messaging.operation.name': ops.every((op) => op.kind === first.kind) ? first.kind : 'settle',
        ...(type === null ? {} : { 'error.type': type }),
      });
      if (!results) return;
      // One add per (stream, group, kind) of the call, not one per op: the
      // SDK hashes the attributes of every add, and a coalesced call holds hundreds.
      // A call nearly always holds one (stream, group, kind): the last op's
      // entry is compared before a key is built.
      const counts = new Map<string, { op: SettleOp; n: number }>();
      let last: { op: SettleOp; n: number } | null = null;
      ops.forEach((op, i) => {
        if (!results[i]?.ok) return;
        if (last !== null && last.op.kind === op.kind && last.op.stream === op.stream && last.op.group === op.group) {
          last.n++;
          return;
        }
        const key = `${op.kind}\u0000${op.stream}\u0000${op.group}`;
        last = counts.get(key) ?? null;
        if (last) last.n++;
        else counts.set(key, (last = { op, n: 1 }));
      });
      for (const { op, n } of counts.values()) {
        this.#settled.add(n, {
          'messaging.system': SYSTEM,
          'messaging.destination.name': op.stream,
          'messaging.consumer.group.name': op.group,
          'messaging.operation.name': op.kind,
        });
      }
    };
  }

  /**
   * The `process` span of one lease, a child of the context its event
   * carries (so the trace reads append → wait in the log → handler →
   * settle), and the `settle` span after it. `null` when nothing would be
   * recorded (no tracer, context manager or meter provider registered): the
   * caller then runs the lease with no scope, as without telemetry.
   */
  process(lease: Lease<unknown>): ProcessScope | null {
    const api = this.#api;
    if (!this.#tracingOn()) return this.#metering ? this.#untraced(lease) : null;
    const remote = remoteContext(api, lease);
    const parent = remote ? api.trace.setSpanContext(api.context.active(), remote) : api.context.active();
    const attributes = leaseAttributes(lease, 'process');
    const span = this.#tracer.startSpan(`process ${lease.stream}`, { kind: api.SpanKind.CONSUMER, attributes }, parent);
    const active = api.trace.setSpan(parent, span);
    const recording = span.isRecording();
    const started = performance.now();
    let settleSpan: OtelApi.Span | null = null;
    return {
      run: (fn) => api.context.with(active, fn),
      handled: (kind, failure) => {
        if (failure !== undefined) {
          span.setAttribute('error.type', errorType(failure));
          span.setStatus({ code: api.SpanStatusCode.ERROR, message: messageOf(failure) });
          if (failure instanceof Error) span.recordException(failure);
        }
        this.#recordProcess(lease, started, failure);
        span.end();
        if (!recording || kind === null) return;
        settleSpan = this.#tracer.startSpan(`${kind} ${lease.stream}`, { kind: api.SpanKind.CLIENT, attributes: leaseAttributes(lease, 'settle', kind) }, active);
      },
      settled: () => {
        settleSpan?.end();
        settleSpan = null;
      },
    };
  }

  /**
   * Whether a process span could matter: a tracer provider is registered,
   * or a context manager that would carry the event's trace context into the
   * handler. Neither changes often, so it is looked up again at most once a
   * second of the rheo's clock. Without them, the spans, contexts and
   * attribute objects of every lease were all no-ops, and made up most of
   * the per-lease telemetry cost.
   */
  #tracingOn(): boolean {
    const now = this.#clock.now();
    if (now >= this.#probeAt) {
      this.#probeAt = now + PROBE_INTERVAL_MS;
      this.#tracing = tracerRegistered(this.#api) || contextManagerRegistered(this.#api);
    }
    return this.#tracing;
  }

  /** A lease's scope while nothing traces: its process duration is still measured. */
  #untraced(lease: Lease<unknown>): ProcessScope {
    const started = performance.now();
    return {
      run: (fn) => fn(),
      handled: (_kind, failure) => this.#recordProcess(lease, started, failure),
      settled: () => undefined,
    };
  }

  /** `messaging.process.duration` of one lease's handler run. */
  #recordProcess(lease: Lease<unknown>, started: number, failure: unknown): void {
    const metricAttributes: OtelApi.Attributes = {
      'messaging.system': SYSTEM,
      'messaging.destination.name': lease.stream,
      'messaging.consumer.group.name': lease.group,
      'messaging.operation.name': 'process',
    };
    if (failure !== undefined) metricAttributes['error.type'] = errorType(failure);
    this.#processDuration.record(seconds(started), metricAttributes);
  }

  /** The `process` span of one batch: linked to every lease's producer context (a batch has many parents). */
  processBatch(leases: Lease<unknown>[]): { run<R>(fn: () => R): R; handled(failure?: unknown): void } {
    const api = this.#api;
    const links: OtelApi.Link[] = [];
    for (const lease of leases) {
      const remote = remoteContext(api, lease);
      if (remote) links.push({ context: remote, attributes: { 'messaging.message.id': lease.event.id } });
    }
    const first = leases[0]!;
    const span = this.#tracer.startSpan(`process ${first.stream}`, {
      kind: api.SpanKind.CONSUMER,
      links,
      attributes: {
        'messaging.system': SYSTEM,
        'messaging.operation.type': 'process',
        'messaging.operation.name': 'process',
        'messaging.destination.name': first.stream,
        'messaging.consumer.group.name': first.group,
        'messaging.batch.message_count': leases.length,
      },
    });
    const active = api.trace.setSpan(api.context.active(), span);
    const started = performance.now();
    return {
      run: (fn) => api.context.with(active, fn),
      handled: (failure) => {
        const metricAttributes: OtelApi.Attributes = {
          'messaging.system': SYSTEM,
          'messaging.destination.name': first.stream,
          'messaging.consumer.group.name': first.group,
          'messaging.operation.name': 'process',
        };
        if (failure !== undefined) {
          const type = errorType(failure);
          span.setAttribute('error.type', type);
          span.setStatus({ code: api.SpanStatusCode.ERROR, message: messageOf(failure) });
          metricAttributes['error.type'] = type;
        }
        this.#processDuration.record(seconds(started), metricAttributes);
        span.end();
      },
    };
  }

  async #collect(result: OtelApi.BatchObservableResult): Promise<void> {
    const groups = new Map<string, { stream: string; group: string; held: number }>();
    for (const holder of this.#holders) {
      const key = JSON.stringify([holder.stream, holder.group]);
      const entry = groups.get(key) ?? { stream: holder.stream, group: holder.group, held: 0 };
      entry.held += holder.inflightCount;
      groups.set(key, entry);
    }
    const owned = new Map<string, { stream: string; group: string; n: number }>();
    for (const owner of this.#owners) {
      const key = JSON.stringify([owner.stream, owner.group]);
      const entry = owned.get(key) ?? { stream: owner.stream, group: owner.group, n: 0 };
      entry.n += owner.ownedCount;
      owned.set(key, entry);
    }
    // The SDK keeps reporting a series' last value after its callback stops
    // observing it, so a group whose consumers all stopped ends at 0, not at
    // what it owned before.
    for (const [key, { stream, group }] of this.#ownedGroups) {
      if (!owned.has(key)) owned.set(key, { stream, group, n: 0 });
    }
    this.#ownedGroups = new Map();
    for (const [key, { stream, group, n }] of owned) {
      result.observe(this.#ownedGauge, n, { 'messaging.system': SYSTEM, 'messaging.destination.name': stream, 'messaging.consumer.group.name': group });
      if (n > 0) this.#ownedGroups.set(key, { stream, group });
    }
    const now = this.#clock.now();
    await Promise.all(
      [...groups.values()].map(async ({ stream, group, held }) => {
        const common = { 'messaging.system': SYSTEM, 'messaging.destination.name': stream, 'messaging.consumer.group.name': group };
        result.observe(this.#heldGauge, held, common);
        let report: LagReport;
        try {
          report = await this.#lag(stream, group);
        } catch {
          return; // an unreachable store leaves the lag unobserved this round; never an error in the exporter
        }
        for (const [partition, p] of Object.entries(report.partitions)) {
          const attributes = { ...common, 'messaging.destination.partition.id': partition };
          result.observe(this.#lagGauge, p.lag, attributes);
          const oldest = p.oldestUnsettledAt === null ? now : new Date(p.oldestUnsettledAt).getTime();
          result.observe(this.#ageGauge, Math.max(0, now - oldest) / 1000, attributes);
        }
      }),
    );
  }
}

/**
 * Which telemetry a facade, producer or settler reports to, without a public
 * property on any of them: producers and sinks find it through what they
 * were built from.
 */
const registry = new WeakMap<object, RheoTelemetry>();

export function attachTelemetry(owner: object, telemetry: RheoTelemetry | null | undefined): void {
  if (telemetry) registry.set(owner, telemetry);
}

export function telemetryOf(owner: object): RheoTelemetry | null {
  return registry.get(owner) ?? null;
}

/** A `RheoTelemetry` when `@opentelemetry/api` is installed, else `null` (and nothing was loaded). */
export function createTelemetry(clock: Clock, lag: (stream: string, group: string) => Promise<LagReport>): RheoTelemetry | null {
  const api = loadApi();
  return api === null ? null : new RheoTelemetry(api, clock, lag);
}
