/**
 * A script that loads the installed package through every entry point and
 * fails (exit code 1, reason on stderr) when an entry misbehaves. The same
 * body runs as ESM (`import()`) and as CommonJS (`require`), so both module
 * systems face identical checks. It reads RHEO_EXPECTED_EXPORTS (JSON: for
 * each entry point, the runtime export names its source declares) and
 * DATABASE_URL.
 */
export function entryCheckScript(system: 'esm' | 'cjs'): string {
  const load =
    system === 'esm'
      ? 'const load = (name) => import(name);\nconst { pipeline } = await import("node:stream/promises");'
      : 'const load = async (name) => require(name);\nconst { pipeline } = require("node:stream/promises");';
  const body = `
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };

const expectedByEntry = JSON.parse(process.env.RHEO_EXPECTED_EXPORTS);
const entries = {};
for (const [entry, expected] of Object.entries(expectedByEntry)) {
  const loaded = await load(entry);
  entries[entry] = loaded;
  const actual = Object.keys(loaded).filter((name) => name !== 'default' && name !== '__esModule');
  const missing = expected.filter((name) => loaded[name] === undefined);
  const extra = actual.filter((name) => !expected.includes(name));
  check(missing.length === 0, entry + ' lacks runtime exports: ' + missing.join(', '));
  check(extra.length === 0, entry + ' exports names its source does not: ' + extra.join(', '));
}
const main = entries['rheo'];
const postgres = entries['rheo/postgres'];
// A name two entries export must be the same object: one implementation, not one copy per entry.
for (const [entry, loaded] of Object.entries(entries)) {
  for (const name of Object.keys(loaded)) {
    if (entry !== 'rheo' && name in main) check(loaded[name] === main[name], entry + ' ' + name + ' is a second copy of rheo ' + name);
  }
}

// Errors raised behind rheo/postgres must be rheo's RheoError, with their codes intact.
const { createRheo, RheoError, isRheoError, createBatchSink } = main;
const rheo = createRheo({ backend: postgres.postgresBackend({ connectionString: process.env.DATABASE_URL }, { schema: 'entry_check' }) });
const codeOf = async (call) => {
  try {
    await call();
    return 'no error';
  } catch (error) {
    check(error instanceof RheoError, 'an error from rheo/postgres is not an instance of rheo RheoError: ' + String(error));
    return isRheoError(error) ? error.code : 'not a RheoError: ' + String(error);
  }
};
try {
  await rheo.migrate();
  await rheo.createStream('orders');
  const again = await codeOf(() => rheo.createStream('orders'));
  check(again === 'already_exists', 'createStream twice: expected already_exists, got ' + again);
  const missing = await codeOf(() => rheo.fetch('missing', 'billing'));
  check(missing === 'stream_not_found', 'fetch on a missing stream: expected stream_not_found, got ' + missing);
  await rheo.createGroup('orders', 'billing');
  await rheo.append('orders', { payload: { n: 1 } });
  const [lease] = await rheo.fetch('orders', 'billing', { limit: 1 });
  await rheo.ack(lease);
  const stale = await codeOf(() => rheo.ack(lease));
  check(stale === 'stale_lease', 'a second ack: expected stale_lease, got ' + stale);
} finally {
  await rheo.close();
}

// rheo/redis loads without ioredis (an optional peer this project does not
// install); the first call that needs Redis says what is missing.
const withoutIoredis = createRheo({ backend: entries['rheo/redis'].redisBackend({ url: 'redis://127.0.0.1:9' }) });
const noPeer = await codeOf(() => withoutIoredis.ping());
check(noPeer === 'unsupported', 'rheo/redis without ioredis: expected unsupported, got ' + noPeer);
await withoutIoredis.close();

// createBatchSink end to end on the memory backend.
const memory = createRheo();
await memory.createStream('clicks');
await memory.createGroup('clicks', 'warehouse');
await memory.appendBatch('clicks', [1, 2, 3, 4, 5].map((n) => ({ payload: { n } })));
const producer = memory.producer({ stream: 'clicks', group: 'warehouse', maxDemand: 5 });
const written = [];
const sink = createBatchSink({
  producer,
  batchSize: 2,
  batchTimeoutMs: 50,
  handler: async (leases) => {
    written.push(...leases.map((lease) => lease.event.payload.n));
    if (written.length === 5) void producer.drain();
  },
});
await pipeline(producer, sink);
const { lag } = await memory.lag('clicks', 'warehouse');
check(written.join() === '1,2,3,4,5' && lag === 0, 'createBatchSink wrote ' + written.join() + ' with lag ' + lag);
await memory.close();

if (failures.length > 0) {
  console.error(failures.join('\\n'));
  process.exitCode = 1;
} else {
  console.log('${system}: ' + Object.keys(main).length + ' runtime exports of rheo, one implementation behind every entry');
}
`;
  if (system === 'esm') return `${load}\n${body}`;
  return `'use strict';\n${load}\n(async () => {${body}})().catch((error) => {\n  console.error(error);\n  process.exitCode = 1;\n});\n`;
}
