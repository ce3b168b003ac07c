// Child process for otel-absent.test.ts. argv[2]: 'absent' makes
// `@opentelemetry/api` unresolvable, as in an application that never installed
// it; 'no-provider' leaves it installed with no provider registered.
import Module from 'node:module';
import { createRheo } from '../../src/rheo.js';

const mode = process.argv[2];
const resolver = Module as unknown as { _resolveFilename(request: string, ...rest: unknown[]): string };
const original = resolver._resolveFilename;
const attempts: string[] = [];
resolver._resolveFilename = function (request: string, ...rest: unknown[]): string {
  if (request.startsWith('@opentelemetry/')) {
    attempts.push(request);
    if (mode === 'absent') throw Object.assign(new Error(`Cannot find module '${request}'`), { code: 'MODULE_NOT_FOUND' });
  }
  return original.call(this, request, ...rest);
};

const rheo = createRheo({ defaults: { pollMs: 5 } });
await rheo.createStream('s');
await rheo.createGroup('s', 'g');
const event = await rheo.append('s', { payload: 1 });
const seen: unknown[] = [];
const consumer = rheo.consume({ stream: 's', group: 'g', handler: (e) => void seen.push(e.metadata) });
while (consumer.stats().acked < 1) await new Promise((resolve) => setTimeout(resolve, 5));
await consumer.stop();
await rheo.close();
const loaded = Object.keys((Module as unknown as { _cache: Record<string, unknown> })._cache).filter((p) => p.includes('@opentelemetry'));
process.stdout.write(`${JSON.stringify({ metadata: event.metadata, seen, attempts, loaded: loaded.length })}\n`);
