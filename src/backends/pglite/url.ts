import { invalidArgument } from '../../core/errors.js';

/** The scheme rheo's CLI and examples read as PGlite: `pglite://<data directory>`. */
export const PGLITE_SCHEME = 'pglite';

/**
 * The data directory of a `pglite://` URL: everything after `pglite://`,
 * relative to the working directory unless it starts with `/`
 * (`pglite://./rheo-data`, `pglite://rheo-data`, `pglite:///var/lib/rheo`).
 * Not parsed with `URL`: a relative path has no host, and `URL` would take
 * its first segment for one.
 */
export function pgliteDataDir(url: string): string {
  const prefix = `${PGLITE_SCHEME}://`;
  if (!url.toLowerCase().startsWith(prefix)) throw invalidArgument(`a PGlite URL starts with ${prefix}, got "${url}"`);
  const path = decodeURIComponent(url.slice(prefix.length));
  if (path === '' || path.includes('\0')) throw invalidArgument(`a PGlite URL names its data directory: ${prefix}./rheo-data, got "${url}"`);
  return path;
}
