import { RheoError, invalidArgument, invalidPartition } from './errors.js';
import { jsonLiteralBytes, jsonNumberBytes, jsonStringBytes } from './json-size.js';
import { MAX_JSON_DEPTH, MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS } from './limits.js';
import { partitionForKey } from './partitioner.js';
import type { JsonObject, JsonValue } from './types.js';

const NAME_RE = /^[A-Za-z0-9._:-]{1,200}$/;

/** Stream and group names: 1–200 characters of `[A-Za-z0-9._:-]`. */
export function assertName(kind: 'stream' | 'group', value: unknown): asserts value is string {
  if (typeof value !== 'string' || !NAME_RE.test(value)) {
    throw invalidArgument(
      `${kind} name must be 1-200 characters of [A-Za-z0-9._:-], got ${describe(value)}`,
    );
  }
}

export function assertInteger(
  what: string,
  value: unknown,
  { min = 0, max = Number.MAX_SAFE_INTEGER }: { min?: number; max?: number } = {},
): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `in ${min}..${max}`;
    throw invalidArgument(`${what} must be an integer ${range}, got ${describe(value)}`);
  }
}

export function optionalInteger(
  what: string,
  value: unknown,
  fallback: number,
  range?: { min?: number; max?: number },
): number {
  if (value === undefined) return fallback;
  assertInteger(what, value, range);
  return value;
}

export function assertString(
  what: string,
  value: unknown,
  { min = 1, max = 200 }: { min?: number; max?: number } = {},
): asserts value is string {
  if (typeof value !== 'string' || value.length < min || value.length > max) {
    throw invalidArgument(`${what} must be a string of ${min}-${max} characters, got ${describe(value)}`);
  }
  const problem = stringProblem(value, what);
  if (problem) throw invalidArgument(problem);
}

export function assertDate(what: string, value: unknown): asserts value is Date {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw invalidArgument(`${what} must be a valid Date, got ${describe(value)}`);
  }
  const ms = value.getTime();
  if (ms < MIN_TIMESTAMP_MS || ms > MAX_TIMESTAMP_MS) {
    throw invalidArgument(`${what} must lie in the years 0001..9999 (UTC), got ${describe(value)}`);
  }
}

export function assertPlainObject(what: string, value: unknown): asserts value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalidArgument(`${what} must be an object, got ${describe(value)}`);
  }
}

/**
 * Checks that `value` is plain JSON that round-trips unchanged: no functions,
 * symbols, BigInt, undefined, non-finite numbers, cycles, or class instances
 * (a Date would silently become a string). Strings must be well-formed UTF-16
 * and free of U+0000, which PostgreSQL's jsonb cannot store; nesting is at
 * most `MAX_JSON_DEPTH`. A getter or proxy trap that throws while the value
 * is read makes it `invalid_argument` too.
 */
export function assertJson(what: string, value: unknown): asserts value is JsonValue {
  readingJson(what, () => {
    const problem = jsonProblem(value, new Set(), what, 1);
    if (problem) throw invalidArgument(problem);
  });
}

