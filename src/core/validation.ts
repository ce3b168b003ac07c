import { invalidArgument, invalidPartition } from './errors.js';
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
}

export function assertDate(what: string, value: unknown): asserts value is Date {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw invalidArgument(`${what} must be a valid Date, got ${describe(value)}`);
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
 * and free of U+0000, which PostgreSQL's jsonb cannot store.
 */
export function assertJson(what: string, value: unknown): asserts value is JsonValue {
  const problem = jsonProblem(value, new Set(), what);
  if (problem) throw invalidArgument(`${problem}`);
}

function jsonProblem(value: unknown, seen: Set<object>, path: string): string | null {
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
      if (Array.isArray(value)) {
        seen.add(value);
        for (let i = 0; i < value.length; i++) {
          const p = jsonProblem(value[i], seen, `${path}[${i}]`);
          if (p) return p;
        }
        seen.delete(value);
        return null;
      }
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) {
        const name = (value as { constructor?: { name?: string } }).constructor?.name ?? 'object';
        return `${path} is a ${name} instance, not a plain JSON object`;
      }
      seen.add(value);
      for (const [k, v] of Object.entries(value)) {
        const kp = stringProblem(k, `${path} key ${JSON.stringify(k)}`);
        if (kp) return kp;
        const p = jsonProblem(v, seen, `${path}.${k}`);
        if (p) return p;
      }
      seen.delete(value);
      return null;
    }
    default:
      return `${path} is ${typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`}, which is not JSON`;
  }
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
 * nobody holding a stored event can change the log through it.
 */
export function frozenJsonCopy(what: string, value: unknown): JsonValue {
  return copyJson(value, new Set(), what);
}

function copyJson(value: unknown, seen: Set<object>, path: string): JsonValue {
  if (typeof value !== 'object' || value === null) {
    const problem = jsonProblem(value, seen, path);
    if (problem) throw invalidArgument(problem);
    return value as JsonValue;
  }
  if (seen.has(value)) throw invalidArgument(`${path} contains a cycle`);
  seen.add(value);
  let out: JsonValue;
  if (Array.isArray(value)) {
    const arr: JsonValue[] = new Array<JsonValue>(value.length);
    for (let i = 0; i < value.length; i++) arr[i] = copyJson(value[i], seen, `${path}[${i}]`);
    out = arr;
  } else {
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      const name = (value as { constructor?: { name?: string } }).constructor?.name ?? 'object';
      throw invalidArgument(`${path} is a ${name} instance, not a plain JSON object`);
    }
    const obj: { [key: string]: JsonValue } = {};
    for (const k of Object.keys(value)) {
      const kp = stringProblem(k, `${path} key ${JSON.stringify(k)}`);
      if (kp) throw invalidArgument(kp);
      obj[k] = copyJson((value as Record<string, unknown>)[k], seen, `${path}.${k}`);
    }
    out = obj;
  }
  seen.delete(value);
  Object.freeze(out);
  return out;
}
