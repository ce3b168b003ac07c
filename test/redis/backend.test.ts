import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { RheoError } from '../../src/core/errors.js';
import { memoryBackend } from '../../src/backends/memory/memory-backend.js';
import { startThrowawayRedis } from '../../scripts/throwaway-redis.js';
import { KeyLayout } from '../../src/backends/redis/keys.js';
import { redisBackend, type RedisBackend } from '../../src/backends/redis/redis-backend.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { ownRedisBackend, uniquePrefix, useRedis } from '../support/redis.js';

const redis = useRedis('single');

/**
 * A writer and a second backend on its prefix, as two processes would have,
 * with stream `s`; the reader's subscription is in place once an append has
 * woken one of its waits (its first SUBSCRIBE may reach Redis after the
 * first PUBLISH).
 */
async function pubSubPair(): Promise<{ writer: Rheo; reader: RedisBackend; close(): Promise<void> }> {
  const prefix = uniquePrefix();
  const writer = createRheo({ backend: redisBackend({ url: redis().urls[0]! }, { prefix }) });
  const reader = redisBackend({ url: redis().urls[0]! }, { prefix });
  const close = async (): Promise<void> => {
    await writer.close();
    await reader.close();
  };
  try {
    await writer.migrate();
    await writer.createStream('s');
    let subscribed = false;
    for (let i = 0; i < 40 && !subscribed; i++) {
      const wait = reader.waitForAppend('s', 250);
      await writer.append('s', { payload: 'ping' });
      subscribed = await wait;
    }
    expect(subscribed).toBe(true);
    return { writer, reader, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * The text of each socket write of a borrowed client, as it is made (each
 * `_write` or `_writev` the socket runs is one write to the kernel).
 */
function socketWrites(client: Redis): string[] {
  type Chunk = { chunk: unknown };
  const socket = (client as unknown as { stream: { _write: (c: unknown, e: string, cb: () => void) => void; _writev?: (cs: Chunk[], cb: () => void) => void } }).stream;
  const writes: string[] = [];
  const write = socket._write.bind(socket);
  socket._write = (chunk, encoding, cb) => {
    writes.push(String(chunk));
    write(chunk, encoding, cb);
  };
  const writev = socket._writev?.bind(socket);
  if (writev) {
    socket._writev = (chunks, cb) => {
      writes.push(chunks.map((c) => String(c.chunk)).join(''));
      writev(chunks, cb);
    };
  }
  return writes;
}

/** Calls `seen` with the name and arguments of every command the client sends, whichever way it was issued. */
function watchCommands(client: Redis, seen: (name: string, args: unknown[]) => void): void {
  type Sent = { name: string; args: unknown[] };
  const target = client as unknown as { sendCommand: (command: Sent, ...rest: unknown[]) => unknown };
  const send = target.sendCommand.bind(target);
  target.sendCommand = (command, ...rest) => {
    seen(command.name, command.args);
    return send(command, ...rest);
  };
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'no error';
  } catch (error) {
    return error instanceof RheoError ? error.code : `not a RheoError: ${String(error)}`;
  }
}

describe('redis backend: connections', () => {
  it('never closes a borrowed client', async () => {
    const client = new Redis(redis().urls[0]!, { lazyConnect: true });
    await client.connect();
    try {
      const rheo = createRheo({ backend: redisBackend({ client }, { prefix: uniquePrefix() }) });
      await rheo.migrate();
      await rheo.createStream('s');
      await rheo.close();
      expect(client.status).toBe('ready');
      expect(await client.ping()).toBe('PONG');
    } finally {
      client.disconnect();
    }
  });

  it('closes the client it created, and refuses calls afterwards with closed', async () => {
    const backend = ownRedisBackend(redis());
    const rheo = createRheo({ backend });
    await rheo.migrate();
    const before = Number(/connected_clients:(\d+)/.exec(await redis().client.info('clients'))![1]);
    await rheo.close();
    const after = Number(/connected_clients:(\d+)/.exec(await redis().client.info('clients'))![1]);
    expect(after).toBe(before - 1);
    expect(await codeOf(rheo.listStreams())).toBe('closed');
  });

  it('an unreachable server is backend_unavailable at once, not a hang, and the process lives on', async () => {
    const backend = redisBackend({ url: 'redis://127.0.0.1:9' }, { prefix: uniquePrefix() });
    const rheo = createRheo({ backend });
    const started = Date.now();
    expect(await codeOf(rheo.migrate())).toBe('backend_unavailable');
    expect(await codeOf(rheo.append('s', { payload: 1 }))).toBe('backend_unavailable');
    // Bounded by the connect attempt, not by a retry loop.
    expect(Date.now() - started).toBeLessThan(10_000);
    await rheo.close();
  });

  it('validates its configuration with invalid_argument', () => {
    const bad = [
      () => redisBackend({} as never),
      () => redisBackend({ url: 'http://x' }),
      () => redisBackend({ nodes: [] }),
      () => redisBackend({ url: 'redis://x', client: {} } as never),
      () => redisBackend({ url: 'redis://x' }, { prefix: 'a{b}' }),
      () => redisBackend({ url: 'redis://x' }, { prefix: '' }),
    ];
    for (const make of bad) {
      expect(make).toThrow(RheoError);
      try {
        make();
      } catch (error) {
        expect((error as RheoError).code).toBe('invalid_argument');
      }
    }
  });
});

describe('redis backend: scripts, time and wakeups', () => {
  it('reloads its scripts after SCRIPT FLUSH (NOSCRIPT), without the caller noticing', async () => {
    const backend = ownRedisBackend(redis());
    const rheo = createRheo({ backend });
    await rheo.migrate();
    await rheo.createStream('s', { partitions: 2 });
    await rheo.createGroup('s', 'g');
    await rheo.append('s', { payload: 1 });
    await redis().client.call('script', 'flush');
    await rheo.append('s', { payload: 2, partition: 1 });
    const leases = await rheo.fetch('s', 'g', { limit: 10 });
    expect(leases).toHaveLength(2);
    await redis().client.call('script', 'flush');
    expect((await rheo.ackMany(leases)).every((r) => r.ok)).toBe(true);
    expect((await rheo.lag('s', 'g')).lag).toBe(0);
    await rheo.close();
  });

  it('without an injected clock, leases run on the Redis server clock (TIME)', async () => {
    const backend = ownRedisBackend(redis());
    const rheo = createRheo({ backend });
    await rheo.migrate();
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    await rheo.append('s', { payload: 1 });
    const [seconds, micros] = (await redis().client.time()) as [number, number];
    const serverNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const [lease] = await rheo.fetch('s', 'g', { leaseMs: 60_000 });
    expect(Math.abs(lease!.leasedAt.getTime() - serverNow)).toBeLessThan(5_000);
    expect(lease!.expiresAt.getTime() - lease!.leasedAt.getTime()).toBe(60_000);
    await rheo.close();
  });

  it('an append through one backend wakes waitForAppend on another (pub/sub, as between processes)', async () => {
    const { writer, reader, close } = await pubSubPair();
    try {
      expect(reader.capabilities.notifications).toBe(true);
      expect(reader.listening).toBe(true);
      const woken = reader.waitForAppend('s', 30_000);
      await writer.append('s', { payload: 1 });
      expect(await woken).toBe(true);
      // Another stream's append does not wake it.
      await writer.createStream('other');
      const quiet = reader.waitForAppend('s', 200);
      await writer.append('other', { payload: 1 });
      expect(await quiet).toBe(false);
    } finally {
      await close();
    }
  });
});

describe('redis backend: the append wake-up on one server', () => {
  type Seen = Array<[string, 'script' | 'client']>;
  /**
   * Watches the server with MONITOR: every command that names `prefix`, with
   * whether a script ran it. MONITOR lists commands in the order the server
   * ran them, so `settled()` sends a barrier command and waits for it: then
   * every command the calls before it sent has shown. It returns those seen
   * since the last `settled()`.
   */
  async function watch(prefix: string): Promise<{ settled(): Promise<Seen>; stop(): void }> {
    const client = new Redis(redis().urls[0]!);
    const marker = new Redis(redis().urls[0]!);
    const monitor = await client.monitor();
    let seen: Seen = [];
    let barrier = '';
    let barrierSeen = false;
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (args[1] === barrier) barrierSeen = true;
      else if (args.some((a) => a.includes(prefix))) seen.push([args[0]!.toLowerCase(), source === 'lua' ? 'script' : 'client']);
    });
    return {
      settled: async () => {
        barrier = `${prefix}:barrier:${Math.random()}`;
        barrierSeen = false;
        await marker.exists(barrier);
        const deadline = Date.now() + 10_000;
        while (!barrierSeen) {
          if (Date.now() > deadline) throw new Error('MONITOR never showed the barrier');
          await new Promise((r) => setTimeout(r, 5));
        }
        const out = seen;
        seen = [];
        return out;
      },
      stop: () => {
        monitor.disconnect();
        marker.disconnect();
        client.disconnect();
      },
    };
  }
  const topLevel = (seen: Seen) => seen.filter(([, source]) => source === 'client').map(([command]) => command);

  it('publishes once per append call, from the appender after its scripts, never from inside one', async () => {
    const prefix = uniquePrefix();
    const rheo = createRheo({ backend: redisBackend({ url: redis().urls[0]! }, { prefix }) });
    try {
      await rheo.migrate();
      await rheo.createStream('s', { partitions: 4 });
      // Loads the script and caches the stream, so the calls watched send the appends alone.
      await rheo.append('s', { payload: 'first' });
      const monitor = await watch(prefix);
      try {
        await rheo.appendBatch('s', Array.from({ length: 8 }, (_, i) => ({ payload: i, partition: i % 4 })));
        expect(topLevel(await monitor.settled())).toEqual(['evalsha', 'evalsha', 'evalsha', 'evalsha', 'publish']);
        await rheo.append('s', { payload: 'one' });
        const one = await monitor.settled();
        expect(topLevel(one)).toEqual(['evalsha', 'publish']);
        expect(one.filter(([command, source]) => command === 'publish' && source === 'script')).toEqual([]);
        // A call whose events are all stored already, in partitions other than
        // the ones they route to, is answered from the lookup: no script and no
        // PUBLISH. One routed to the partition that holds it runs the script,
        // which finds it there; the PUBLISH is already on its way by then (it
        // leaves with the script), and wakes its waiters for nothing.
        const writes = async (): Promise<string[]> => topLevel(await monitor.settled()).filter((c) => c === 'evalsha' || c === 'publish');
        await rheo.append('s', { id: 'dup', payload: 1, partition: 1 });
        await rheo.append('s', { id: 'routed', payload: 1 });
        expect(await writes()).toEqual(['evalsha', 'publish', 'evalsha', 'publish']);
        await rheo.append('s', { id: 'dup', payload: 1 });
        expect(await writes()).toEqual([]);
        await rheo.append('s', { id: 'routed', payload: 1 });
        expect(await writes()).toEqual(['evalsha', 'publish']);
      } finally {
        monitor.stop();
      }
    } finally {
      await rheo.close();
    }
  });

  it('publishes again after a script the server had lost, which ran after the first PUBLISH', async () => {
    const prefix = uniquePrefix();
    const rheo = createRheo({ backend: redisBackend({ url: redis().urls[0]! }, { prefix }) });
    const admin = new Redis(redis().urls[0]!);
    try {
      await rheo.migrate();
      await rheo.createStream('s');
      await rheo.append('s', { payload: 0 });
      const monitor = await watch(prefix);
      try {
        await admin.script('FLUSH');
        await rheo.append('s', { payload: 1 });
        expect(topLevel(await monitor.settled())).toEqual(['evalsha', 'publish', 'eval', 'publish']);
      } finally {
        monitor.stop();
      }
      expect((await rheo.read('s', { limit: 10 })).map((e) => e.payload)).toEqual([0, 1]);
    } finally {
      admin.disconnect();
      await rheo.close();
    }
  });

  it('sends the PUBLISH in the same socket write as the append scripts, after them', async () => {
    // Redis then runs the PUBLISH right after the scripts, and writes the
    // subscribers it queued last before the appender it answered first, so
    // subscribers hear of the append before the appender has its answer. Which
    // socket the appender's process reads first is up to the kernel and the
    // load; what rheo controls is that the two commands leave together.
    const client = new Redis(redis().urls[0]!, { lazyConnect: true });
    await client.connect();
    const rheo = createRheo({ backend: redisBackend({ client }, { prefix: uniquePrefix() }) });
    try {
      await rheo.migrate();
      await rheo.createStream('one');
      await rheo.createStream('four', { partitions: 4 });
      await rheo.append('one', { payload: 'loads the script' });
      await rheo.append('four', { payload: 'caches the stream' });
      const writes = socketWrites(client);
      const commandsOf = (text: string): string[] => [...text.matchAll(/\r\n\$(?:7|4)\r\n(evalsha|publish|eval)\r\n/gi)].map((m) => m[1]!.toLowerCase());
      await rheo.append('one', { payload: 1 });
      expect(writes.map(commandsOf).filter((c) => c.length > 0)).toEqual([['evalsha', 'publish']]);
      writes.length = 0;
      await rheo.appendBatch('four', Array.from({ length: 4 }, (_, i) => ({ payload: i, partition: i })));
      expect(writes.map(commandsOf).filter((c) => c.length > 0)).toEqual([['evalsha', 'evalsha', 'evalsha', 'evalsha', 'publish']]);
    } finally {
      await rheo.close();
      client.disconnect();
    }
  });
});

