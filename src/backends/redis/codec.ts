import type { PreparedAppend } from '../../core/backend.js';
import { RheoError } from '../../core/errors.js';
import type { JsonObject, JsonValue, RheoEvent } from '../../core/types.js';

/** What a log entry's `d` field holds; stream, partition, sequence and timestamp live in the key, entry id and `t`. */
interface StoredEvent {
  i: string;
  y: string;
  k: string | null;
  p: JsonValue;
  m: JsonObject;
}

export function encodeEvent(id: string, input: PreparedAppend): string {
  const stored: StoredEvent = { i: id, y: input.type, k: input.key, p: input.payload, m: input.metadata };
  return JSON.stringify(stored);
}

export function decodeEvent(stream: string, partition: number, sequence: number, t: string, d: string): RheoEvent {
  let s: StoredEvent;
  try {
    s = JSON.parse(d) as StoredEvent;
  } catch (error) {
    throw new RheoError('internal', `stream "${stream}" partition ${partition} sequence ${sequence} holds an unreadable entry`, { stream, cause: error });
  }
  return {
    id: s.i,
    stream,
    partition,
    sequence,
    type: s.y,
    key: s.k,
    payload: s.p,
    metadata: s.m,
    timestamp: new Date(Number(t)),
  };
}

/** A nack/reject reason as the scripts store it: `n` for none, else `s` and the text. */
export function encodeReason(reason: string | null): string {
  return reason === null ? 'n' : `s${reason}`;
}

export function decodeReason(stored: string): string | null {
  return stored.startsWith('s') ? stored.slice(1) : null;
}

/** Fields of an XRANGE entry (`[id, [field, value, ...]]`) by name. */
export function entryFields(entry: unknown): { sequence: number; t: string; z: number; d: string } {
  const [id, fields] = entry as [string, string[]];
  const get = (name: string) => fields[fields.indexOf(name) + 1]!;
  return { sequence: Number(id.slice(0, id.indexOf('-'))), t: get('t'), z: Number(get('z')), d: get('d') };
}
