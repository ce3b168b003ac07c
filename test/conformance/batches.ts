import { describe, expect, it } from 'vitest';
import type { Lease, SettleRequest, SettleResult } from '../../src/core/types.js';
import type { Rheo } from '../../src/rheo.js';
import { appendN, useFixture, type BackendFactory } from './fixture.js';

function codes(results: Array<{ ok: true } | { ok: false; error: { code: string } }>): string[] {
  return results.map((r) => (r.ok ? 'ok' : r.error.code));
}

/** Items a caller could pass that no fetch returned, each poisoned differently. */
function poisoned(lease: Lease): Record<string, unknown> {
  const revocable = Proxy.revocable({ ...lease }, {});
  revocable.revoke();
  let reads = 0;
  return {
    'NUL in leaseId': { ...lease, leaseId: `${lease.leaseId}\u0000` },
    'lone surrogate in leaseId': { ...lease, leaseId: `${lease.leaseId}\ud800` },
    'a throwing leaseId getter': Object.defineProperty({ ...lease }, 'leaseId', {
      get() {
        throw new Error('boom');
      },
    }),
    'a throwing event getter': Object.defineProperty({ ...lease }, 'event', {
      get() {
        throw new Error('boom');
      },
    }),
    'a Proxy whose get trap throws': new Proxy({ ...lease }, {
      get() {
        throw new Error('trap');
      },
    }),
    'a revoked Proxy': revocable.proxy,
    // Valid on the first read, NUL on any later one: only a single read is safe.
    'a Proxy that answers differently on each read': new Proxy({ ...lease }, {
      get(target, key, receiver) {
        if (key === 'leaseId') return reads++ === 0 ? 'a-valid-looking-id' : '\u0000';
        return Reflect.get(target, key, receiver) as unknown;
      },
    }),
    'a partition beyond any int': { ...lease, event: { ...lease.event, partition: 2 ** 40 } },
    'a sequence of 0': { ...lease, event: { ...lease.event, sequence: 0 } },
    'a thrown non-Error': Object.defineProperty({ ...lease }, 'stream', {
      get() {
        throw Symbol('odd');
      },
    }),
  };
}