describe('redis backend: time lookups', () => {
  it('notices timestamps going backwards before 1970 too, so startAt scans instead of binary-searching', async () => {
    const backend = ownRedisBackend(redis());
    const rheo = createRheo({ backend });
    await rheo.migrate();
    await rheo.createStream('s');
    await rheo.append('s', { payload: 1, timestamp: new Date(-2000) });
    await rheo.append('s', { payload: 2, timestamp: new Date(-3000) });
    // The first event at or after -2500 is sequence 1; a binary search over
    // these out-of-order timestamps would find none.
    await rheo.createGroup('s', 'g', { startAt: new Date(-2500) });
    expect((await rheo.fetch('s', 'g', { limit: 10 })).map((l) => l.event.sequence)).toEqual([1, 2]);
    await rheo.close();
  });
});

describe('redis backend: the append script', () => {
  it('indexes every id of a batch longer than one index write (1,000 ids), so a retry of the batch finds each one', async () => {
    const backend = ownRedisBackend(redis());
    const rheo = createRheo({ backend });
    await rheo.migrate();
    await rheo.createStream('s');
    const inputs: Array<{ id: string; payload: number | string }> = Array.from({ length: 2_501 }, (_, i) => ({ id: `id-${i}`, payload: i }));
    const first = await rheo.appendBatch('s', inputs);
    expect(first.map((e) => e.sequence)).toEqual(inputs.map((_, i) => i + 1));
    expect(first.every((e) => !e.existed)).toBe(true);
    // The retry mixes the whole batch with new ids on either side of each index write's edge.
    const again = await rheo.appendBatch('s', [{ id: 'new-a', payload: 'a' }, ...inputs, { id: 'new-b', payload: 'b' }]);
    expect(again.map((e) => [e.sequence, e.existed])).toEqual([[2_502, false], ...inputs.map((_, i) => [i + 1, true]), [2_503, false]]);
    expect(again.slice(1, -1).map((e) => e.payload)).toEqual(inputs.map((_, i) => i));
    await rheo.close();
  });
});

