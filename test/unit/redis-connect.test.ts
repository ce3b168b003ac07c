import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { connectReady, type RedisClientLike } from '../../src/backends/redis/connection.js';
import { KeyLayout } from '../../src/backends/redis/keys.js';
import { redisBackend } from '../../src/backends/redis/redis-backend.js';

/** Just enough of an ioredis client: connect() is what the test says, events are emitted by hand. */
function fakeClient(connect: () => Promise<void>): RedisClientLike & EventEmitter {
  const emitter = new EventEmitter();
  return Object.assign(emitter, {
    status: 'wait',
    connect,
    call: () => Promise.resolve(null),
    duplicate: () => fakeClient(connect),
    quit: () => Promise.resolve('OK'),
    disconnect: () => {},
  });
}

describe('connectReady', () => {
  it('resolves on the ready event when connect() never settles (ioredis Cluster after a failed ready check, issue 12)', async () => {
    const client = fakeClient(() => new Promise<void>(() => {}));
    const ready = connectReady(client);
    client.emit('ready');
    await expect(ready).resolves.toBeUndefined();
    expect(client.listenerCount('ready')).toBe(0);
  });

  it('resolves when connect() resolves, and drops its listener', async () => {
    const client = fakeClient(() => Promise.resolve());
    await expect(connectReady(client)).resolves.toBeUndefined();
    expect(client.listenerCount('ready')).toBe(0);
  });

  it('rejects when connect() rejects, and drops its listener', async () => {
    const client = fakeClient(() => Promise.reject(new Error('None of startup nodes is available')));
    await expect(connectReady(client)).rejects.toThrow('None of startup nodes is available');
    expect(client.listenerCount('ready')).toBe(0);
  });
});

describe('the append subscriber of a borrowed Cluster client', () => {
  it('is ready on its ready event though its connect() never settles, so waits are woken by the next PUBLISH (issue 12)', async () => {
    const subscriber = fakeClient(() => new Promise<void>(() => {}));
    const psubscribed: unknown[][] = [];
    subscriber.call = (...args: unknown[]) => {
      psubscribed.push(args);
      return Promise.resolve(null);
    };
    const client = fakeClient(() => Promise.resolve());
    client.duplicate = () => subscriber;
    const backend = redisBackend({ client: client as never }, { prefix: 'p' });
    try {
      const woken = backend.waitForAppend('s', 5_000);
      // The duplicate's connect() hangs; ioredis reconnects it and it gets ready.
      await new Promise((resolve) => setImmediate(resolve));
      (subscriber as { status: string }).status = 'ready';
      subscriber.emit('ready');
      await new Promise((resolve) => setImmediate(resolve));
      expect(psubscribed).toEqual([['psubscribe', new KeyLayout('p').appendPattern]]);
      subscriber.emit('pmessage', new KeyLayout('p').appendPattern, new KeyLayout('p').appendChannel('s'), '');
      expect(await woken).toBe(true);
      expect(backend.listening).toBe(true);
    } finally {
      await backend.close();
    }
  });
});
