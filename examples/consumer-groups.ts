/**
 * The core model in one run: a two-partition stream, two independent consumer
 * groups, leases with fencing tokens, a retry, lag and frontiers.
 */
import type { LagReport, Rheo } from '../src/index.js';
import { uniqueName, type Example, type Log } from './example-kit.js';

export interface ConsumerGroupsResult {
  appended: number;
  retriedAttempts: number[];
  billingLag: number;
  shippingLeased: number;
  shippingLag: number;
}

const CUSTOMERS = ['alice', 'bob', 'carol', 'dave', 'erin', 'frank'];

export async function run(rheo: Rheo, log: Log): Promise<ConsumerGroupsResult> {
  const stream = uniqueName('demo-orders');
  await rheo.createStream(stream, { partitions: 2 });
  await rheo.createGroup(stream, 'billing');
  await rheo.createGroup(stream, 'shipping');

  const events = await rheo.appendBatch(
    stream,
    CUSTOMERS.map((customer, i) => ({
      type: 'order.placed',
      key: customer, // routes with Kafka's murmur2 partitioner
      payload: { order: i + 1, customer, total: 10 * (i + 1) },
    })),
  );
  log(`appended ${events.length} events to ${stream}:`);
  for (const e of events) log(`  p${e.partition} #${e.sequence} key=${e.key} ${JSON.stringify(e.payload)}`);

  // billing: take three leases, ack two, nack one (it comes back with attempt 2)
  const first = await rheo.fetch(stream, 'billing', { limit: 3, consumerId: 'billing-1' });
  log('billing leased:');
  for (const l of first) log(`  p${l.event.partition} #${l.event.sequence} attempt=${l.attempt} lease=${l.leaseId.slice(0, 8)}…`);
  await rheo.ackMany(first.slice(0, 2));
  await rheo.nack(first[2]!, 'payment provider timed out');
  log('acked 2, nacked 1');
  logLag(log, 'billing (mid-way)', await rheo.lag(stream, 'billing'));

  const retriedAttempts: number[] = [];
  for (let settled = 2; settled < events.length; ) {
    const leases = await rheo.fetch(stream, 'billing', { limit: 10, consumerId: 'billing-1' });
    for (const l of leases) {
      if (l.attempt > 1) {
        retriedAttempts.push(l.attempt);
        log(`retry: p${l.event.partition} #${l.event.sequence} attempt=${l.attempt}`);
      }
    }
    await rheo.ackMany(leases);
    settled += leases.length;
  }
  const billing = await rheo.lag(stream, 'billing');
  logLag(log, 'billing (done)', billing);

  // shipping reads the same events independently
  const shipping = await rheo.fetch(stream, 'shipping', { limit: 100, consumerId: 'shipping-1' });
  log(`shipping leased ${shipping.length} of the same events; acking all`);
  await rheo.ackMany(shipping);
  const shippingLag = await rheo.lag(stream, 'shipping');
  logLag(log, 'shipping', shippingLag);

  return {
    appended: events.length,
    retriedAttempts,
    billingLag: billing.lag,
    shippingLeased: shipping.length,
    shippingLag: shippingLag.lag,
  };
}

function logLag(log: Log, label: string, lag: LagReport): void {
  log(`lag ${label}: total ${lag.lag}`);
  for (const [p, info] of Object.entries(lag.partitions)) {
    log(`  p${p}: frontier ${info.frontier} / high watermark ${info.highWatermark}, lag ${info.lag}`);
  }
}

export const example: Example<ConsumerGroupsResult> = {
  name: 'consumer-groups',
  description: 'two groups read one two-partition stream independently: leases, a retry, lag and frontiers',
  run,
};