describe('redis backend: settle arguments', () => {
  it('a batch of acks sends two arguments per op (sequence, lease id); a mixed batch sends all six', async () => {
    const client = new Redis(redis().urls[0]!, { lazyConnect: true });
    await client.connect();
    const settleArgs: unknown[][] = [];
    watchCommands(client, (name, args) => {
      if (name === 'evalsha') settleArgs.push([name, ...args]);
    });
    try {
      const rheo = createRheo({ backend: redisBackend({ client }, { prefix: uniquePrefix() }) });
      await rheo.migrate();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', [1, 2, 3, 4, 5].map((payload) => ({ payload })));
      const leases = await rheo.fetch('s', 'g', { limit: 5 });
      // A settle call's arguments after its keys: now, partition, maxAttempts, layout, then the ops.
      const opsOf = (args: unknown[]) => args.slice(3 + Number(args[2]) + 4);
      settleArgs.length = 0;
      expect((await rheo.ackMany(leases.slice(0, 3))).every((r) => r.ok)).toBe(true);
      const acks = settleArgs.find((args) => args.includes('A'))!;
      // ioredis's Command holds its arguments as the strings it sends.
      expect(opsOf(acks)).toEqual(leases.slice(0, 3).flatMap((l) => [String(l.event.sequence), l.leaseId]));
      settleArgs.length = 0;
      await rheo.settleMany([
        { kind: 'ack', lease: leases[3]! },
        { kind: 'nack', lease: leases[4]!, reason: 'later' },
      ]);
      const mixed = settleArgs.find((args) => args.includes('G'))!;
      expect(opsOf(mixed)).toHaveLength(12);
      expect((await rheo.lag('s', 'g')).lag).toBe(1);
      await rheo.close();
    } finally {
      client.disconnect();
    }
  });
});

