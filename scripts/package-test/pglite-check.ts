/**
 * A script that loads `rheo/pglite` from the installed package, as ESM
 * (`import()`) or CommonJS (`require`), and checks it against whether the
 * optional peer `@electric-sql/pglite` is installed (RHEO_PGLITE_PEER is
 * `absent` or `present`). Absent: the entry loads, and making a backend
 * throws `unsupported` naming the package. Present: a backend on a data
 * directory migrates, appends, leases and acks, its errors are rheo's
 * `RheoError`, and a second open of the directory is refused. Exits 1 with
 * the reasons on stderr.
 */
export function pgliteCheckScript(system: 'esm' | 'cjs'): string {
  const load = system === 'esm' ? 'const load = (name) => import(name);' : 'const load = async (name) => require(name);';
  const body = `
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };
const { createRheo, RheoError, isRheoError } = await load('rheo');
const { pgliteBackend } = await load('rheo/pglite');
const codeOf = async (call) => {
  try {
    await call();
    return 'no error';
  } catch (error) {
    check(error instanceof RheoError, 'an error from rheo/pglite is not an instance of rheo RheoError: ' + String(error));
    return isRheoError(error) ? error.code : 'not a RheoError: ' + String(error);
  }
};
if (process.env.RHEO_PGLITE_PEER === 'absent') {
  let message = '';
  const code = await codeOf(() => {
    try {
      pgliteBackend({});
    } catch (error) {
      message = String(error && error.message);
      throw error;
    }
  });
  check(code === 'unsupported', 'rheo/pglite without @electric-sql/pglite: expected unsupported, got ' + code);
  check(message.includes('@electric-sql/pglite'), 'the unsupported error does not name the package: ' + message);
} else {
  const dataDir = './pglite-data-${system}';
  const rheo = createRheo({ backend: pgliteBackend({ dataDir }) });
  try {
    await rheo.migrate();
    await rheo.createStream('orders');
    const again = await codeOf(() => rheo.createStream('orders'));
    check(again === 'already_exists', 'createStream twice: expected already_exists, got ' + again);
    await rheo.createGroup('orders', 'billing');
    await rheo.append('orders', { payload: { n: 1 } });
    const [lease] = await rheo.fetch('orders', 'billing', { limit: 1 });
    check(lease && lease.event.payload.n === 1, 'fetch returned no lease for the appended event');
    await rheo.ack(lease);
    const locked = await codeOf(() => pgliteBackend({ dataDir }));
    check(locked === 'backend_unavailable', 'a second open of the data directory: expected backend_unavailable, got ' + locked);
  } finally {
    await rheo.close();
  }
}
if (failures.length > 0) {
  console.error(failures.join('\\n'));
  process.exitCode = 1;
} else {
  console.log('${system}: rheo/pglite with the peer ' + process.env.RHEO_PGLITE_PEER);
}
`;
  if (system === 'esm') return `${load}\n${body}`;
  return `'use strict';\n${load}\n(async () => {${body}})().catch((error) => {\n  console.error(error);\n  process.exitCode = 1;\n});\n`;
}
