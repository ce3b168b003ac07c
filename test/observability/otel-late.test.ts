import { context, metrics, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import { memoryBackend } from '../../src/backends/memory/memory-backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { createRheo } from '../../src/rheo.js';
import { until } from '../streams/support/wait.js';
import { AsyncLocalContextManager, registerMeter, total } from './otel-support.js';

/**
 * While no tracer provider and no context manager are registered, a lease's
 * process span would be a no-op, and rheo skips it (and, with no meter
 * provider either, every per-lease measurement). These check what that
 * must not lose: spans once a provider is registered later, the event's
 * trace context inside the handler when only a context manager is, and the
 * metrics when only a meter provider is.
 * (Its own file: the providers are process-global.)
 */
const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const TRACEPARENT = `00-${TRACE_ID}-b7ad6b7169203331-01`;

async function handleOne(rheo: ReturnType<typeof createRheo>, payload: number): Promise<string | undefined> {
  let seen: string | undefined;
  let payloadSeen: unknown;
  const consumer = rheo.consume({
    stream: 's',
    group: 'g',
    handler: (event) => {
      payloadSeen = event.payload;
      seen = trace.getSpanContext(context.active())?.traceId;
    },
  });
  await until(() => consumer.stats().acked === 1, 'one ack');
  await consumer.stop();
  expect(payloadSeen).toBe(payload);
  return seen;
}

describe('telemetry while nothing traces', () => {
  afterEach(() => {
    trace.disable();
    context.disable();
    metrics.disable();
  });

  it('a context manager alone still carries the event trace context into the handler', async () => {
    context.setGlobalContextManager(new AsyncLocalContextManager());
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const rheo = createRheo({ backend: memoryBackend({ clock }), clock });
    try {
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await rheo.append('s', { payload: 1, metadata: { traceparent: TRACEPARENT } });
      expect(await handleOne(rheo, 1)).toBe(TRACE_ID);
    } finally {
      await rheo.close();
    }
  });

  it('a meter provider alone still gets the process duration, fetch, settle and consumed metrics of rheo.consume', async () => {
    const collect = registerMeter();
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const rheo = createRheo({ backend: memoryBackend({ clock }), clock });
    try {
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await rheo.append('s', { payload: 1 });
      expect(await handleOne(rheo, 1)).toBeUndefined();
      const found = await collect();
      const process = found.get('messaging.process.duration') as Array<{ value: { count: number } }> | undefined;
      expect(process?.reduce((n, point) => n + point.value.count, 0)).toBe(1);
      expect(total(found.get('messaging.client.consumed.messages'), { 'messaging.destination.name': 's' })).toBe(1);
      expect(total(found.get('rheo.client.settled.messages'), { 'messaging.operation.name': 'ack' })).toBe(1);
      const operations = (found.get('messaging.client.operation.duration') ?? []).map((point) => point.attributes['messaging.operation.name']);
      expect(operations).toEqual(expect.arrayContaining(['fetch', 'ack']));
    } finally {
      await rheo.close();
    }
  });

  it('a tracer provider registered after the first leases gets process spans within a second of the clock', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const rheo = createRheo({ backend: memoryBackend({ clock }), clock });
    const spans = new InMemorySpanExporter();
    try {
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await rheo.append('s', { payload: 1, metadata: { traceparent: TRACEPARENT } });
      expect(await handleOne(rheo, 1)).toBeUndefined();
      trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }));
      context.setGlobalContextManager(new AsyncLocalContextManager());
      clock.advance(1_000);
      await rheo.append('s', { payload: 2, metadata: { traceparent: TRACEPARENT } });
      expect(await handleOne(rheo, 2)).toBe(TRACE_ID);
      const process = spans.getFinishedSpans().filter((s) => s.name === 'process s');
      expect(process).toHaveLength(1);
      expect(process[0]!.spanContext().traceId).toBe(TRACE_ID);
    } finally {
      await rheo.close();
    }
  });
});
