/**
 * What OpenTelemetry costs a consumer: 20 000 events through \`rheo.consume\`
 * (memory backend, concurrency 10, no-op handler), one warm-up and three
 * measured runs, median events/s. Run one mode per process, since providers
 * are registered globally:
 *
 *     npx tsx scripts/otel-overhead.ts off          # createRheo({ telemetry: false })
 *     npx tsx scripts/otel-overhead.ts noprovider   # API installed, nothing registered
 *     npx tsx scripts/otel-overhead.ts sdk          # SDK tracer (batch processor, no-op exporter) and meter
 */
import { metrics, trace } from '@opentelemetry/api';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { createRheo } from '../src/index.js';

const N = 20_000;
async function run(telemetry: boolean): Promise<number> {
  const rheo = createRheo({ telemetry, defaults: { pollMs: 5 } });
  await rheo.createStream('s');
  await rheo.createGroup('s', 'g');
  for (let i = 0; i < N; i += 500) await rheo.appendBatch('s', Array.from({ length: 500 }, (_, j) => ({ payload: { n: i + j } })));
  const started = performance.now();
  const consumer = rheo.consume({ stream: 's', group: 'g', concurrency: 10, maxDemand: 200, handler: () => {} });
  while (consumer.stats().acked < N) await new Promise((r) => setTimeout(r, 2));
  const s = (performance.now() - started) / 1000;
  await consumer.stop();
  await rheo.close();
  return N / s;
}
const mode = process.argv[2];
if (mode === 'sdk') {
  const exporter: SpanExporter = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} };
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] }));
  metrics.setGlobalMeterProvider(new MeterProvider());
}
await run(mode !== 'off'); // warm-up
const rates: number[] = [];
for (let i = 0; i < 3; i++) rates.push(await run(mode !== 'off'));
rates.sort((a, b) => a - b);
console.log(mode, 'events/s median', Math.round(rates[1]!), 'all', rates.map(Math.round).join(' '));