/** Runs a walk over caller-supplied values, turning whatever their getters or proxy traps throw into `invalid_argument`. */
export function readingJson<R>(what: string, walk: () => R): R {
  try {
    return walk();
  } catch (error) {
    if (error instanceof RheoError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    throw invalidArgument(`${what} could not be read: ${message}`, { cause: error });
  }
}

function depthProblem(path: string, depth: number): string | null {
  return depth > MAX_JSON_DEPTH ? `${path} is nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects` : null;
}

function jsonProblem(value: unknown, seen: Set<object>, path: string, depth: number): string | null {
  switch (typeof value) {
    case 'string':
      return stringProblem(value, path);
    case 'boolean':
      return null;
    case 'number':
      return Number.isFinite(value) ? null : `${path} is ${value}, which is not JSON`;
    case 'object': {
      if (value === null) return null;
      if (seen.has(value)) return `${path} contains a cycle`;
      const deep = depthProblem(path, depth);
      if (deep) return deep;
      if (Array.isArray(value)) {
        seen.add(value);
        for (let i = 0; i < value.length; i++) {
          const p = jsonProblem(value[i], seen, `${path}[${i}]`, depth + 1);
          if (p) return p;
        }
        seen.delete(value);
        return null;
      }
      const instance = instanceProblem(path, value);
      if (instance) return instance;
      seen.add(value);
      for (const [k, v] of Object.entries(value)) {
        const kp = stringProblem(k, `${path} key ${JSON.stringify(k)}`);
        if (kp) return kp;
        const p = jsonProblem(v, seen, `${path}.${k}`, depth + 1);
        if (p) return p;
      }
      seen.delete(value);
      return null;
    }
    default:
      return `${path} is ${typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`}, which is not JSON`;
  }
}

/** A class instance (a Map, a Date, ...) where a plain JSON object belongs: only Object.prototype or no prototype passes. */
export function instanceProblem(path: string, value: object): string | null {
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === null) return null;
  const name = (value as { constructor?: { name?: string } }).constructor?.name ?? 'object';
  return `${path} is a ${name} instance, not a plain JSON object`;
}

function stringProblem(s: string, path: string): string | null {
  if (s.includes('\u0000')) return `${path} contains U+0000, which cannot be stored`;
  if (!s.isWellFormed()) return `${path} contains a lone surrogate (not valid UTF-16)`;
  return null;
}

export function assertJsonObject(what: string, value: unknown): asserts value is JsonObject {
  assertPlainObject(what, value);
  assertJson(what, value);
}

/** The partition an event lands on: explicit, else the key's murmur2 hash, else 0. */
export function routePartition(
  stream: string,
  partitions: number,
  explicit: number | null,
  key: string | null,
): number {
  if (explicit !== null) {
    if (explicit < 0 || explicit >= partitions) throw invalidPartition(stream, explicit, partitions);
    return explicit;
  }
  if (key !== null) return partitionForKey(key, partitions);
  return 0;
}

export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return 'a symbol';
  if (value instanceof Date) return `Date(${Number.isNaN(value.getTime()) ? 'invalid' : value.toISOString()})`;
  if (Array.isArray(value)) return 'an array';
  if (value !== null && typeof value === 'object') return 'an object';
  return String(value);
}

/**
 * Validates like `assertJson` and returns a deep, frozen copy in the same
 * pass: the caller may keep mutating its objects after an append returns, and
 * nobody holding a stored event can change the log through it. The copy's
 * size by the rule of json-size.ts is added to `budget.bytes`; once that
 * passes `budget.limit` the walk stops and `onOverflow` decides the error, so
 * an oversized value is never copied whole.
 */
export function frozenJsonCopy(what: string, value: unknown, budget?: JsonBudget): JsonValue {
  const b = budget ?? { bytes: 0, limit: Number.POSITIVE_INFINITY, onOverflow: () => invalidArgument(`${what} is too large`) };
  return readingJson(what, () => copyJson(value, null, what, 1, b));
}

export interface JsonBudget {
  /** Running size in bytes; the walk adds to it. */
  bytes: number;
  limit: number;
  /** The error thrown once `bytes` passes `limit` (the count stops there). */
  onOverflow: (bytesSoFar: number) => RheoError;
}

function spend(budget: JsonBudget, bytes: number): void {
  budget.bytes += bytes;
  if (budget.bytes > budget.limit) throw budget.onOverflow(budget.bytes);
}

/**
 * Where a value sits in the walk: its container, and that container's place
 * and key in its own. A frame is made per container, never per scalar; the
 * chain of frames is the path from the root, which is all a cycle can close
 * on, and its text is written only for an error message.
 */
interface PathFrame {
  readonly up: PathFrame | null;
  /** The root's text (`up` null), a member name, or an array index. */
  readonly key: string | number;
  /** The container this frame stands for. */
  readonly value: object;
}

function pathOf(up: PathFrame | null, key: string | number): string {
  if (up === null) return String(key);
  const base = pathOf(up.up, up.key);
  return typeof key === 'number' ? `${base}[${key}]` : `${base}.${key}`;
}

/** Whether `value` is one of the containers the walk is inside: only those can make a cycle. */
function isAncestor(up: PathFrame | null, value: object): boolean {
  for (let frame = up; frame !== null; frame = frame.up) if (frame.value === value) return true;
  return false;
}

/** A string's bytes as a JSON string (see json-size.ts), or -1 when it holds U+0000 or a lone surrogate. */
function checkedStringBytes(s: string): number {
  // Short strings, the common case, in one pass; long ones by the native calls.
  if (s.length > 64) return badString(s) ? -1 : jsonStringBytes(s);
  let bytes = 2;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c < 0x80) bytes += c === 0x22 || c === 0x5c ? 2 : 1;
    else if (c < 0x20) {
      if (c === 0) return -1;
      bytes += c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d ? 2 : 6;
    } else if (c < 0x800) bytes += 2;
    else if (c < 0xd800 || c > 0xdfff) bytes += 3;
    else {
      // A high surrogate followed by a low one is one 4-byte character; any other surrogate is lone.
      const next = s.charCodeAt(i + 1);
      if (c > 0xdbff || !(next >= 0xdc00 && next <= 0xdfff)) return -1;
      bytes += 4;
      i++;
    }
  }
  return bytes;
}

function badString(s: string): boolean {
  return s.includes('\u0000') || !s.isWellFormed();
}

function copyJson(value: unknown, up: PathFrame | null, key: string | number, depth: number, budget: JsonBudget): JsonValue {
  switch (typeof value) {
    case 'string': {
      const bytes = checkedStringBytes(value);
      if (bytes < 0) throw invalidArgument(stringProblem(value, pathOf(up, key))!);
      spend(budget, bytes);
      return value;
    }
    case 'number':
      if (!Number.isFinite(value)) throw invalidArgument(`${pathOf(up, key)} is ${value}, which is not JSON`);
      spend(budget, jsonNumberBytes(value));
      return value;
    case 'boolean':
      spend(budget, jsonLiteralBytes(value));
      return value;
    case 'object':
      if (value === null) {
        spend(budget, jsonLiteralBytes(null));
        return null;
      }
      break;
    default:
      throw invalidArgument(jsonProblem(value, new Set(), pathOf(up, key), depth)!);
  }
  if (isAncestor(up, value)) throw invalidArgument(`${pathOf(up, key)} contains a cycle`);
  if (depth > MAX_JSON_DEPTH) throw invalidArgument(depthProblem(pathOf(up, key), depth)!);
  const here: PathFrame = { up, key, value };
  let out: JsonValue;
  if (Array.isArray(value)) {
    const length = value.length;
    // Brackets and the commas between elements.
    spend(budget, 2 + Math.max(0, length - 1));
    const arr: JsonValue[] = new Array<JsonValue>(length);
    for (let i = 0; i < length; i++) arr[i] = copyJson(value[i], here, i, depth + 1, budget);
    out = arr;
  } else {
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      throw invalidArgument(instanceProblem(pathOf(up, key), value)!);
    }
    const keys = Object.keys(value);
    // Braces, the commas between members and one colon per member.
    spend(budget, 2 + Math.max(0, keys.length - 1) + keys.length);
    const obj: { [key: string]: JsonValue } = {};
    for (const k of keys) {
      const keyBytes = checkedStringBytes(k);
      if (keyBytes < 0) throw invalidArgument(stringProblem(k, `${pathOf(up, key)} key ${JSON.stringify(k)}`)!);
      spend(budget, keyBytes);
      const v = copyJson((value as Record<string, unknown>)[k], here, k, depth + 1, budget);
      // Assigning "__proto__" would set the copy's prototype to the caller's
      // value (JSON.parse makes it an ordinary own key): keep it as data.
      if (k === '__proto__') Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
      else obj[k] = v;
    }
    out = obj;
  }
  Object.freeze(out);
  return out;
}
