import { afterEach, beforeEach, expect } from 'vitest';
import type { Backend } from '../../src/core/backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { RheoError, type RheoErrorCode } from '../../src/core/errors.js';
import type { AppendedEvent, Lease, RheoEvent } from '../../src/core/types.js';
import { createRheo, type Rheo } from '../../src/rheo.js';

export type BackendFactory = (clock: ManualClock) => Backend | Promise<Backend>;

export interface ConformanceOptions {
  /** How many events the bounded-storage test appends and acks. Default 20,000. */
  storageEvents?: number;
  /** Time allowed for each property test (30 runs of a random scenario). Default vitest's. */
  propertyTimeoutMs?: number;
}

export interface Fixture {
  rheo: Rheo;
  backend: Backend;
  clock: ManualClock;
}

/**
 * Registers `beforeEach`/`afterEach` in the calling `describe` so every test
 * gets a fresh backend wrapped in a facade, migrated, and closed afterwards.
 * Returns a getter because the fixture only exists once a test runs.
 */
export function useFixture(makeBackend: BackendFactory): () => Fixture {
  let current: Fixture | null = null;
  beforeEach(async () => {
    const clock = new ManualClock();
    const backend = await makeBackend(clock);
    const rheo = createRheo({ backend, clock });
    await rheo.migrate();
    current = { rheo, backend, clock };
  });
  afterEach(async () => {
    const fixture = current;
    current = null;
    if (fixture) await fixture.rheo.close();
  });
  return () => {
    if (!current) throw new Error('the conformance fixture is only available inside a test');
    return current;
  };
}

/** Awaits a rejection and checks it is a `RheoError` with `code`; returns it for further checks. */
export async function expectCode(promise: Promise<unknown>, code: RheoErrorCode): Promise<RheoError> {
  let settled = false;
  try {
    await promise;
    settled = true;
  } catch (error) {
    expect(error).toBeInstanceOf(RheoError);
    expect((error as RheoError).code).toBe(code);
    return error as RheoError;
  }
  expect(settled, `expected a RheoError with code ${code}, but the call succeeded`).toBe(false);
  throw new Error('unreachable');
}

/** Every event of every partition, partition by partition, ascending. */
export async function readAll(rheo: Rheo, stream: string): Promise<RheoEvent[]> {
  const info = (await rheo.listStreams()).find((s) => s.name === stream);
  if (!info) throw new Error(`stream ${stream} is not listed`);
  const out: RheoEvent[] = [];
  for (let p = 0; p < info.partitions; p++) {
    let after = 0;
    while (true) {
      const page = await rheo.read(stream, { partition: p, after, limit: 10_000 });
      out.push(...page);
      if (page.length < 10_000) break;
      after = page[page.length - 1]!.sequence;
    }
  }
  return out;
}

/** Fetches until nothing is claimable; returns every lease in fetch order. */
export async function fetchAll(
  rheo: Rheo,
  stream: string,
  group: string,
  options: { leaseMs?: number; partitions?: number[] } = {},
): Promise<Lease[]> {
  const out: Lease[] = [];
  while (true) {
    const batch = await rheo.fetch(stream, group, { limit: 1000, ...options });
    if (batch.length === 0) return out;
    out.push(...batch);
  }
}

/** Fetches and acks everything currently claimable; returns how many. */
export async function consumeAll(rheo: Rheo, stream: string, group: string): Promise<number> {
  const leases = await fetchAll(rheo, stream, group);
  const results = await rheo.ackMany(leases);
  expect(results.every((r) => r.ok)).toBe(true);
  return leases.length;
}

/** `partition:sequence`, a compact name for a delivery in assertions. */
export function pos(x: Lease | RheoEvent): string {
  const e = 'event' in x ? x.event : x;
  return `${e.partition}:${e.sequence}`;
}

export function sequences(leases: Lease[]): number[] {
  return leases.map((l) => l.event.sequence);
}

/** An appended event as `read` returns it: without the append-only `existed` field. */
export function stored<T>(appended: AppendedEvent<T>): RheoEvent<T> {
  const { existed: _existed, ...event } = appended;
  return event;
}

/** Appends `count` events with explicit partition `partition`; returns them as stored. */
export async function appendN(
  rheo: Rheo,
  stream: string,
  count: number,
  extra: { partition?: number; type?: string } = {},
): Promise<RheoEvent[]> {
  const inputs = Array.from({ length: count }, (_, i) => ({ payload: { n: i }, ...extra }));
  return (await rheo.appendBatch(stream, inputs)).map(stored);
}

/** Frontier of each partition, as an array indexed by partition. */
export async function frontiers(rheo: Rheo, stream: string, group: string): Promise<number[]> {
  const lag = await rheo.lag(stream, group);
  return Object.keys(lag.partitions)
    .map(Number)
    .sort((a, b) => a - b)
    .map((p) => lag.partitions[p]!.frontier);
}