describe('redis backend: encodings of the open deliveries', () => {
  /** Stream `s` (1 partition) and group `g` on the server at `url`, a client of its own, and partition 0's d, o and t keys. */
  async function openOn(url: string): Promise<{ rheo: ReturnType<typeof createRheo>; client: Redis; keys: string[]; done: () => Promise<void> }> {
    const client = new Redis(url);
    const prefix = uniquePrefix();
    const rheo = createRheo({ backend: redisBackend({ client }, { prefix }) });
    await rheo.migrate();
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    const [, , , d, o, t] = new KeyLayout(prefix).group('s', 'g', 0);
    return {
      rheo,
      client,
      keys: [d!, o!, t!],
      done: async () => {
        await rheo.close();
        client.disconnect();
      },
    };
  }

  it('a claim of 8 or more leaves its partition\'s open, timer and delivery keys a skiplist and a hash table, with no entry of its own in them; a smaller one leaves them as they are', async () => {
    const { rheo, client, keys, done } = await openOn(redis().urls[0]!);
    const [d, o, t] = keys as [string, string, string];
    try {
      const append = (count: number) => rheo.appendBatch('s', Array.from({ length: count }, (_, n) => ({ payload: n })));
      const shape = async (): Promise<unknown[]> => [
        await client.object('ENCODING', d),
        await client.object('ENCODING', o),
        await client.object('ENCODING', t),
        await client.hlen(d),
        (await client.zrange(o, 0, -1)).map(Number),
        await client.zcard(t),
      ];
      const upTo = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);
      await append(8);
      // A short consumer id keeps every delivery row under the 64 bytes of a listpack entry.
      const first = await rheo.fetch('s', 'g', { limit: 8, consumerId: 'c' });
      expect(first).toHaveLength(8);
      expect(await shape()).toEqual(['hashtable', 'skiplist', 'skiplist', 8, upTo(8), 8]);
      // Claiming into keys already converted adds nothing of its own either.
      await append(2);
      const second = await rheo.fetch('s', 'g', { limit: 5, consumerId: 'c' });
      expect(second.map((l) => l.event.sequence)).toEqual([9, 10]);
      expect(await shape()).toEqual(['hashtable', 'skiplist', 'skiplist', 10, upTo(10), 10]);
      // Settled, the keys go as before.
      await rheo.ackMany([...first, ...second]);
      expect(await client.exists(d, o, t)).toBe(0);
      // A claim of 7 makes them as Redis would.
      await append(7);
      const third = await rheo.fetch('s', 'g', { limit: 7, consumerId: 'c' });
      expect(third).toHaveLength(7);
      expect(await shape()).toEqual(['listpack', 'listpack', 'listpack', 7, [11, 12, 13, 14, 15, 16, 17], 7]);
      // Rows longer than a listpack entry (a long consumer id) convert the delivery hash by themselves.
      await rheo.ackMany(third);
      await append(8);
      const fourth = await rheo.fetch('s', 'g', { limit: 8, consumerId: 'c'.repeat(40) });
      expect(fourth).toHaveLength(8);
      expect(await shape()).toEqual(['hashtable', 'skiplist', 'skiplist', 8, upTo(25).slice(17), 8]);
    } finally {
      await done();
    }
  });

  it('a server that refuses OBJECT (renamed away) still claims and settles, the keys holding only the claimed entries', async () => {
    const server = await startThrowawayRedis({ settings: ['--rename-command', 'OBJECT', 'OBJECT-renamed-away'], label: 'rheo-redis-no-object' });
    try {
      const { rheo, client, keys, done } = await openOn(server.urls[0]!);
      const [d, o, t] = keys as [string, string, string];
      try {
        await rheo.appendBatch('s', Array.from({ length: 10 }, (_, n) => ({ payload: n })));
        const leases = await rheo.fetch('s', 'g', { limit: 10, consumerId: 'c' });
        const sequences = leases.map((l) => l.event.sequence);
        expect(sequences).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        expect([await client.hlen(d), (await client.zrange(o, 0, -1)).map(Number), await client.zcard(t)]).toEqual([10, sequences, 10]);
        expect((await rheo.ackMany(leases)).every((r) => r.ok)).toBe(true);
        expect(await client.exists(d, o, t)).toBe(0);
      } finally {
        await done();
      }
    } finally {
      server.stop();
    }
  });
});

