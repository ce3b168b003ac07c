import type { EventEmitter } from 'node:events';
import { afterEach, beforeEach } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { Consumer } from '../../src/consumer/consumer.js';
import type { ConsumeOptions } from '../../src/consumer/consumer-types.js';
import type { JsonValue } from '../../src/core/types.js';
import type { ConsumerEventMap } from '../../src/observability/lease-events.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import type { BackendFactory } from '../support/backends.js';
import { FaultyBackend } from '../support/faulty-backend.js';

export interface ConsumerFixture {
  rheo: Rheo;
  clock: ManualClock;
  /** Wraps the real backend; inject faults with `faulty.fail(...)`. */
  faulty: FaultyBackend;
  stream: string;
  group: string;
  /** `rheo.consume` on the fixture's stream and group; stopped after the test. */
  consume<T extends JsonValue = JsonValue>(options: Omit<ConsumeOptions<T>, 'stream' | 'group'>): Consumer<T>;
}

export interface FixtureOptions {
  partitions?: number;
  maxAttempts?: number;
}

/**
 * A fresh backend per test (memory or Postgres), wrapped in a FaultyBackend,
 * behind a facade whose ManualClock drives lease expiry; one stream and one
 * group. Every consumer a test starts is stopped afterwards.
 */
export function useConsumerFixture(factory: BackendFactory, options: FixtureOptions = {}): () => ConsumerFixture {
  let current: ConsumerFixture | null = null;
  let consumers: Consumer<JsonValue>[] = [];
  beforeEach(async () => {
    const clock = new ManualClock();
    const faulty = new FaultyBackend(await factory.make(clock));
    const rheo = createRheo({ backend: faulty, clock, defaults: { pollMs: 5 } });
    const stream = 'orders';
    const group = 'billing';
    await rheo.createStream(stream, { partitions: options.partitions ?? 1 });
    await rheo.createGroup(stream, group, { maxAttempts: options.maxAttempts ?? 5 });
    consumers = [];
    current = {
      rheo,
      clock,
      faulty,
      stream,
      group,
      consume: <T extends JsonValue = JsonValue>(o: Omit<ConsumeOptions<T>, 'stream' | 'group'>) => {
        const consumer = rheo.consume<T>({ stream, group, ...o } as ConsumeOptions<T>);
        consumers.push(consumer as unknown as Consumer<JsonValue>);
        return consumer;
      },
    };
  });
  afterEach(async () => {
    const fixture = current;
    current = null;
    await Promise.all(consumers.map((c) => c.stop({ timeoutMs: 1000 })));
    if (fixture) await fixture.rheo.close();
  });
  return () => {
    if (!current) throw new Error('the consumer fixture is only available inside a test');
    return current;
  };
}

/**
 * Waits until `condition()` holds, checking after every macrotask turn. It
 * waits on a condition, not on a guessed duration; `timeoutMs` only bounds a
 * failing test.
 */
export async function waitFor(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/** Resolves with the next `event` payload the consumer emits that matches `filter`. */
export function nextEvent<K extends keyof ConsumerEventMap>(
  consumer: Consumer<never> | Consumer<JsonValue>,
  event: K,
  filter: (payload: ConsumerEventMap[K][0]) => boolean = () => true,
): Promise<ConsumerEventMap[K][0]> {
  const emitter = consumer as unknown as EventEmitter;
  return new Promise((resolve) => {
    const listener = (payload: ConsumerEventMap[K][0]): void => {
      if (!filter(payload)) return;
      emitter.off(event, listener);
      resolve(payload);
    };
    emitter.on(event, listener);
  });
}

/** Records every payload of the given events, in order. */
export function record<K extends keyof ConsumerEventMap>(
  consumer: Consumer<JsonValue>,
  ...events: K[]
): Array<{ event: K; payload: ConsumerEventMap[K][0] }> {
  const log: Array<{ event: K; payload: ConsumerEventMap[K][0] }> = [];
  const emitter = consumer as unknown as EventEmitter;
  for (const event of events) emitter.on(event, (payload: ConsumerEventMap[K][0]) => log.push({ event, payload }));
  return log;
}

export interface Deferred<T = void> {
  promise: Promise<T>;
  resolve(value: T): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
