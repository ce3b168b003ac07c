import { describe, expect, it } from 'vitest';
import { memoryBackend } from '../../src/backends/memory/memory-backend.js';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { redisBackend } from '../../src/backends/redis/redis-backend.js';
import { assertKnownKeys, nearestKey } from '../../src/core/option-keys.js';
import { createRheo } from '../../src/rheo.js';
import { createBatchSink } from '../../src/sinks/batch-sink.js';
import { createBatcherRouter } from '../../src/sinks/batcher-router.js';
import { createLeaseSink } from '../../src/sinks/lease-sink.js';
import { createBatchTransform } from '../../src/transforms/batch-transform.js';
import { createKeyOrderedTransform } from '../../src/transforms/key-ordered-transform.js';
import { createMapTransform } from '../../src/transforms/map-transform.js';
import { createRateLimit } from '../../src/transforms/rate-limit.js';
import { createWindowTransform } from '../../src/transforms/window-transform.js';

/** The thrown RheoError's code and message. */
function refusal(fn: () => unknown): { code: unknown; message: string } {
  try {
    fn();
  } catch (error) {
    return { code: (error as { code?: unknown }).code, message: (error as Error).message };
  }
  throw new Error('expected a refusal');
}

async function asyncRefusal(fn: () => Promise<unknown>): Promise<{ code: unknown; message: string }> {
  try {
    await fn();
  } catch (error) {
    return { code: (error as { code?: unknown }).code, message: (error as Error).message };
  }
  throw new Error('expected a refusal');
}

