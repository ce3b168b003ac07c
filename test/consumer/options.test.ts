import { describe, expect, it } from 'vitest';
import { RheoError } from '../../src/core/errors.js';
import type { ConsumeOptions } from '../../src/consumer/consumer-types.js';
import { createRheo } from '../../src/rheo.js';

const handler = (): 'ack' => 'ack';

describe('consume: option validation', () => {
  const rheo = createRheo();
  const base = { stream: 'orders', group: 'billing', handler };

  it.each([
    ['no options', undefined, /consume options must be an object/],
    ['a bad stream name', { ...base, stream: 'no spaces' }, /stream name must be/],
    ['a missing handler', { ...base, handler: undefined }, /handler must be a function/],
    ['concurrency 0', { ...base, concurrency: 0 }, /concurrency must be an integer in 1\.\.10000, got 0/],
    ['fractional concurrency', { ...base, concurrency: 1.5 }, /concurrency must be an integer/],
    ['maxDemand below concurrency', { ...base, concurrency: 8, maxDemand: 4 }, /maxDemand \(4\) must be at least concurrency \(8\)/],
    ['leaseMs 0', { ...base, leaseMs: 0 }, /leaseMs must be an integer/],
    ['a string pollMs', { ...base, pollMs: '5' }, /pollMs must be an integer/],
    ['an empty consumerId', { ...base, consumerId: '' }, /consumerId must be a string/],
    ['empty partitions', { ...base, partitions: [] }, /partitions must be a non-empty array/],
    ['a negative partition', { ...base, partitions: [-1] }, /partitions\[\] must be an integer/],
    ['handlerTimeoutMs 0', { ...base, handlerTimeoutMs: 0 }, /handlerTimeoutMs must be an integer/],
    ['an unknown orderBy', { ...base, orderBy: 'sequence' }, /orderBy must be 'key', 'partition' or a function/],
    ['a non-signal', { ...base, signal: {} }, /signal must be an AbortSignal/],
  ])('rejects %s with invalid_argument, synchronously', (_name, options, message) => {
    let error: unknown = null;
    try {
      rheo.consume(options as unknown as ConsumeOptions);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RheoError);
    expect((error as RheoError).code).toBe('invalid_argument');
    expect((error as RheoError).message).toMatch(message);
  });

  it('defaults maxDemand to max(10, concurrency) and returns the handle synchronously', async () => {
    const small = rheo.consume({ ...base, concurrency: 3 });
    const large = rheo.consume({ ...base, concurrency: 32 });
    expect([small.maxDemand, large.maxDemand]).toEqual([10, 32]);
    expect(small.state).toBe('running');
    await Promise.all([small.stop(), large.stop()]);
  });

  it('validates stop options', async () => {
    const consumer = rheo.consume(base);
    await expect(consumer.stop({ timeoutMs: -1 })).rejects.toMatchObject({ code: 'invalid_argument' });
    await consumer.stop();
  });
});
