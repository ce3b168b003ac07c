import { invalidArgument } from '../core/errors.js';

/**
 * The handler a sink was given: `handler`, or its deprecated older name
 * (`handle`, `handleBatch`). `null` when neither is a function, so the
 * caller can name everything it expects; both at once is ambiguous and
 * refused rather than one silently winning.
 */
export function chosenHandler<F>(what: string, options: unknown, legacyName: string): F | null {
  if (options === null || typeof options !== 'object') return null;
  const record = options as Record<string, unknown>;
  const handler = record['handler'];
  const legacy = record[legacyName];
  if (handler !== undefined && legacy !== undefined) {
    throw invalidArgument(`${what} takes one handler: pass \`handler\` (\`${legacyName}\` is its deprecated older name), not both`);
  }
  const chosen = handler ?? legacy;
  return typeof chosen === 'function' ? (chosen as F) : null;
}