describe('unknown option keys', () => {
  it('names the unknown key and the nearest known one, and lists the known ones', () => {
    expect(refusal(() => assertKnownKeys('producer options', { maxDemnd: 5 }, ['maxDemand', 'minDemand', 'leaseMs']))).toEqual({
      code: 'invalid_argument',
      message: 'producer options: unknown option "maxDemnd"; did you mean "maxDemand"? (known: maxDemand, minDemand, leaseMs)',
    });
    expect(refusal(() => assertKnownKeys('x', { zzzzzz: 1 }, ['limit'])).message).toBe('x: unknown option "zzzzzz" (known: limit)');
  });

  it('passes known keys, a key set to undefined (a spread of optional fields), and non-objects', () => {
    expect(() => assertKnownKeys('x', { limit: 1, extra: undefined }, ['limit'])).not.toThrow();
    expect(() => assertKnownKeys('x', undefined, ['limit'])).not.toThrow();
    expect(() => assertKnownKeys('x', 7, ['limit'])).not.toThrow();
  });

  it('an unreadable unknown key is refused, not a crash', () => {
    const options = Object.defineProperty({}, 'sneaky', {
      enumerable: true,
      get() {
        throw new Error('trap');
      },
    });
    expect(refusal(() => assertKnownKeys('x', options, ['limit'])).code).toBe('invalid_argument');
  });

  it('nearestKey: a typo, a case slip, and nothing close', () => {
    expect(nearestKey('maxDemnd', ['maxDemand', 'minDemand'])).toBe('maxDemand');
    expect(nearestKey('LEASEMS', ['leaseMs', 'pollMs'])).toBe('leaseMs');
    expect(nearestKey('onFailure', ['leaseMs', 'pollMs'])).toBeNull();
  });

  it('every facade call refuses a typo in its options, and a refused call writes nothing', async () => {
    const rheo = createRheo();
    expect((await asyncRefusal(() => rheo.createStream('s', { partitons: 2 } as never))).message).toMatch(
      /createStream options: unknown option "partitons"; did you mean "partitions"\?/,
    );
    expect(await rheo.listStreams()).toEqual([]);
    await rheo.createStream('s');
    await expect(rheo.createGroup('s', 'g', { startAftr: 3 } as never)).rejects.toThrow(/did you mean "startAfter"/);
    expect(await rheo.listGroups('s')).toEqual([]);
    await rheo.createGroup('s', 'g');
    await expect(rheo.append('s', { payload: 1 }, { timeoutMS: 5 } as never)).rejects.toThrow(/append options: unknown option "timeoutMS"; did you mean "timeoutMs"/);
    expect(await rheo.read('s')).toEqual([]);
    await rheo.append('s', { payload: 1 });
    await expect(rheo.fetch('s', 'g', { limt: 1 } as never)).rejects.toThrow(/fetch options: unknown option "limt"; did you mean "limit"/);
    expect((await rheo.groupInfo('s', 'g')).inflight).toBe(0);
    await expect(rheo.read('s', { afterr: 0 } as never)).rejects.toThrow(/did you mean "after"/);
    await expect(rheo.query('s', { tpye: 'x' } as never)).rejects.toThrow(/did you mean "type"/);
    await expect(rheo.lag('s', 'g', { partition: [0] } as never)).rejects.toThrow(/did you mean "partitions"/);
    await expect(rheo.deadLetters('s', 'g', { limits: 1 } as never)).rejects.toThrow(/did you mean "limit"/);
    const [lease] = await rheo.fetch('s', 'g', { limit: 1 });
    await expect(rheo.nack(lease!, 'r', { delay: 5 } as never)).rejects.toThrow(/nack options: unknown option "delay"; did you mean "delayMs"/);
    expect((await rheo.groupInfo('s', 'g')).inflight).toBe(1); // still held: the nack wrote nothing
    await expect(rheo.ack(lease!, { sigal: undefined, force: true } as never)).rejects.toThrow(/ack options: unknown option "force"/);
    await rheo.ack(lease!);
    await expect(rheo.heartbeat('s', 'g', { memberId: 'm', sesionMs: 5_000 } as never)).rejects.toThrow(
      /heartbeat options: unknown option "sesionMs"; did you mean "sessionMs"/,
    );
    expect((await rheo.members('s', 'g')).members).toEqual([]);
    await rheo.close();
  });

  it('createRheo, its defaults, limits and retention refuse typos', () => {
    expect(() => createRheo({ defualts: {} } as never)).toThrow(/createRheo options: unknown option "defualts"; did you mean "defaults"/);
    expect(() => createRheo({ defaults: { maxDemnd: 5 } } as never)).toThrow(/defaults: unknown option "maxDemnd"; did you mean "maxDemand"/);
    expect(() => createRheo({ limits: { maxEventByte: 5 } } as never)).toThrow(/limits: unknown option "maxEventByte"/);
    expect(() => createRheo({ retention: { interval: 5 } } as never)).toThrow(/retention: unknown option "interval"/);
  });

  it('the producer, both consume modes and their typos', async () => {
    const rheo = createRheo({ retention: { enabled: false } });
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    expect(() => rheo.producer({ stream: 's', group: 'g', maxDemnd: 5 } as never)).toThrow(
      /producer options: unknown option "maxDemnd"; did you mean "maxDemand"/,
    );
    expect(() => rheo.consume({ stream: 's', group: 'g', handler: () => undefined, concurency: 2 } as never)).toThrow(
      /consume options: unknown option "concurency"; did you mean "concurrency"/,
    );
    expect(() =>
      rheo.consume({ stream: 's', group: 'g', assignment: 'partitions', handler: () => undefined, sessionMS: 5 } as never),
    ).toThrow(/unknown option "sessionMS"; did you mean "sessionMs"/);
    await rheo.close();
  });

  it('sinks, the router and every transform refuse typos', async () => {
    const rheo = createRheo({ retention: { enabled: false } });
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    const producer = rheo.producer({ stream: 's', group: 'g' });
    const handler = (): undefined => undefined;
    expect(() => createLeaseSink({ producer, handler, concurency: 1 } as never)).toThrow(/createLeaseSink options: unknown option "concurency"/);
    expect(() => createBatchSink({ producer, handler, batchSise: 1 } as never)).toThrow(/createBatchSink options: unknown option "batchSise"; did you mean "batchSize"/);
    const sink = createBatchSink({ producer, handler });
    expect(() => createBatcherRouter({ producer, batchers: { sink }, route: () => 'sink', routes: {} } as never)).toThrow(
      /createBatcherRouter options: unknown option "routes"; did you mean "route"/,
    );
    expect(() => createMapTransform({ map: handler, concurrencyy: 2 } as never)).toThrow(/createMapTransform options: unknown option "concurrencyy"/);
    expect(() => createKeyOrderedTransform({ map: handler, keyof: handler } as never)).toThrow(/did you mean "keyOf"/);
    expect(() => createWindowTransform({ producer, trigger: handler, every: 2, evryMs: 5 } as never)).toThrow(/did you mean "everyMs"/);
    expect(() => createRateLimit({ limit: 1, intervalMs: 5, interval: 5 } as never)).toThrow(/createRateLimit options: unknown option "interval"/);
    expect(() => createBatchTransform({ size: 2, time: 5 } as never)).toThrow(/createBatchTransform options: unknown option "time"/);
    producer.destroy();
    await rheo.close();
  });

  it('backends refuse typos in their connection and options', () => {
    expect(() => memoryBackend({ clok: null } as never)).toThrow(/memoryBackend options: unknown option "clok"; did you mean "clock"/);
    expect(() => postgresBackend({ connectionString: 'postgres://127.0.0.1/x', schemma: 'a' } as never)).toThrow(
      /postgresBackend connection: unknown option "schemma"; did you mean "schema"/,
    );
    expect(() => postgresBackend({ connectionString: 'postgres://127.0.0.1/x' }, { shema: 'a' } as never)).toThrow(/postgresBackend options: unknown option "shema"/);
    expect(() => redisBackend({ url: 'redis://127.0.0.1:1' }, { prefx: 'a' } as never)).toThrow(/redisBackend options: unknown option "prefx"; did you mean "prefix"/);
  });
});
