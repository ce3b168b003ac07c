import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { connectReady, textOf, type RedisClientLike } from '../../src/backends/redis/connection.js';
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
  it('is ready on its ready event though its connect() never settles, so waits are woken by the next PUBLISH on their stream channel (issue 12)', async () => {
    const subscriber = fakeClient(() => new Promise<void>(() => {}));
    const subscribed: unknown[][] = [];
    subscriber.call = (...args: unknown[]) => {
      subscribed.push(args);
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
      expect(subscribed).toEqual([['subscribe', new KeyLayout('p').appendChannel('s')]]);
      subscriber.emit('message', new KeyLayout('p').appendChannel('s'), '');
      expect(await woken).toBe(true);
      expect(backend.listening).toBe(true);
    } finally {
      await backend.close();
    }
  });
});

describe('the append subscriber and its ready events', () => {
  it('a ready while the first SUBSCRIBE is on its way wakes nobody (a Cluster subscriber emits one); a ready after it wakes every wait', async () => {
    const subscriber = fakeClient(() => Promise.resolve());
    let answer: (() => void) | null = null;
    subscriber.call = () => new Promise((resolve) => (answer = () => resolve(null)));
    const client = fakeClient(() => Promise.resolve());
    client.duplicate = () => subscriber;
    const backend = redisBackend({ client: client as never }, { prefix: 'p' });
    const settled = async (p: Promise<boolean>): Promise<boolean | 'pending'> =>
      Promise.race([p, new Promise<'pending'>((resolve) => setImmediate(() => resolve('pending')))]);
    try {
      const first = backend.waitForAppend('s', 60_000);
      await new Promise((resolve) => setImmediate(resolve));
      expect(answer).not.toBeNull();
      subscriber.emit('ready');
      expect(await settled(first)).toBe('pending');
      answer!();
      await new Promise((resolve) => setImmediate(resolve));
      // A reconnect: whatever was published meanwhile went unheard.
      subscriber.emit('ready');
      expect(await settled(first)).toBe(true);
    } finally {
      await backend.close();
    }
  });
});

describe('textOf', () => {
  it('decodes the bulk strings of a script reply as UTF-8 at every depth, and keeps integers, nulls and empty arrays', () => {
    const reply = [Buffer.from('1700000000000'), [[7, 1, Buffer.from('t'), Buffer.from('{"é":"ü"}')]], 0, null, [], Buffer.alloc(0)];
    expect(textOf(reply)).toEqual(['1700000000000', [[7, 1, 't', '{"é":"ü"}']], 0, null, [], '']);
  });
});