describe('redis backend: multi-partition fetch', () => {
  /** A rheo on a borrowed client whose script calls are counted. */
  async function counted(): Promise<{ rheo: ReturnType<typeof createRheo>; scripts: () => number; done: () => Promise<void> }> {
    const client = new Redis(redis().urls[0]!, { lazyConnect: true });
    await client.connect();
    let scripts = 0;
    watchCommands(client, (name) => {
      if (name === 'evalsha' || name === 'eval') scripts++;
    });
    const rheo = createRheo({ backend: redisBackend({ client }, { prefix: uniquePrefix() }) });
    return {
      rheo,
      scripts: () => scripts,
      done: async () => {
        await rheo.close();
        client.disconnect();
      },
    };
  }

  /** Stream `s` of 4 partitions with 4 events in each, and group `g`. */
  async function fourPartitions(rheo: ReturnType<typeof createRheo>): Promise<void> {
    await rheo.migrate();
    await rheo.createStream('s', { partitions: 4 });
    await rheo.createGroup('s', 'g');
    await rheo.appendBatch('s', Array.from({ length: 16 }, (_, i) => ({ payload: i, partition: i % 4 })));
  }

  /** A rheo on a borrowed client of its own. */
  async function borrowed(): Promise<{ client: Redis; backend: ReturnType<typeof redisBackend>; rheo: ReturnType<typeof createRheo>; done: () => Promise<void> }> {
    const client = new Redis(redis().urls[0]!, { lazyConnect: true });
    await client.connect();
    const backend = redisBackend({ client }, { prefix: uniquePrefix() });
    const rheo = createRheo({ backend });
    return {
      client,
      backend,
      rheo,
      done: async () => {
        await rheo.close();
        client.disconnect();
      },
    };
  }

  /** Counts the socket writes of a borrowed client. */
  function countWrites(client: Redis): () => number {
    const writes = socketWrites(client);
    return () => writes.length;
  }

  it('the CLAIMs of a multi-partition fetch, and the SETTLEs and renewals across partitions, leave in one socket write', async () => {
    const { client, rheo, done } = await borrowed();
    try {
      await fourPartitions(rheo);
      // The first fetch learns the sizes (PEEK, then CLAIM) and fills the caches;
      // its renewal and ack load RENEW and SETTLE on the server (NOSCRIPT, then EVAL).
      const first = await rheo.fetch('s', 'g', { limit: 4 });
      await rheo.renewMany(first, { leaseMs: 60_000 });
      expect((await rheo.ackMany(first)).every((r) => r.ok)).toBe(true);
      const writes = countWrites(client);
      const second = await rheo.fetch('s', 'g', { limit: 8 });
      expect(new Set(second.map((l) => l.event.partition)).size).toBe(4);
      expect(writes()).toBe(1);
      await rheo.renewMany(second, { leaseMs: 60_000 });
      expect(writes()).toBe(2);
      const acked = await rheo.ackMany(second);
      expect(acked.every((r) => r.ok)).toBe(true);
      expect(writes()).toBe(3);
      // Each of those was four script calls, one per partition.
      expect((await rheo.groupInfo('s', 'g')).inflight).toBe(0);
      // A call alone is sent at once, as before.
      const before = writes();
      await rheo.fetch('s', 'g', { limit: 1, partitions: [2] });
      expect(writes()).toBe(before + 1);
    } finally {
      await done();
    }
  });

  it('a burst whose calls are not all sent (a settle of a partition the stream lacks) still sends the rest, and the socket is not left corked', async () => {
    const { client, backend, rheo, done } = await borrowed();
    try {
      await rheo.migrate();
      await rheo.createStream('s', { partitions: 2 });
      await rheo.createGroup('s', 'g');
      await rheo.appendBatch('s', [{ payload: 0, partition: 0 }, { payload: 1, partition: 1 }]);
      const leases = await rheo.fetch('s', 'g', { limit: 2 });
      const refs = leases.map((l) => ({ stream: 's', group: 'g', partition: l.event.partition, sequence: l.event.sequence, leaseId: l.leaseId, kind: 'ack' as const }));
      // Partition 5 does not exist: its group of ops answers stale without a script call.
      const outcomes = await backend.settle([...refs, { stream: 's', group: 'g', partition: 5, sequence: 1, leaseId: 'x.1', kind: 'ack' }]);
      expect(outcomes.map((o) => o.ok)).toEqual([true, true, false]);
      expect((client as unknown as { stream: { writableCorked: number } }).stream.writableCorked).toBe(0);
      expect(await client.ping()).toBe('PONG');
      expect((await rheo.groupInfo('s', 'g')).inflight).toBe(0);
    } finally {
      await done();
    }
  });

  it('once every partition is known to hold only events the budget cannot be passed by, one CLAIM per partition and no PEEK', async () => {
    const { rheo, scripts, done } = await counted();
    try {
      await fourPartitions(rheo);
      // The first fetch learns each partition's largest size from PEEK.
      const first = await rheo.fetch('s', 'g', { limit: 4 });
      expect(new Set(first.map((l) => l.event.partition)).size).toBe(4);
      const before = scripts();
      const second = await rheo.fetch('s', 'g', { limit: 6 });
      expect(scripts() - before).toBe(4);
      // Round by round in rotation order (the second fetch starts at partition 1).
      expect(second.map((l) => `${l.event.partition}/${l.event.sequence}`)).toEqual(['1/2', '2/2', '3/2', '0/2', '1/3', '2/3']);
      // Partition 0 and 3 are short of a third round: the walk is planned again and the others give the rest.
      await rheo.ackMany([...first, ...second]);
      const third = await rheo.fetch('s', 'g', { limit: 6 });
      expect(third.map((l) => `${l.event.partition}/${l.event.sequence}`)).toEqual(['2/4', '3/3', '0/3', '1/4', '3/4', '0/4']);
    } finally {
      await done();
    }
  });

  it('an event larger than the plan assumed sends the fetch back to PEEK, releases what was claimed, and claims what the memory backend claims', async () => {
    const { rheo, done } = await counted();
    const memory = createRheo({ backend: memoryBackend() });
    try {
      await rheo.migrate();
      const answers: string[][] = [];
      for (const r of [rheo, memory]) {
        await r.createStream('s', { partitions: 2 });
        await r.createGroup('s', 'g');
        await r.appendBatch('s', Array.from({ length: 6 }, (_, i) => ({ payload: i, partition: i % 2 })));
        const warm = await r.fetch('s', 'g', { limit: 2 });
        await r.ackMany(warm);
        // About 1,200 bytes: more than maxBytes / limit below, so partition 1 refuses the plan
        // by counts after partition 0 claimed (and must release) its two; the budget then takes
        // the four small ones, not the large one after them.
        await r.append('s', { payload: 'x'.repeat(1_200), partition: 1 });
        const leases = await r.fetch('s', 'g', { limit: 6, maxBytes: 1_210 });
        expect(leases).toHaveLength(4);
        const again = await r.fetch('s', 'g', { limit: 10 });
        answers.push([...leases, ...again].map((l) => `${l.event.partition}/${l.event.sequence}@${l.attempt}`));
      }
      expect(answers[0]).toEqual(answers[1]);
      // Nothing was claimed twice, and what the refused plan claimed and released kept its first attempt.
      expect(answers[0]!.every((a) => a.endsWith('@1'))).toBe(true);
      expect(new Set(answers[0]).size).toBe(5);
    } finally {
      await done();
      await memory.close();
    }
  });
});
