import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';
import type { Histogram } from '@opentelemetry/sdk-metrics';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { JsonValue, Lease } from '../../src/core/types.js';
import { memoryBackend } from '../../src/backends/memory/memory-backend.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { createBatchSink } from '../../src/sinks/batch-sink.js';
import { createLeaseSink } from '../../src/sinks/lease-sink.js';
import { backendFactories } from '../support/backends.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { readOne, until } from '../streams/support/wait.js';
import { parentOf, registerOtel, total } from './otel-support.js';

const otel = registerOtel();
const tracer = trace.getTracer('test');

function spansNamed(name: string): ReadableSpan[] {
  return otel.spans.getFinishedSpans().filter((s) => s.name === name);
}

function histogramCount(points: Array<{ attributes: Record<string, unknown>; value: unknown }> | undefined, match: Record<string, unknown>): number {
  let count = 0;
  for (const p of points ?? []) if (Object.entries(match).every(([k, v]) => p.attributes[k] === v)) count += (p.value as Histogram).count;
  return count;
}

for (const factory of backendFactories) {
  describe(`OpenTelemetry (${factory.name})`, () => {
    let rheo: Rheo;
    let clock: ManualClock;
    beforeEach(async () => {
      otel.spans.reset();
      await otel.collect(); // cumulative metrics: tests compare against what they read first
      clock = new ManualClock(Date.UTC(2026, 0, 1));
      rheo = createRheo({ backend: await factory.make(clock), clock, defaults: { pollMs: 5 } });
      await rheo.createStream('orders', { partitions: 2 });
      await rheo.createGroup('orders', 'billing');
    });
    afterEach(async () => {
      await rheo.close();
    });

    it('append → handler → settle is one trace: send, process (child of send), settle (child of process)', async () => {
      const before = await otel.collect();
      const request = tracer.startSpan('http request');
      const single = await context.with(trace.setSpan(context.active(), request), () =>
        rheo.append('orders', { type: 'paid', key: 'a', payload: { n: 1 } }),
      );
      request.end();
      const batch = await rheo.appendBatch('orders', [
        { type: 'flaky', key: 'b', payload: { n: 2 } },
        { type: 'paid', key: 'c', payload: { n: 3 }, metadata: { origin: 'test' } },
      ]);

      // W3C trace context rides in the metadata, under `traceparent`.
      const [sendSingle, sendBatch] = spansNamed('send orders');
      expect(sendSingle!.kind).toBe(SpanKind.PRODUCER);
      expect(parentOf(sendSingle!)).toBe(request.spanContext().spanId);
      expect(sendSingle!.attributes).toMatchObject({
        'messaging.system': 'rheo',
        'messaging.operation.type': 'send',
        'messaging.destination.name': 'orders',
        'messaging.message.id': single.id,
        'messaging.destination.partition.id': String(single.partition),
      });
      expect(sendBatch!.attributes['messaging.batch.message_count']).toBe(2);
      const ctx = (s: ReadableSpan) => `00-${s.spanContext().traceId}-${s.spanContext().spanId}-01`;
      expect(single.metadata).toEqual({ traceparent: ctx(sendSingle!) });
      expect(batch[0]!.metadata).toEqual({ traceparent: ctx(sendBatch!) });
      expect(batch[1]!.metadata).toEqual({ origin: 'test', traceparent: ctx(sendBatch!) });
      const stored = await rheo.read('orders', { partition: single.partition });
      expect(stored.find((e) => e.id === single.id)?.metadata).toEqual({ traceparent: ctx(sendSingle!) });

      const inner: ReadableSpan['spanContext'][] = [];
      const consumer = rheo.consume({
        stream: 'orders',
        group: 'billing',
        concurrency: 3,
        handler: (event, { attempt }) => {
          const work = tracer.startSpan('work');
          inner.push(() => work.spanContext());
          work.end();
          if (event.type === 'flaky' && attempt === 1) throw new Error('flaky once');
        },
      });
      await until(() => consumer.stats().acked === 3, 'three acks');
      await consumer.stop();

      const sends = new Map([single, ...batch].map((e, i) => [e.id, i === 0 ? sendSingle! : sendBatch!]));
      const processes = spansNamed('process orders');
      expect(processes).toHaveLength(4); // three events, one of them twice
      for (const p of processes) {
        expect(p.kind).toBe(SpanKind.CONSUMER);
        const send = sends.get(p.attributes['messaging.message.id'] as string)!;
        expect(p.spanContext().traceId).toBe(send.spanContext().traceId);
        expect(parentOf(p)).toBe(send.spanContext().spanId);
        expect(p.attributes).toMatchObject({
          'messaging.system': 'rheo',
          'messaging.operation.type': 'process',
          'messaging.destination.name': 'orders',
          'messaging.consumer.group.name': 'billing',
          'messaging.client.id': consumer.consumerId,
        });
      }
      const failed = processes.filter((p) => p.status.code === SpanStatusCode.ERROR);
      expect(failed).toHaveLength(1);
      expect(failed[0]!.attributes).toMatchObject({ 'rheo.delivery.attempt': 1, 'error.type': 'Error', 'messaging.message.id': batch[0]!.id });
      // The single event was appended inside the request: its whole path is the request's trace.
      expect(processes.filter((p) => p.spanContext().traceId === request.spanContext().traceId)).toHaveLength(1);

      const settles = [...spansNamed('ack orders'), ...spansNamed('nack orders')];
      expect(spansNamed('ack orders')).toHaveLength(3);
      expect(spansNamed('nack orders')).toHaveLength(1);
      const processIds = new Set(processes.map((p) => p.spanContext().spanId));
      for (const s of settles) {
        expect(processIds.has(parentOf(s)!)).toBe(true);
        expect(s.attributes['messaging.operation.type']).toBe('settle');
      }
      // A span the handler starts is a child of its process span.
      expect(inner).toHaveLength(4);
      const processSpanIds = processes.map((p) => p.spanContext().spanId);
      for (const work of spansNamed('work')) expect(processSpanIds).toContain(parentOf(work));

      const receives = spansNamed('receive orders');
      expect(receives.length).toBeGreaterThan(0);
      expect(receives.reduce((n, r) => n + (r.attributes['messaging.batch.message_count'] as number), 0)).toBe(4);

      const after = await otel.collect();
      const delta = (name: string, match: Record<string, unknown> = {}) => total(after.get(name), match) - total(before.get(name), match);
      expect(delta('messaging.client.sent.messages', { 'messaging.destination.name': 'orders' })).toBe(3);
      expect(delta('messaging.client.consumed.messages', { 'messaging.consumer.group.name': 'billing' })).toBe(4);
      expect(delta('rheo.client.settled.messages', { 'messaging.operation.name': 'ack' })).toBe(3);
      expect(delta('rheo.client.settled.messages', { 'messaging.operation.name': 'nack' })).toBe(1);
      const hdelta = (name: string, match: Record<string, unknown>) =>
        histogramCount(after.get(name), match) - histogramCount(before.get(name), match);
      expect(hdelta('messaging.process.duration', { 'messaging.consumer.group.name': 'billing' })).toBe(4);
      expect(hdelta('messaging.process.duration', { 'error.type': 'Error' })).toBe(1);
      expect(hdelta('messaging.client.operation.duration', { 'messaging.operation.type': 'send' })).toBe(2);
      expect(hdelta('messaging.client.operation.duration', { 'messaging.operation.type': 'receive' })).toBeGreaterThanOrEqual(receives.length);
      expect(hdelta('messaging.client.operation.duration', { 'messaging.operation.type': 'settle' })).toBeGreaterThan(0);
    });

    it('lag per partition (count and oldest-unsettled age) and leases held are observed while a producer runs', async () => {
      const timers = new ManualTimers(clock);
      await rheo.appendBatch('orders', [1, 2, 3].map((n) => ({ payload: n, partition: 0 })));
      await rheo.append('orders', { payload: 4, partition: 1 });
      clock.advance(5_000);
      await rheo.append('orders', { payload: 5, partition: 1 });
      clock.advance(2_000);
      const producer = rheo.producer({ stream: 'orders', group: 'billing', maxDemand: 2, partitions: [0], timers });
      const first = await readOne<Lease>(producer);
      await until(() => producer.inflightCount === 2, 'two leases held');
      const m = await otel.collect();
      const at = (partition: string) => ({ 'messaging.consumer.group.name': 'billing', 'messaging.destination.partition.id': partition });
      expect(total(m.get('rheo.consumer.lag'), at('0'))).toBe(3);
      expect(total(m.get('rheo.consumer.lag'), at('1'))).toBe(2);
      expect(total(m.get('rheo.consumer.lag.age'), at('0'))).toBe(7);
      expect(total(m.get('rheo.consumer.lag.age'), at('1'))).toBe(7);
      expect(total(m.get('rheo.consumer.leases.held'), { 'messaging.consumer.group.name': 'billing' })).toBe(2);
      await producer.ack(first);
      const second = await readOne<Lease>(producer);
      await producer.ack(second);
      const later = await otel.collect();
      expect(total(later.get('rheo.consumer.lag'), at('0'))).toBe(1);
      // The third event of partition 0 was fetched into the freed slots.
      await until(() => producer.inflightCount === 1, 'the third lease held');
      expect(total((await otel.collect()).get('rheo.consumer.leases.held'), { 'messaging.consumer.group.name': 'billing' })).toBe(1);
      await producer.close();
    });

    it('a batch sink runs one process span linked to the producer context of every lease', async () => {
      const events = await rheo.appendBatch('orders', [{ payload: 1 }, { payload: 2 }]);
      const third = await rheo.append('orders', { payload: 3 });
      const timers = new ManualTimers(clock);
      const producer = rheo.producer<JsonValue>({ stream: 'orders', group: 'billing', maxDemand: 3, timers });
      let handled = 0;
      const sink = createBatchSink<JsonValue>({
        producer,
        batchSize: 3,
        handler: (leases) => {
          handled += leases.length;
        },
      });
      producer.pipe(sink);
      await until(() => handled === 3 && producer.inflightCount === 0, 'the batch settled');
      await producer.close();
      const [batchSpan] = spansNamed('process orders');
      expect(batchSpan!.attributes['messaging.batch.message_count']).toBe(3);
      const sendIds = otel.spans.getFinishedSpans().filter((s) => s.name === 'send orders').map((s) => s.spanContext().spanId);
      expect(batchSpan!.links.map((l) => l.context.spanId).sort()).toEqual(
        [sendIds[0], sendIds[0], sendIds[1]].sort(),
      );
      expect(batchSpan!.links.map((l) => l.attributes?.['messaging.message.id']).sort()).toEqual([...events, third].map((e) => e.id).sort());
    });

    it('a lease sink on a producer runs each handler in a process span under its send span, then a settle span', async () => {
      const [ok, bad] = await rheo.appendBatch('orders', [{ type: 'ok', payload: 1 }, { type: 'bad', payload: 2 }]);
      const timers = new ManualTimers(clock);
      const producer = rheo.producer<JsonValue>({ stream: 'orders', group: 'billing', maxDemand: 2, timers });
      const sink = createLeaseSink<JsonValue>({
        producer,
        concurrency: 2,
        handler: (lease) => (lease.event.type === 'bad' ? { reject: 'unusable' } : 'ack'),
      });
      producer.pipe(sink);
      await until(async () => (await rheo.lag('orders', 'billing')).lag === 0, 'both settled');
      await until(() => spansNamed('ack orders').length + spansNamed('reject orders').length === 2, 'both settle spans ended');
      await producer.close();
      const [send] = spansNamed('send orders');
      const processes = spansNamed('process orders');
      expect(processes.map((p) => p.attributes['messaging.message.id']).sort()).toEqual([ok!.id, bad!.id].sort());
      for (const p of processes) expect(parentOf(p)).toBe(send!.spanContext().spanId);
      const reject = spansNamed('reject orders')[0]!;
      expect(parentOf(reject)).toBe(processes.find((p) => p.attributes['messaging.message.id'] === bad!.id)!.spanContext().spanId);
    });

    it("a consumer's reject and plain retry end their process spans without an error, then settle as reject and nack", async () => {
      const [bad, later] = await rheo.appendBatch('orders', [
        { type: 'bad', key: 'a', payload: 1 },
        { type: 'later', key: 'b', payload: 2 },
      ]);
      const consumer = rheo.consume({
        stream: 'orders',
        group: 'billing',
        handler: (event, { attempt }) => {
          if (event.type === 'bad') return { reject: 'unusable' };
          return attempt === 1 ? { retry: 'not yet' } : 'ack';
        },
      });
      await until(() => consumer.stats().acked === 1 && consumer.stats().deadLettered === 1, 'one ack, one dead letter');
      await consumer.stop();
      const processes = spansNamed('process orders');
      expect(processes).toHaveLength(3);
      expect(processes.map((p) => p.status.code)).toEqual([SpanStatusCode.UNSET, SpanStatusCode.UNSET, SpanStatusCode.UNSET]);
      const settledAs = (name: string) => spansNamed(name).map((s) => s.attributes['messaging.message.id']);
      expect(settledAs('reject orders')).toEqual([bad!.id]);
      expect(settledAs('nack orders')).toEqual([later!.id]);
      expect(settledAs('ack orders')).toEqual([later!.id]);
      for (const name of ['reject orders', 'nack orders', 'ack orders']) {
        const [settle] = spansNamed(name);
        expect(processes.map((p) => p.spanContext().spanId)).toContain(parentOf(settle!));
      }
    });

    it('an event too large for the trace context is stored without it, never refused', async () => {
      const small = createRheo({ backend: await factory.make(clock), clock, limits: { maxEventBytes: 60 } });
      try {
        await small.createStream('tiny');
        const payload = 'x'.repeat(50); // 52 bytes + {} = 54: fits, but not with a traceparent
        const event = await small.append('tiny', { payload });
        expect(event.metadata).toEqual({});
        const roomy = await small.append('tiny', { payload: 1 });
        expect(Object.keys(roomy.metadata)).toEqual([]); // 1 + {} + 70 bytes of context > 60 too
        const kept = await small.append('tiny', { payload: 1, metadata: { traceparent: 'mine' } });
        expect(kept.metadata).toEqual({ traceparent: 'mine' });
      } finally {
        await small.close();
      }
    });

    it('telemetry: false reports nothing', async () => {
      const quiet = createRheo({ backend: await factory.make(clock), clock, telemetry: false });
      try {
        await quiet.createStream('quiet');
        const event = await quiet.append('quiet', { payload: 1 });
        expect(event.metadata).toEqual({});
        expect(otel.spans.getFinishedSpans()).toEqual([]);
        expect(() => createRheo({ telemetry: 'yes' as unknown as boolean })).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
      } finally {
        await quiet.close();
      }
    });
  });
}

