import { afterEach, beforeEach } from 'vitest';
import { ManualClock } from '../../../src/core/clock.js';
import type { JsonValue } from '../../../src/core/types.js';
import type { ProducerOptions } from '../../../src/producer/producer-options.js';
import type { RheoProducer } from '../../../src/producer/rheo-producer.js';
import { createRheo, type Rheo } from '../../../src/rheo.js';
import type { BackendFactory } from '../../support/backends.js';
import { FaultyBackend } from '../../support/faulty-backend.js';
import { ManualTimers } from './manual-timers.js';

export interface StreamsFixture {
  rheo: Rheo;
  clock: ManualClock;
  /** The producers' timer source, on the same clock as the backend's lease expiry. */
  timers: ManualTimers;
  /** Wraps the real backend: counts calls, records settles, injects faults. */
  faulty: FaultyBackend;
  stream: string;
  group: string;
  /** Appends `n` events `{ n: 1..n }`, keys `k0..k2`. */
  append(n: number, type?: string): Promise<void>;
  /** A producer on the fixture's stream and group with manual timers; closed after the test. */
  producer<T extends JsonValue = JsonValue>(options?: Partial<ProducerOptions>): RheoProducer<T>;
}

export interface FixtureOptions {
  partitions?: number;
  maxAttempts?: number;
}

/** A fresh backend per test (memory or Postgres) behind a FaultyBackend, a ManualClock and ManualTimers. */
export function useStreamsFixture(factory: BackendFactory, options: FixtureOptions = {}): () => StreamsFixture {
  let current: StreamsFixture | null = null;
  let producers: RheoProducer<JsonValue>[] = [];
  beforeEach(async () => {
    const clock = new ManualClock();
    const timers = new ManualTimers(clock);
    const faulty = new FaultyBackend(await factory.make(clock));
    const rheo = createRheo({ backend: faulty, clock, defaults: { pollMs: 50, leaseMs: 1000 } });
    const stream = 'ticks';
    const group = 'pipeline';
    await rheo.createStream(stream, { partitions: options.partitions ?? 1 });
    await rheo.createGroup(stream, group, { maxAttempts: options.maxAttempts ?? 5 });
    producers = [];
    current = {
      rheo,
      clock,
      timers,
      faulty,
      stream,
      group,
      append: async (n, type = 'tick') => {
        await rheo.appendBatch(
          stream,
          Array.from({ length: n }, (_, i) => ({ type, payload: { n: i + 1 }, key: `k${i % 3}` })),
        );
      },
      producer: <T extends JsonValue = JsonValue>(o: Partial<ProducerOptions> = {}) => {
        const producer = rheo.producer<T>({ stream, group, timers, ...o });
        producers.push(producer as unknown as RheoProducer<JsonValue>);
        return producer;
      },
    };
  });
  afterEach(async () => {
    const fixture = current;
    current = null;
    await Promise.all(producers.map((p) => p.close()));
    // The backend itself is closed by the factory's cleanup (Postgres) or dropped (memory).
    void fixture;
  });
  return () => {
    if (!current) throw new Error('fixture used outside a test');
    return current;
  };
}
