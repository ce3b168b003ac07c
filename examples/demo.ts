/**
 * The main demo: a two-partition stream, two independent consumer groups,
 * leases, a retry, lag and frontiers.
 *
 *   npm run demo                                   # in-memory backend
 *   RHEO_DATABASE_URL=postgres://... npm run demo  # PostgreSQL (schema "rheo_demo")
 */
import { createRheo, type Rheo } from '../src/index.js';

async function connect(): Promise<Rheo> {
  const arg = process.argv.find((a) => a.startsWith('--database-url='));
  const url = arg ? arg.slice('--database-url='.length) : process.env.RHEO_DATABASE_URL;
  if (!url) return createRheo();
  const { postgresBackend } = await import('../src/postgres.js');
  return createRheo({ backend: postgresBackend({ connectionString: url, schema: 'rheo_demo' }) });
}

async function main(): Promise<void> {
  const rheo = await connect();
  try {
    await rheo.migrate();
    console.log(`backend: ${rheo.backend.name}`);
    const stream = `demo-orders-${Date.now()}`;
    await rheo.createStream(stream, { partitions: 2 });
    await rheo.createGroup(stream, 'billing');
    await rheo.createGroup(stream, 'shipping');

    const events = await rheo.appendBatch(
      stream,
      ['alice', 'bob', 'carol', 'dave', 'erin', 'frank'].map((customer, i) => ({
        type: 'order.placed',
        key: customer,
        payload: { order: i + 1, customer, total: 10 * (i + 1) },
      })),
    );
    console.log(`\nappended ${events.length} events to "${stream}":`);
    for (const e of events) console.log(`  p${e.partition} #${e.sequence}  key=${e.key}  ${JSON.stringify(e.payload)}`);

    // billing: take three leases, ack two, nack one (it comes back with attempt 2)
    const first = await rheo.fetch(stream, 'billing', { limit: 3, consumerId: 'billing-1' });
    console.log('\nbilling leased:');
    for (const l of first) console.log(`  p${l.event.partition} #${l.event.sequence} attempt=${l.attempt} lease=${l.leaseId.slice(0, 8)}…`);
    await rheo.ackMany(first.slice(0, 2));
    await rheo.nack(first[2]!, 'payment provider timed out');
    console.log('  acked 2, nacked 1');
    printLag('billing (mid-way)', await rheo.lag(stream, 'billing'));

    let settled = 2;
    while (settled < events.length) {
      const leases = await rheo.fetch(stream, 'billing', { limit: 10, consumerId: 'billing-1' });
      for (const l of leases) {
        if (l.attempt > 1) console.log(`  retry: p${l.event.partition} #${l.event.sequence} attempt=${l.attempt}`);
      }
      await rheo.ackMany(leases);
      settled += leases.length;
    }
    printLag('billing (done)', await rheo.lag(stream, 'billing'));

    // shipping reads the same events independently
    const shipping = await rheo.fetch(stream, 'shipping', { limit: 100, consumerId: 'shipping-1' });
    console.log(`\nshipping leased ${shipping.length} of the same events; acking all`);
    await rheo.ackMany(shipping);
    printLag('shipping', await rheo.lag(stream, 'shipping'));
  } finally {
    await rheo.close();
  }
}

function printLag(label: string, lag: Awaited<ReturnType<Rheo['lag']>>): void {
  console.log(`lag ${label}: total ${lag.lag}`);
  for (const [p, info] of Object.entries(lag.partitions)) {
    console.log(`  p${p}: frontier ${info.frontier} / high watermark ${info.highWatermark}, lag ${info.lag}`);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
