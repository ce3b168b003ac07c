import type { ReplayQuery } from './backend.js';
import type { JsonValue, RheoEvent } from './types.js';

/** The filter part of a query, shared by `query` and replay by query, and by the memory and Redis backends, so they all match the same events. */
export function eventFilter(q: ReplayQuery): (e: RheoEvent) => boolean {
  const types = q.types ? new Set(q.types) : null;
  const fromMs = q.from?.getTime() ?? -Infinity;
  const toMs = q.to?.getTime() ?? Infinity;
  return (e) => {
    const ts = e.timestamp.getTime();
    if (ts < fromMs || ts >= toMs) return false;
    if (types && !types.has(e.type)) return false;
    if (q.key !== null && e.key !== q.key) return false;
    if (q.wherePayload !== undefined && !jsonContains(e.payload, q.wherePayload)) return false;
    if (q.whereMetadata !== undefined && !jsonContains(e.metadata, q.whereMetadata)) return false;
    return true;
  };
}

/**
 * JSON containment with PostgreSQL `@>` semantics, including its one exception:
 * a top-level array contains a primitive that is one of its elements.
 */
export function jsonContains(value: JsonValue, pattern: JsonValue, topLevel = true): boolean {
  if (pattern === null || typeof pattern !== 'object') {
    if (topLevel && Array.isArray(value)) return value.some((v) => v === pattern);
    return value === pattern;
  }
  if (Array.isArray(pattern)) {
    if (!Array.isArray(value)) return false;
    return pattern.every((p) => value.some((v) => jsonContains(v, p, false)));
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  for (const [k, p] of Object.entries(pattern)) {
    if (!Object.hasOwn(value, k) || !jsonContains(value[k]!, p, false)) return false;
  }
  return true;
}
