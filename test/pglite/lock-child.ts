/** Opens a PGlite backend on argv[2] and prints what happened as JSON: the error a locked directory gives, or `opened`. */
import { pgliteBackend } from '../../src/backends/pglite/pglite-backend.js';
import { isRheoError } from '../../src/core/errors.js';

try {
  const backend = pgliteBackend({ dataDir: process.argv[2]! });
  process.stdout.write(`${JSON.stringify({ opened: true })}\n`);
  await backend.close();
} catch (error) {
  process.stdout.write(`${JSON.stringify(isRheoError(error) ? { code: error.code, message: error.message } : { thrown: String(error) })}\n`);
}