export function registerBatchTests(makeBackend: BackendFactory): void {
  describe('batch settles answer per item', () => {
    const fx = useFixture(makeBackend);

    async function setup(rheo: Rheo, events: number): Promise<Lease[]> {
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', events);
      return rheo.fetch('s', 'g', { leaseMs: 1000, limit: events });
    }

    /** The delivery leased by `first`, expired and reclaimed: [stale, fresh]. */
    async function reclaim(rheo: Rheo, advance: (ms: number) => void): Promise<[Lease, Lease]> {
      const [old] = await setup(rheo, 1);
      advance(1000);
      const [fresh] = await rheo.fetch('s', 'g', { leaseMs: 1000 });
      expect(fresh!.leaseId).not.toBe(old!.leaseId);
      return [old!, fresh!];
    }

    it('ackMany judges a fresh lease by its own id when a stale lease of the same event comes first', async () => {
      const { rheo, clock } = fx();
      const [stale, fresh] = await reclaim(rheo, (ms) => clock.advance(ms));
      expect(codes(await rheo.ackMany([stale, fresh]))).toEqual(['stale_lease', 'ok']);
      expect((await rheo.lag('s', 'g')).partitions[0]!.frontier).toBe(1);
    });

    it('ackMany judges a stale lease that follows the fresh one of the same event as stale', async () => {
      const { rheo, clock } = fx();
      const [stale, fresh] = await reclaim(rheo, (ms) => clock.advance(ms));
      expect(codes(await rheo.ackMany([fresh, stale]))).toEqual(['ok', 'stale_lease']);
      expect((await rheo.lag('s', 'g')).partitions[0]!.frontier).toBe(1);
    });

    it('a stale and a fresh lease of a redelivered event in one settleMany: only the fresh one applies', async () => {
      const { rheo, clock } = fx();
      const [first] = await setup(rheo, 1);
      await rheo.nack(first!, 'again');
      const [second] = await rheo.fetch('s', 'g', { leaseMs: 1000 });
      clock.advance(1000);
      const [third] = await rheo.fetch('s', 'g', { leaseMs: 1000 });
      expect(third!.attempt).toBe(3);
      const results = await rheo.settleMany([
        { kind: 'reject', lease: second!, reason: 'stale' },
        { kind: 'nack', lease: third!, reason: 'fresh', delayMs: 0 },
      ]);
      expect(codes(results)).toEqual(['stale_lease', 'ok']);
      expect(await rheo.deadLetters('s', 'g')).toEqual([]);
      const [fourth] = await rheo.fetch('s', 'g');
      expect(fourth!.attempt).toBe(4);
    });

    it('the same lease twice in one batch applies once', async () => {
      const { rheo } = fx();
      const [lease] = await setup(rheo, 1);
      expect(codes(await rheo.nackMany([lease!, lease!], 'r'))).toEqual(['ok', 'stale_lease']);
      const [again] = await rheo.fetch('s', 'g');
      expect(again!.attempt).toBe(2);
    });

    it('the same lease acked twice in one ackMany applies once, beside the batch\'s other acks', async () => {
      const { rheo } = fx();
      const [a, b, c] = await setup(rheo, 3);
      expect(codes(await rheo.ackMany([a!, b!, a!, c!, b!]))).toEqual(['ok', 'ok', 'stale_lease', 'ok', 'stale_lease']);
      expect((await rheo.groupInfo('s', 'g')).inflight).toBe(0);
      expect((await rheo.lag('s', 'g')).lag).toBe(0);
    });

    for (const name of Object.keys(poisoned({ event: {} } as Lease))) {
      it(`ackMany with ${name} answers that item on its own and acks the others`, async () => {
        const { rheo } = fx();
        const [a, b, c] = await setup(rheo, 3);
        const bad = poisoned(b!)[name] as Lease;
        const results = await rheo.ackMany([a!, bad, c!]);
        // The changing Proxy is read once, as a well-formed id that no fetch issued.
        const expected = name === 'a Proxy that answers differently on each read' ? 'stale_lease' : 'invalid_argument';
        expect(codes(results)).toEqual(['ok', expected, 'ok']);
        // b is still held under its real lease: the poisoned item changed nothing.
        expect((await rheo.groupInfo('s', 'g')).inflight).toBe(1);
        await rheo.ack(b!);
        expect((await rheo.lag('s', 'g')).lag).toBe(0);
      });
    }

    it('settleMany, nackMany, rejectMany, releaseMany and renewMany answer a poisoned item per item', async () => {
      const { rheo } = fx();
      const leases = await setup(rheo, 6);
      const [a, b, c, d, e, f] = leases as [Lease, Lease, Lease, Lease, Lease, Lease];
      const bad = (lease: Lease): Lease => poisoned(lease)['a Proxy whose get trap throws'] as Lease;
      const renewed = await rheo.renewMany([a, bad(a), f]);
      expect(codes(renewed)).toEqual(['ok', 'invalid_argument', 'ok']);
      const mixed: SettleRequest[] = [
        { kind: 'ack', lease: a },
        { kind: 'ack', lease: bad(b) },
        new Proxy({ kind: 'ack', lease: b } as SettleRequest, {
          get() {
            throw new Error('trap');
          },
        }),
      ];
      expect(codes(await rheo.settleMany(mixed))).toEqual(['ok', 'invalid_argument', 'invalid_argument']);
      const each: SettleResult[][] = [
        await rheo.nackMany([bad(b), b], 'n'),
        await rheo.rejectMany([c, bad(c)], 'r'),
        await rheo.releaseMany([bad(d), d]),
      ];
      expect(each.map(codes)).toEqual([
        ['invalid_argument', 'ok'],
        ['ok', 'invalid_argument'],
        ['invalid_argument', 'ok'],
      ]);
      expect(codes(await rheo.ackMany([e, f]))).toEqual(['ok', 'ok']);
      expect((await rheo.deadLetters('s', 'g')).map((x) => x.event.sequence)).toEqual([3]);
    });

    it('a batch that is not a readable array is invalid_argument, whatever it holds', async () => {
      const { rheo } = fx();
      const revocable = Proxy.revocable([] as Lease[], {});
      revocable.revoke();
      await expect(rheo.ackMany(revocable.proxy)).rejects.toMatchObject({ code: 'invalid_argument' });
      await expect(rheo.ackMany({ length: 1 } as unknown as Lease[])).rejects.toMatchObject({ code: 'invalid_argument' });
    });

    it('an array Proxy whose element trap throws answers that element per item', async () => {
      const { rheo } = fx();
      const [a, b] = await setup(rheo, 2);
      const items = new Proxy([a!, a!, b!], {
        get(target, key, receiver) {
          if (key === '1') throw new Error('trap');
          return Reflect.get(target, key, receiver) as unknown;
        },
      });
      expect(codes(await rheo.ackMany(items))).toEqual(['ok', 'invalid_argument', 'ok']);
    });
  });
}