describe('OpenTelemetry of partition ownership (memory)', () => {
  it('counts rebalances and observes the partitions owned while a partition-mode consumer runs', async () => {
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const rheo = createRheo({ backend: memoryBackend({ clock }), clock, defaults: { pollMs: 5 } });
    try {
      await rheo.createStream('ledger', { partitions: 3 });
      await rheo.createGroup('ledger', 'audit');
      const group = { 'messaging.system': 'rheo', 'messaging.destination.name': 'ledger', 'messaging.consumer.group.name': 'audit' };
      const before = total((await otel.collect()).get('rheo.consumer.rebalances'), group);
      const first = rheo.consume({ stream: 'ledger', group: 'audit', assignment: 'partitions', heartbeatMs: 10, handler: () => {} });
      await until(() => first.stats().owned.length === 3, 'the first member owns every partition');
      const m = await otel.collect();
      expect(total(m.get('rheo.consumer.rebalances'), group) - before).toBe(1);
      expect(total(m.get('rheo.consumer.partitions.owned'), group)).toBe(3);
      await first.stop();
      const stopped = await otel.collect();
      expect(total(stopped.get('rheo.consumer.partitions.owned'), group)).toBe(0);
      const second = rheo.consume({ stream: 'ledger', group: 'audit', assignment: 'partitions', heartbeatMs: 10, handler: () => {} });
      await until(() => second.stats().owned.length === 3, 'the second member owns every partition');
      const after = await otel.collect();
      expect(total(after.get('rheo.consumer.rebalances'), group) - before).toBe(2);
      expect(total(after.get('rheo.consumer.partitions.owned'), group)).toBe(3);
      await second.stop();
    } finally {
      await rheo.close();
    }
  });
});
