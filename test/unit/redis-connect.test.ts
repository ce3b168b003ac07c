import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { connectReady, type RedisClientLike } from '../../src/backends/redis/connection.js';

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
