import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { FetchRequest } from '../../src/core/backend.js';
import { RheoError } from '../../src/core/errors.js';
import type { Lease, RheoEvent } from '../../src/core/types.js';
import { redisBackend, type RedisBackend } from '../../src/backends/redis/redis-backend.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { ownRedisBackend, uniquePrefix, useRedis } from '../support/redis.js';

const redis = useRedis('single');

const REQUEST: FetchRequest = { limit: 10, consumerId: 'c', leaseMs: 30_000, partitions: null, maxBytes: 1 << 20 };

/** A consumer's backend and an appender's (a second backend on the same prefix, as another process), with stream `s` and group `g`, and an admin connection. */
async function pair(
  partitions = 1,
): Promise<{ backend: RedisBackend; rheo: Rheo; appender: Rheo; admin: Redis; earlier: string[]; close(): Promise<void> }> {
  const prefix = uniquePrefix();
  const backend = redisBackend({ url: redis().urls[0]! }, { prefix });
  const rheo = createRheo({ backend });
  const appender = createRheo({ backend: redisBackend({ url: redis().urls[0]! }, { prefix }) });
  const admin = new Redis(redis().urls[0]!);
  await rheo.migrate();
  await rheo.createStream('s', { partitions });
  await rheo.createGroup('s', 'g');
  return {
    backend,
    rheo,
    appender,
    admin,
    // Waits another test left blocked on the shared server (after a failure) are not this pair's.
    earlier: await blockedXreads(admin),
    async close() {
      await appender.close();
      await rheo.close();
      admin.disconnect();
    },
  };
}

/** The ids of the clients blocked in an XREAD right now (CLIENT LIST flag `b`). */
async function blockedXreads(admin: Redis): Promise<string[]> {
  const list = (await admin.call('client', 'list')) as string;
  return list
    .split('\n')
    .filter((line) => / flags=\S*b/.test(line) && / cmd=xread/.test(line))
    .map((line) => /\bid=(\d+)/.exec(line)![1]!);
}

