import type { PreparedAppend } from '../core/backend.js';
import type { JsonObject, JsonValue } from '../core/types.js';
import { jsonStringBytes } from '../core/json-size.js';

/**
 * Metadata keys that carry W3C trace context from `append` to the handler,
 * named as the W3C Trace Context headers and the CloudEvents distributed
 * tracing extension name them, so other tools reading the log recognise them.
 */
export const TRACEPARENT_KEY = 'traceparent';
export const TRACESTATE_KEY = 'tracestate';

/** What a `traceparent` says, without any OpenTelemetry type (this module loads nothing). */
export interface RemoteContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
  traceState: string | null;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** `00-<trace id>-<span id>-<flags>`, version 00 of the W3C format. */
export function formatTraceparent(traceId: string, spanId: string, traceFlags: number): string {
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * Reads the trace context an event carries; `null` when it has none or it is
 * malformed (a producer outside rheo may have written anything there), by
 * the W3C rules: version ff and all-zero ids are invalid, version 00 has no
 * trailing fields.
 */
export function readTraceContext(metadata: JsonObject): RemoteContext | null {
  const value: JsonValue | undefined = metadata[TRACEPARENT_KEY];
  if (typeof value !== 'string' || value.length > 512) return null;
  const match = TRACEPARENT.exec(value);
  if (!match) return null;
  const [, version, traceId, spanId, flags, rest] = match;
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return null;
  const state = metadata[TRACESTATE_KEY];
  return {
    traceId: traceId!,
    spanId: spanId!,
    traceFlags: Number.parseInt(flags!, 16),
    traceState: typeof state === 'string' && state.length <= 512 ? state : null,
  };
}

/** Bytes a key/value string pair adds to a JSON object (the comma only when it had keys). */
function entryBytes(metadata: JsonObject, key: string, value: string): number {
  return jsonStringBytes(key) + 1 + jsonStringBytes(value) + (Object.keys(metadata).length > 0 ? 1 : 0);
}

/**
 * Adds `traceparent` (and `tracestate`, when there is one) to the prepared
 * events' metadata, recounting their sizes. An event whose metadata already
 * has a `traceparent` keeps it: the caller propagated a context on purpose.
 * The trace context is optional and the user's event is not: an event that
 * the extra bytes would take past `maxEventBytes`, or a batch past
 * `maxBatchBytes`, is stored without it rather than refused. Returns how
 * many events carry the context.
 */
export function injectTraceContext(
  prepared: PreparedAppend[],
  context: { traceparent: string; tracestate: string | null },
  limits: { maxEventBytes: number; maxBatchBytes: number },
): number {
  let batchBytes = 0;
  for (const p of prepared) batchBytes += p.size;
  let injected = 0;
  for (const p of prepared) {
    if (p.metadata[TRACEPARENT_KEY] !== undefined) continue;
    let extra = entryBytes(p.metadata, TRACEPARENT_KEY, context.traceparent);
    const withState = context.tracestate !== null && p.metadata[TRACESTATE_KEY] === undefined;
    if (withState) extra += jsonStringBytes(TRACESTATE_KEY) + 2 + jsonStringBytes(context.tracestate!);
    if (p.size + extra > limits.maxEventBytes || batchBytes + extra > limits.maxBatchBytes) continue;
    const metadata: Record<string, JsonValue> = { ...p.metadata, [TRACEPARENT_KEY]: context.traceparent };
    if (withState) metadata[TRACESTATE_KEY] = context.tracestate!;
    p.metadata = Object.freeze(metadata);
    p.size += extra;
    batchBytes += extra;
    injected++;
  }
  return injected;
}
