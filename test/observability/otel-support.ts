import { AsyncLocalStorage } from 'node:async_hooks';
import { ROOT_CONTEXT, context, metrics, trace, type Context, type ContextManager } from '@opentelemetry/api';
import { MeterProvider, MetricReader, type DataPoint, type ResourceMetrics } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

/**
 * The SDK's AsyncLocalStorage context manager lives in a package this
 * project does not install; this is the same idea in a few lines, so that a
 * span started inside a handler finds the process span as its parent.
 */
export class AsyncLocalContextManager implements ContextManager {
  readonly #storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.#storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.#storage.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.#storage.disable();
    return this;
  }
}

/** A metric reader collected on demand: tests read the values at the moment they choose. */
class OnDemandReader extends MetricReader {
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}
}

export interface OtelHarness {
  spans: InMemorySpanExporter;
  /** Collects every metric now: name → data points. */
  collect(): Promise<Map<string, DataPoint<unknown>[]>>;
}

/** Registers an SDK tracer and meter provider globally (once per test file: vitest isolates files). */
export function registerOtel(): OtelHarness {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] });
  trace.setGlobalTracerProvider(tracerProvider);
  context.setGlobalContextManager(new AsyncLocalContextManager());
  return { spans, collect: registerMeter() };
}

/** Registers an SDK meter provider alone; returns what collects its metrics now. */
export function registerMeter(): OtelHarness['collect'] {
  const reader = new OnDemandReader();
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  return async () => {
    const { resourceMetrics, errors } = await reader.collect();
    if (errors.length > 0) throw errors[0];
    return byName(resourceMetrics);
  };
}

function byName(resourceMetrics: ResourceMetrics): Map<string, DataPoint<unknown>[]> {
  const out = new Map<string, DataPoint<unknown>[]>();
  for (const scope of resourceMetrics.scopeMetrics) {
    if (scope.scope.name !== 'rheo') continue;
    for (const metric of scope.metrics) out.set(metric.descriptor.name, metric.dataPoints as DataPoint<unknown>[]);
  }
  return out;
}

/** Sum of the points whose attributes include `match`. */
export function total(points: DataPoint<unknown>[] | undefined, match: Record<string, unknown> = {}): number {
  let sum = 0;
  for (const point of points ?? []) {
    if (Object.entries(match).every(([k, v]) => point.attributes[k] === v)) sum += point.value as number;
  }
  return sum;
}

export function parentOf(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId;
}
