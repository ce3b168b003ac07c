/**
 * A process that calls rheo in a loop while its test kills its connections,
 * for test/postgres/connection-faults.test.ts:
 *   node --import tsx test/support/fault-loop-child.ts <url> <schema> <application_name> <owned|borrowed> <ops>
 * `ops` is a comma-separated cycle of `lag`, `append`, `fetch` (fetch acks what
 * it got) on stream `s`, group `g`. Every finished call is reported over IPC as
 * `{ type: 'call', op, ok, code?, name? }`; on the message `'stop'` it closes
 * rheo and reports `{ type: 'done', poolErrors }`. A crash (an uncaught `'error'`
 * from a dead connection) shows as a non-zero exit code.
 */
import pg from 'pg';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { RheoError } from '../../src/core/errors.js';
import { createRheo } from '../../src/rheo.js';

type Op = 'lag' | 'append' | 'fetch';

const [url, schema, applicationName, mode, opsText] = process.argv.slice(2);
if (!url || !schema || !applicationName || (mode !== 'owned' && mode !== 'borrowed') || !opsText || !process.send) {
  process.stderr.write('usage (with an IPC channel): fault-loop-child <url> <schema> <application_name> <owned|borrowed> <ops>\n');
  process.exit(2);
}
const ops = opsText.split(',') as Op[];
const send = (message: unknown): void => {
  process.send?.(message);
};

let poolErrors = 0;
const pool = mode === 'borrowed' ? new pg.Pool({ connectionString: url, max: 3, application_name: applicationName }) : null;
// The application's own handler on its pool (pg requires one for idle clients); rheo must not replace it.
pool?.on('error', () => {
  poolErrors++;
});
const backend = pool
  ? postgresBackend({ pool }, { schema })
  : postgresBackend({ connectionString: url, poolConfig: { max: 3, application_name: applicationName } }, { schema });
const rheo = createRheo({ backend });

let stopping = false;
process.on('message', (message) => {
  if (message === 'stop') stopping = true;
});

async function call(op: Op): Promise<void> {
  if (op === 'lag') await rheo.lag('s', 'g');
  else if (op === 'append') await rheo.append('s', { payload: { at: Date.now() } });
  else {
    const leases = await rheo.fetch('s', 'g', { limit: 5, leaseMs: 60_000 });
    const failed = leases.length > 0 ? (await rheo.ackMany(leases)).find((r) => !r.ok) : undefined;
    if (failed && !failed.ok) throw failed.error;
  }
}

for (let i = 0; !stopping; i++) {
  const op = ops[i % ops.length] as Op;
  try {
    await call(op);
    send({ type: 'call', op, ok: true });
  } catch (error) {
    send({
      type: 'call',
      op,
      ok: false,
      code: error instanceof RheoError ? error.code : null,
      name: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
    });
  }
}
await rheo.close();
await pool?.end();
send({ type: 'done', poolErrors });
process.disconnect();