/** Resolves once a client blocks in an XREAD (not counting `earlier` ones, left by another test): the wait has reached Redis. */
async function untilBlocked(admin: Redis, earlier: readonly string[] = []): Promise<string[]> {
  for (;;) {
    const ids = (await blockedXreads(admin)).filter((id) => !earlier.includes(id));
    if (ids.length > 0) return ids;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** A handler that records `pick(event)` of each event it is given, and `one`, resolved at the first. */
function recorder(pick: (event: RheoEvent) => number): { handled: number[]; one: Promise<void>; handler: (event: RheoEvent) => void } {
  const handled: number[] = [];
  let first: () => void = () => undefined;
  const one = new Promise<void>((resolve) => (first = resolve));
  return {
    handled,
    one,
    handler: (event) => {
      handled.push(pick(event));
      first();
    },
  };
}

function sequences(leases: Lease[]): number[] {
  return leases.map((l) => l.event.sequence);
}

describe('redis blocking fetch', () => {
  it('is a capability of a single server, off when asked, and its option is checked', async () => {
    const target = redis();
    expect(ownRedisBackend(target).capabilities.blockingFetch).toBe(true);
    expect(ownRedisBackend(target, { blockingFetch: false }).capabilities.blockingFetch).toBe(false);
    expect(() => redisBackend({ url: target.urls[0]! }, { blockingFetch: 'yes' as unknown as boolean })).toThrow(RheoError);
    expect(() => redisBackend({ url: target.urls[0]! }, { notify: 1 as unknown as boolean })).toThrow(/notify must be a boolean/);
    const off = ownRedisBackend(target, { blockingFetch: false });
    await off.migrate();
    expect(await off.fetchAfterAppend('s', 'g', REQUEST, 1_000, new AbortController().signal)).toBeNull();
  });

  it('claims the append it waited for in the same answer, the claim queued before the append', async () => {
    const t = await pair();
    try {
      expect(await t.backend.fetch('s', 'g', REQUEST)).toEqual([]);
      const waiting = t.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, new AbortController().signal);
      await untilBlocked(t.admin, t.earlier);
      await t.appender.appendBatch('s', [{ payload: 1 }, { payload: 2 }]);
      const got = (await waiting)!;
      expect(got.appended).toBe(true);
      expect(sequences(got.leases)).toEqual([1, 2]);
      expect(got.leases.map((l) => l.attempt)).toEqual([1, 1]);
      // The leases are real: they ack.
      const outcomes = await t.backend.settle(got.leases.map((l) => ({ stream: 's', group: 'g', partition: 0, sequence: l.event.sequence, leaseId: l.leaseId, kind: 'ack' as const })));
      expect(outcomes.every((o) => o.ok)).toBe(true);
    } finally {
      await t.close();
    }
  });

  it('does not miss an append that landed between the empty claim and the wait', async () => {
    const t = await pair();
    try {
      expect(await t.backend.fetch('s', 'g', REQUEST)).toEqual([]);
      await t.appender.append('s', { payload: 'between' });
      // A minute's timeout: the test would time out if the wait did not end at once.
      const got = (await t.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, new AbortController().signal))!;
      expect(got.appended).toBe(true);
      expect(sequences(got.leases)).toEqual([1]);
    } finally {
      await t.close();
    }
  });

  it('ends at its timeout with a claim that finds nothing', async () => {
    const t = await pair();
    try {
      await t.backend.fetch('s', 'g', REQUEST);
      expect(await t.backend.fetchAfterAppend('s', 'g', REQUEST, 20, new AbortController().signal)).toEqual({ leases: [], appended: false });
    } finally {
      await t.close();
    }
  });

  it('ends at an abort, leaving nothing claimed', async () => {
    const t = await pair();
    try {
      await t.backend.fetch('s', 'g', REQUEST);
      const abort = new AbortController();
      const waiting = t.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, abort.signal);
      const [first] = await untilBlocked(t.admin, t.earlier);
      abort.abort();
      expect(await waiting).toEqual({ leases: [], appended: false });
      expect((await blockedXreads(t.admin)).filter((id) => !t.earlier.includes(id))).toEqual([]);
      // The connection went back to the pool: the next wait reuses it.
      const again = new AbortController();
      const next = t.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, again.signal);
      expect(await untilBlocked(t.admin, t.earlier)).toEqual([first]);
      again.abort();
      expect(await next).toEqual({ leases: [], appended: false });
      await t.appender.append('s', { payload: 'later' });
      const [lease] = await t.backend.fetch('s', 'g', REQUEST);
      expect(lease!.attempt).toBe(1);
    } finally {
      await t.close();
    }
  });

  it('an abort while its connection is being opened ends it at once, with nothing sent', async () => {
    const t = await pair();
    try {
      await t.backend.fetch('s', 'g', REQUEST);
      const abort = new AbortController();
      // The first wait opens the connection; the abort lands before that is done. A minute's timeout: it would hang without the check.
      const waiting = t.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, abort.signal);
      abort.abort();
      expect(await waiting).toBeNull();
      expect((await blockedXreads(t.admin)).filter((id) => !t.earlier.includes(id))).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('answers null where it cannot wait so: no claim seen yet, a partition whose events may stop the walk at the byte budget, an aborted signal', async () => {
    const one = await pair();
    const many = await pair(4);
    try {
      expect(await one.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, new AbortController().signal)).toBeNull();
      // Partition 3 held an event larger than maxBytes / limit: its claim cannot be planned by counts.
      const large = 'x'.repeat(Math.ceil(REQUEST.maxBytes / REQUEST.limit) + 1);
      await many.appender.appendBatch('s', [0, 1, 2, 3].map((partition) => ({ partition, payload: partition === 3 ? large : partition })));
      expect(await many.backend.fetch('s', 'g', REQUEST)).toHaveLength(4);
      expect(await many.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, new AbortController().signal)).toBeNull();
      await one.backend.fetch('s', 'g', REQUEST);
      expect(await one.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, AbortSignal.abort())).toBeNull();
    } finally {
      await one.close();
      await many.close();
    }
  });

  it('on several partitions waits on every log and claims from whichever the append went to', async () => {
    const t = await pair(4);
    try {
      await t.appender.appendBatch('s', [0, 1, 2, 3].map((partition) => ({ partition, payload: partition })));
      // A short fetch: every partition's claim took all it had, and saw its tail.
      expect(await t.backend.fetch('s', 'g', REQUEST)).toHaveLength(4);
      const waiting = t.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, new AbortController().signal);
      await untilBlocked(t.admin, t.earlier);
      await t.appender.appendBatch('s', [{ partition: 2, payload: 'a' }, { partition: 2, payload: 'b' }]);
      const got = (await waiting)!;
      expect(got.appended).toBe(true);
      expect(got.leases.map((l) => [l.event.partition, l.event.sequence])).toEqual([
        [2, 2],
        [2, 3],
      ]);
      // An append that landed before the next wait ends it at once.
      await t.appender.append('s', { partition: 0, payload: 'between' });
      const next = (await t.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, new AbortController().signal))!;
      expect(next.leases.map((l) => [l.event.partition, l.event.sequence])).toEqual([[0, 2]]);
      // The first round's shares come back short where a partition has less: the rest of the walk goes on the main connection.
      await t.appender.appendBatch('s', [...Array.from({ length: 6 }, () => ({ partition: 1, payload: 'p1' })), { partition: 3, payload: 'p3' }]);
      const five = (await t.backend.fetchAfterAppend('s', 'g', { ...REQUEST, limit: 5 }, 60_000, new AbortController().signal))!;
      expect(five.appended).toBe(true);
      const perPartition = new Map<number, number>();
      for (const l of five.leases) perPartition.set(l.event.partition, (perPartition.get(l.event.partition) ?? 0) + 1);
      expect(Object.fromEntries(perPartition)).toEqual({ 1: 4, 3: 1 });
    } finally {
      await t.close();
    }
  });

  it('a killed blocking connection answers null, claims nothing, and pub/sub takes over', async () => {
    const t = await pair();
    try {
      await t.backend.fetch('s', 'g', REQUEST);
      const waiting = t.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, new AbortController().signal);
      const [id] = await untilBlocked(t.admin, t.earlier);
      expect(await t.admin.call('client', 'kill', 'id', id!)).toBe(1);
      expect(await waiting).toBeNull();
      // For a while the waits go through pub/sub: null at once.
      expect(await t.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, new AbortController().signal)).toBeNull();
      await t.appender.append('s', { payload: 'after the kill' });
      const [lease] = await t.backend.fetch('s', 'g', REQUEST);
      expect(lease!.attempt).toBe(1);
    } finally {
      await t.close();
    }
  });

  it('a server that refuses XREAD (an ACL without it) answers the claim behind it, loses nothing, and the waits go through pub/sub', async () => {
    const t = await pair();
    const user = `noxread-${process.pid}`;
    await t.admin.call('acl', 'setuser', user, 'on', 'nopass', '~*', '&*', '+@all', '-xread');
    const url = new URL(redis().urls[0]!);
    url.username = user;
    const backend = redisBackend({ url: url.href }, { prefix: t.backend.prefix });
    try {
      await backend.fetch('s', 'g', REQUEST);
      await t.appender.append('s', { payload: 'claimed anyway' });
      const got = await backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, new AbortController().signal);
      expect(got).not.toBeNull();
      expect(got!.appended).toBe(false);
      expect(sequences(got!.leases)).toEqual([1]);
      expect(got!.leases[0]!.attempt).toBe(1);
      // Then pub/sub for a while: null at once.
      expect(await backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, new AbortController().signal)).toBeNull();
    } finally {
      await backend.close();
      await t.admin.call('acl', 'deluser', user);
      await t.close();
    }
  });

  it('reports a group deleted while it waited, as fetch would', async () => {
    const t = await pair();
    try {
      await t.backend.fetch('s', 'g', REQUEST);
      // Handled from the start: it fails before the append that ends its wait has its own answer.
      const failing = t.backend.fetchAfterAppend('s', 'g', REQUEST, 60_000, new AbortController().signal).then(
        () => null,
        (e: unknown) => e,
      );
      await untilBlocked(t.admin, t.earlier);
      await t.appender.deleteGroup('s', 'g', { confirm: true });
      await t.appender.append('s', { payload: 'orphan' });
      const error = await failing;
      expect(error).toBeInstanceOf(RheoError);
      expect((error as RheoError).code).toBe('group_not_found');
    } finally {
      await t.close();
    }
  });

  it('an idle consumer claims through it, and stops at once while it waits', async () => {
    const t = await pair();
    try {
      const { handled, one, handler } = recorder((event) => event.sequence);
      const consumer = t.rheo.consume({ stream: 's', group: 'g', pollMs: 60_000, handler });
      // Idle: its next claim waits in Redis (the poll is a minute away).
      await untilBlocked(t.admin, t.earlier);
      await t.appender.append('s', { payload: 'wake' });
      await one;
      expect(handled).toEqual([1]);
      await untilBlocked(t.admin, t.earlier);
      const stopping = consumer.stop();
      await stopping;
      expect((await blockedXreads(t.admin)).filter((id) => !t.earlier.includes(id))).toEqual([]);
      expect(consumer.stats()).toMatchObject({ held: 0, handled: 1, acked: 1 });
      expect((await t.rheo.groupInfo('s', 'g')).inflight).toBe(0);
    } finally {
      await t.close();
    }
  });

  it('an idle RheoProducer claims through it too, and closes at once while it waits', async () => {
    const t = await pair();
    try {
      const producer = t.rheo.producer({ stream: 's', group: 'g', pollMs: 60_000 });
      const leases: Lease[] = [];
      let gotOne: () => void = () => undefined;
      const one = new Promise<void>((resolve) => (gotOne = resolve));
      producer.on('data', (lease: Lease) => {
        leases.push(lease);
        gotOne();
      });
      await untilBlocked(t.admin, t.earlier);
      await t.appender.append('s', { payload: 'to the pipeline' });
      await one;
      expect(sequences(leases)).toEqual([1]);
      await producer.ack(leases[0]!);
      await untilBlocked(t.admin, t.earlier);
      await producer.close();
      expect((await blockedXreads(t.admin)).filter((id) => !t.earlier.includes(id))).toEqual([]);
      expect((await t.rheo.groupInfo('s', 'g')).inflight).toBe(0);
    } finally {
      await t.close();
    }
  });

  describe('partition mode', () => {
    const SESSION = { sessionMs: 10_000, rebalanceTimeoutMs: 5_000 };

    it('reads the append it waited for in the same answer, fenced: a member that lost the partition gets stale_generation', async () => {
      const t = await pair(1);
      try {
        const a = await t.rheo.heartbeat('s', 'g', { memberId: 'a', ...SESSION });
        const fence = { stream: 's', group: 'g', partition: 0, memberId: 'a', generation: a.owned[0]!.generation };
        const waiting = t.backend.readOwnedAfterAppend(fence, 0, 10, REQUEST.maxBytes, 60_000, new AbortController().signal);
        await untilBlocked(t.admin, t.earlier);
        await t.appender.appendBatch('s', [{ payload: 1 }, { payload: 2 }]);
        const got = (await waiting)!;
        expect(got.appended).toBe(true);
        expect(got.events.map((e) => e.sequence)).toEqual([1, 2]);
        // An event past `after` already there ends the wait at once.
        expect((await t.backend.readOwnedAfterAppend(fence, 1, 10, REQUEST.maxBytes, 60_000, new AbortController().signal))!.events.map((e) => e.sequence)).toEqual([2]);
        // The partition moves to "b" while "a" waits: the read behind the wait is fenced.
        const stale = t.backend.readOwnedAfterAppend(fence, 2, 10, REQUEST.maxBytes, 60_000, new AbortController().signal).then(
          () => null,
          (e: unknown) => e,
        );
        await untilBlocked(t.admin, t.earlier);
        await t.rheo.releasePartitions([fence]);
        await t.rheo.heartbeat('s', 'g', { memberId: 'b', ...SESSION });
        await t.appender.append('s', { payload: 3 });
        const error = await stale;
        expect(error).toBeInstanceOf(RheoError);
        expect((error as RheoError).code).toBe('stale_generation');
      } finally {
        await t.close();
      }
    });

    it('a member whose wait is killed goes on through pub/sub and the poll, nothing lost', async () => {
      const t = await pair(1);
      try {
        const handled: number[] = [];
        const consumer = t.rheo.consume({
          stream: 's',
          group: 'g',
          assignment: 'partitions',
          pollMs: 100,
          handler: (event) => void handled.push(event.sequence),
        });
        const [id] = await untilBlocked(t.admin, t.earlier);
        expect(await t.admin.call('client', 'kill', 'id', id!)).toBe(1);
        await t.appender.appendBatch('s', [{ payload: 1 }, { payload: 2 }]);
        while (handled.length < 2) await new Promise((resolve) => setImmediate(resolve));
        await t.appender.append('s', { payload: 3 });
        while (handled.length < 3) await new Promise((resolve) => setImmediate(resolve));
        expect(handled).toEqual([1, 2, 3]);
        await consumer.stop();
      } finally {
        await t.close();
      }
    });

    it('an idle member reads through it, and stops at once while it waits', async () => {
      const t = await pair(2);
      try {
        const { handled, one, handler } = recorder((event) => event.partition);
        const consumer = t.rheo.consume({ stream: 's', group: 'g', assignment: 'partitions', pollMs: 60_000, handler });
        // One wait per owned partition.
        for (;;) {
          const blocked = (await blockedXreads(t.admin)).filter((id) => !t.earlier.includes(id));
          if (blocked.length === 2) break;
          await new Promise((resolve) => setImmediate(resolve));
        }
        await t.appender.append('s', { partition: 1, payload: 'wake' });
        await one;
        expect(handled).toEqual([1]);
        await consumer.stop();
        expect((await blockedXreads(t.admin)).filter((id) => !t.earlier.includes(id))).toEqual([]);
      } finally {
        await t.close();
      }
    });
  });
});
