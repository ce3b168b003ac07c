import { invalidArgument } from './errors.js';

/**
 * The keys of an options type, listed once and checked complete by the
 * compiler: `optionKeys<FetchOptions>()('limit', ...)` fails to compile
 * while a key of the type is missing from the list, so the list cannot fall
 * behind the type it guards.
 */
export function optionKeys<T>() {
  return <const K extends ReadonlyArray<keyof T & string>>(
    ...keys: K & (Exclude<keyof T & string, K[number]> extends never ? unknown : { missing: Exclude<keyof T & string, K[number]> })
  ): readonly string[] => Object.freeze([...keys]);
}

/**
 * Refuses a key the options object does not know (a typo such as
 * `maxDemnd`, or an option of another call), naming the nearest known key.
 * A key whose value is `undefined` is passed over: it sets nothing, and
 * spreading an object with optional fields yields such keys. Not an object:
 * nothing to check here (the caller's own shape check answers).
 */
export function assertKnownKeys(what: string, options: unknown, known: readonly string[]): void {
  if (options === null || typeof options !== 'object') return;
  let keys: string[];
  try {
    keys = Object.keys(options);
  } catch {
    return; // a Proxy whose ownKeys trap throws: its fields are read, and refused, where they are used
  }
  for (const key of keys) {
    if (known.includes(key)) continue;
    let value: unknown;
    try {
      value = (options as Record<string, unknown>)[key];
    } catch {
      value = null; // unreadable: it is not undefined, so it is refused below
    }
    if (value === undefined) continue;
    const near = nearestKey(key, known);
    throw invalidArgument(
      `${what}: unknown option ${JSON.stringify(key)}${near === null ? '' : `; did you mean ${JSON.stringify(near)}?`} (known: ${known.join(', ')})`,
    );
  }
}

/** The known key closest to `key` by edit distance (case ignored), when it is close enough to be a typo. */
export function nearestKey(key: string, known: readonly string[]): string | null {
  const lower = key.toLowerCase();
  let best: string | null = null;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best !== null && bestDistance <= Math.max(2, Math.floor(key.length / 3)) ? best : null;
}

/** Levenshtein distance, one row at a time. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = row;
  }
  return previous[b.length]!;
}
