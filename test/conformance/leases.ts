import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import type { Rheo } from '../../src/rheo.js';
import { appendN, expectCode, sequences, useFixture, type BackendFactory } from './fixture.js';

/** Everything a stale settle must leave alone: lag, group info, dead letters. */
async function snapshot(rheo: Rheo, stream: string, group: string): Promise<unknown> {
  return {
    lag: await rheo.lag(stream, group),
    info: await rheo.groupInfo(stream, group),
    dead: await rheo.deadLetters(stream, group),
  };
}

export function registerLeaseTests(makeBackend: BackendFactory): void {
  describe('lease expiry and fencing', () => {
    const fx = useFixture(makeBackend);

    /** One event, leased for 1000 ms, expired and reclaimed: returns [stale, current]. */
    async function reclaimed(rheo: Rheo, advance: (ms: number) => void): Promise<[Lease, Lease]> {
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      const [old] = await rheo.fetch('s', 'g', { leaseMs: 1000 });
      advance(1000);
      const [current] = await rheo.fetch('s', 'g', { leaseMs: 1000 });
      return [old!, current!];
    }

    it('a live lease is not claimable again before it expires', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      await rheo.fetch('s', 'g', { leaseMs: 1000 });
      clock.advance(999);
      expect(await rheo.fetch('s', 'g')).toEqual([]);
    });

    it('an expired lease is reclaimed with a new leaseId and attempt + 1', async () => {
      const { rheo, clock } = fx();
      const [old, current] = await reclaimed(rheo, (ms) => clock.advance(ms));
      expect(current.event).toEqual(old.event);
      expect(current.receipt).toBe(old.receipt);
      expect(current.leaseId).not.toBe(old.leaseId);
      expect(current.attempt).toBe(2);
      expect(current.leasedAt.getTime()).toBe(clock.now());
    });

    it('each further expiry raises the attempt by one', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g', { maxAttempts: 10 });
      await appendN(rheo, 's', 1);
      const attempts: number[] = [];
      for (let i = 0; i < 4; i++) {
        const [lease] = await rheo.fetch('s', 'g', { leaseMs: 100 });
        attempts.push(lease!.attempt);
        clock.advance(100);
      }
      expect(attempts).toEqual([1, 2, 3, 4]);
    });

    for (const kind of ['ack', 'nack', 'reject', 'release', 'renew'] as const) {
      it(`${kind} with the old token after a reclaim is stale_lease and changes nothing`, async () => {
        const { rheo, clock } = fx();
        const [old, current] = await reclaimed(rheo, (ms) => clock.advance(ms));
        const before = await snapshot(rheo, 's', 'g');
        const call =
          kind === 'ack'
            ? rheo.ack(old)
            : kind === 'nack'
              ? rheo.nack(old, 'late')
              : kind === 'reject'
                ? rheo.reject(old, 'late')
                : kind === 'release'
                  ? rheo.release(old)
                  : rheo.renew(old, { leaseMs: 60_000 });
        const error = await expectCode(call, 'stale_lease');
        expect(error.message).toContain('"s"');
        expect(error.message).toContain('"g"');
        expect(await snapshot(rheo, 's', 'g')).toEqual(before);
        // The current holder is untouched: its lease expires exactly when it did, not earlier or later.
        clock.advance(999);
        expect(await rheo.fetch('s', 'g')).toEqual([]);
        clock.advance(1);
        const [next] = await rheo.fetch('s', 'g');
        expect(next!.attempt).toBe(current.attempt + 1);
        await rheo.ack(next!);
        expect((await rheo.lag('s', 'g')).lag).toBe(0);
      });
    }

    it('a second ack of the same lease is stale_lease', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      const [lease] = await rheo.fetch('s', 'g');
      await rheo.ack(lease!);
      const before = await snapshot(rheo, 's', 'g');
      await expectCode(rheo.ack(lease!), 'stale_lease');
      expect(await snapshot(rheo, 's', 'g')).toEqual(before);
    });

    it('a made-up leaseId is stale_lease', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      const [lease] = await rheo.fetch('s', 'g');
      await expectCode(rheo.ack({ ...lease!, leaseId: 'forged-token-0000' }), 'stale_lease');
      expect((await rheo.groupInfo('s', 'g')).inflight).toBe(1);
    });

    it("a lease of one group cannot settle another group's delivery", async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'a');
      await rheo.createGroup('s', 'b');
      await appendN(rheo, 's', 1);
      const [leaseA] = await rheo.fetch('s', 'a');
      await rheo.fetch('s', 'b');
      await expectCode(rheo.ack({ ...leaseA!, group: 'b' }), 'stale_lease');
      expect((await rheo.groupInfo('s', 'b')).inflight).toBe(1);
    });

    it('ack after expiry but before anyone reclaimed the lease succeeds', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      const [lease] = await rheo.fetch('s', 'g', { leaseMs: 1000 });
      clock.advance(5000);
      await rheo.ack(lease!);
      expect(await rheo.fetch('s', 'g')).toEqual([]);
      expect((await rheo.lag('s', 'g')).partitions[0]!.frontier).toBe(1);
    });

    it('an expired lease nobody reclaimed still counts as inflight', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 2);
      await rheo.fetch('s', 'g', { leaseMs: 1000, limit: 1 });
      clock.advance(2000);
      expect((await rheo.groupInfo('s', 'g')).inflight).toBe(1);
    });
  });

  describe('nack, reject, release', () => {
    const fx = useFixture(makeBackend);

    async function oneLease(rheo: Rheo, maxAttempts = 5): Promise<Lease> {
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g', { maxAttempts });
      await appendN(rheo, 's', 1);
      const [lease] = await rheo.fetch('s', 'g');
      return lease!;
    }

    it('nack without delay makes the delivery claimable at once with attempt 2', async () => {
      const { rheo } = fx();
      const lease = await oneLease(rheo);
      await rheo.nack(lease, 'try again');
      const [again] = await rheo.fetch('s', 'g');
      expect(again!.attempt).toBe(2);
      expect(again!.event).toEqual(lease.event);
      expect(again!.leaseId).not.toBe(lease.leaseId);
    });

    it('nack with delayMs hides the delivery until the delay has passed', async () => {
      const { rheo, clock } = fx();
      const lease = await oneLease(rheo);
      await rheo.nack(lease, 'later', { delayMs: 5000 });
      clock.advance(4999);
      expect(await rheo.fetch('s', 'g')).toEqual([]);
      clock.advance(1);
      const [again] = await rheo.fetch('s', 'g');
      expect(again!.attempt).toBe(2);
    });

    // PostgreSQL keeps a first delivery in a lease range and a redelivery as a
    // row of its own: the delay must hold on both shapes.
    for (const how of ['nack', 'expiry'] as const) {
      it(`nack with delayMs at attempt 2 (after ${how}) hides the delivery until the delay has passed`, async () => {
        const { rheo, clock } = fx();
        const first = await oneLease(rheo);
        if (how === 'nack') await rheo.nack(first);
        else clock.advance(30_000);
        const [second] = await rheo.fetch('s', 'g', { leaseMs: 30_000 });
        expect(second!.attempt).toBe(2);
        await rheo.nack(second!, 'later', { delayMs: 5000 });
        clock.advance(4999);
        expect(await rheo.fetch('s', 'g')).toEqual([]);
        expect((await rheo.groupInfo('s', 'g')).inflight).toBe(0);
        clock.advance(1);
        const [third] = await rheo.fetch('s', 'g');
        expect(third!.attempt).toBe(3);
        expect(third!.event.id).toBe(first.event.id);
      });
    }

    it('a delayed delivery does not block later sequences', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      const [first] = await rheo.fetch('s', 'g', { limit: 1 });
      await rheo.nack(first!, 'later', { delayMs: 60_000 });
      expect(sequences(await rheo.fetch('s', 'g'))).toEqual([2, 3]);
    });

    it('a nacked delivery is redelivered before higher sequences', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      const [first] = await rheo.fetch('s', 'g', { limit: 1 });
      await rheo.nack(first!);
      expect(sequences(await rheo.fetch('s', 'g', { limit: 1 }))).toEqual([1]);
    });

    it('nack at maxAttempts dead-letters with the reason', async () => {
      const { rheo, clock } = fx();
      const first = await oneLease(rheo, 2);
      await rheo.nack(first, 'boom 1');
      const [second] = await rheo.fetch('s', 'g');
      expect(second!.attempt).toBe(2);
      clock.advance(10);
      await rheo.nack(second!, 'boom 2');
      expect(await rheo.fetch('s', 'g')).toEqual([]);
      const dead = await rheo.deadLetters('s', 'g');
      expect(dead).toHaveLength(1);
      expect(dead[0]).toMatchObject({ stream: 's', group: 'g', attempt: 2, reason: 'boom 2' });
      expect(dead[0]!.event).toEqual(first.event);
      expect(dead[0]!.deadLetteredAt.getTime()).toBe(clock.now());
    });

    it('repeated expiry past maxAttempts dead-letters with reason "max attempts exceeded"', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g', { maxAttempts: 2 });
      await appendN(rheo, 's', 2);
      const [a1] = await rheo.fetch('s', 'g', { leaseMs: 100, limit: 1 });
      clock.advance(100);
      const [a2] = await rheo.fetch('s', 'g', { leaseMs: 100, limit: 1 });
      expect([a1!.attempt, a2!.attempt]).toEqual([1, 2]);
      expect(a2!.event.sequence).toBe(1);
      clock.advance(100);
      // The third claim of sequence 1 would be attempt 3: it is dead-lettered and the fetch moves on.
      const next = await rheo.fetch('s', 'g', { limit: 1 });
      expect(sequences(next)).toEqual([2]);
      const dead = await rheo.deadLetters('s', 'g');
      expect(dead.map((d) => [d.event.sequence, d.reason])).toEqual([[1, 'max attempts exceeded']]);
      expect(dead[0]!.attempt).toBe(2);
      await expectCode(rheo.ack(a2!), 'stale_lease');
    });

    it('a fetch of limit 1 dead-letters every spent delivery it passes, then claims the next', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g', { maxAttempts: 2 });
      await appendN(rheo, 's', 3);
      expect(await rheo.fetch('s', 'g', { leaseMs: 100, limit: 3 })).toHaveLength(3);
      clock.advance(100);
      expect((await rheo.fetch('s', 'g', { leaseMs: 100, limit: 3 })).map((l) => l.attempt)).toEqual([2, 2, 2]);
      clock.advance(100);
      await appendN(rheo, 's', 1);
      expect(sequences(await rheo.fetch('s', 'g', { limit: 1 }))).toEqual([4]);
      expect((await rheo.deadLetters('s', 'g')).map((d) => d.event.sequence)).toEqual([1, 2, 3]);
    });

    it('the spent deliveries one fetch finds in several partitions are dead-lettered in (partition, sequence) order, wherever its walk started', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s', { partitions: 3 });
      await rheo.createGroup('s', 'g', { maxAttempts: 1 });
      await rheo.appendBatch('s', [2, 2, 1, 1, 0, 0].map((partition, n) => ({ type: 't', partition, payload: { n } })));
      expect(await rheo.fetch('s', 'g', { leaseMs: 100, limit: 6 })).toHaveLength(6);
      clock.advance(100);
      // The first fetch turned the round-robin: this walk starts at a later partition than 0.
      expect(await rheo.fetch('s', 'g', { limit: 6 })).toEqual([]);
      const dead = await rheo.deadLetters('s', 'g');
      expect(dead.map((d) => [d.event.partition, d.event.sequence])).toEqual([
        [0, 1],
        [0, 2],
        [1, 1],
        [1, 2],
        [2, 1],
        [2, 2],
      ]);
    });

    // Issue 12 (differential seed -766177232): Redis gave a one-partition fetch
    // an extra turn, so it went on past its last claim and dead-lettered the
    // spent delivery behind it; the walk ends at the limit.
    for (const scope of ['the whole stream', 'one named partition'] as const) {
      it(`a fetch that reaches its limit leaves the spent delivery after its last claim alone (${scope})`, async () => {
        const { rheo, clock } = fx();
        await rheo.createStream('s', { partitions: scope === 'the whole stream' ? 1 : 2 });
        await rheo.createGroup('s', 'g', { maxAttempts: 1 });
        await rheo.appendBatch('s', [0, 1].map((n) => ({ type: 't', partition: 0, payload: { n } })));
        const partitions = scope === 'the whole stream' ? undefined : [0];
        const [first, second] = await rheo.fetch('s', 'g', { leaseMs: 100, limit: 2, partitions });
        expect(sequences([first!, second!])).toEqual([1, 2]);
        await rheo.release(first!);
        clock.advance(100);
        // Sequence 1 (released: attempt 1 again) is claimable, sequence 2 (expired at attempt 1) is spent.
        const again = await rheo.fetch('s', 'g', { leaseMs: 100, limit: 1, partitions });
        expect(again.map((l) => [l.event.sequence, l.attempt])).toEqual([[1, 1]]);
        expect(await rheo.deadLetters('s', 'g')).toEqual([]);
        expect((await rheo.groupInfo('s', 'g')).deadLetters).toBe(0);
        expect((await rheo.lag('s', 'g')).partitions[0]!.frontier).toBe(0);
        // The next walk that reaches it does dead-letter it.
        await rheo.ack(again[0]!);
        expect(await rheo.fetch('s', 'g', { limit: 1, partitions })).toEqual([]);
        expect((await rheo.deadLetters('s', 'g')).map((d) => [d.event.sequence, d.attempt, d.reason])).toEqual([[2, 1, 'max attempts exceeded']]);
      });
    }

    it('nack without a reason at maxAttempts dead-letters with reason null', async () => {
      const { rheo } = fx();
      const lease = await oneLease(rheo, 1);
      await rheo.nack(lease);
      expect((await rheo.deadLetters('s', 'g')).map((d) => [d.event.sequence, d.reason])).toEqual([[1, null]]);
    });

    it('maxAttempts 1 dead-letters on the first nack', async () => {
      const { rheo } = fx();
      const lease = await oneLease(rheo, 1);
      await rheo.nack(lease, 'once');
      expect((await rheo.deadLetters('s', 'g')).map((d) => d.reason)).toEqual(['once']);
    });

    it('reject dead-letters at once, with the reason, whatever the attempt', async () => {
      const { rheo } = fx();
      const lease = await oneLease(rheo, 5);
      await rheo.reject(lease, 'poison');
      expect(await rheo.fetch('s', 'g')).toEqual([]);
      const dead = await rheo.deadLetters('s', 'g');
      expect(dead.map((d) => [d.event.id, d.attempt, d.reason])).toEqual([[lease.event.id, 1, 'poison']]);
      const info = await rheo.groupInfo('s', 'g');
      expect([info.inflight, info.deadLetters]).toEqual([0, 1]);
    });

    it('reject without a reason stores reason null', async () => {
      const { rheo } = fx();
      const lease = await oneLease(rheo);
      await rheo.reject(lease);
      expect((await rheo.deadLetters('s', 'g'))[0]!.reason).toBeNull();
    });

    it('release gives the delivery back without spending an attempt', async () => {
      const { rheo } = fx();
      const lease = await oneLease(rheo);
      expect(lease.attempt).toBe(1);
      await rheo.release(lease);
      const [again] = await rheo.fetch('s', 'g');
      expect(again!.attempt).toBe(1);
      expect(again!.leaseId).not.toBe(lease.leaseId);
      await expectCode(rheo.ack(lease), 'stale_lease');
    });

    it('release after a retry repeats that attempt number', async () => {
      const { rheo } = fx();
      const lease = await oneLease(rheo);
      await rheo.nack(lease);
      const [second] = await rheo.fetch('s', 'g');
      await rheo.release(second!);
      const [third] = await rheo.fetch('s', 'g');
      expect([second!.attempt, third!.attempt]).toEqual([2, 2]);
    });

    it('release at maxAttempts does not dead-letter', async () => {
      const { rheo } = fx();
      const lease = await oneLease(rheo, 1);
      await rheo.release(lease);
      const [again] = await rheo.fetch('s', 'g');
      expect(again!.attempt).toBe(1);
      expect(await rheo.deadLetters('s', 'g')).toEqual([]);
    });

    it('ackMany returns one result per lease, mixing ok and stale_lease', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 4);
      const leases = await rheo.fetch('s', 'g');
      await rheo.ack(leases[1]!);
      const results = await rheo.ackMany([leases[0]!, leases[1]!, leases[2]!, leases[0]!]);
      expect(results.map((r) => (r.ok ? 'ok' : r.error.code))).toEqual(['ok', 'stale_lease', 'ok', 'stale_lease']);
      expect((await rheo.lag('s', 'g')).partitions[0]!.frontier).toBe(3);
    });

    it('nackMany, rejectMany and releaseMany settle each lease and report per lease', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 6);
      const leases = await rheo.fetch('s', 'g');
      const [a, b, c, d, e, f] = leases as [Lease, Lease, Lease, Lease, Lease, Lease];
      await rheo.ack(f);
      expect((await rheo.nackMany([a, f], 'n')).map((r) => r.ok)).toEqual([true, false]);
      expect((await rheo.rejectMany([b, c], 'r')).map((r) => r.ok)).toEqual([true, true]);
      expect((await rheo.releaseMany([d, e])).map((r) => r.ok)).toEqual([true, true]);
      const again = await rheo.fetch('s', 'g');
      expect(again.map((l) => [l.event.sequence, l.attempt])).toEqual([
        [1, 2],
        [4, 1],
        [5, 1],
      ]);
      expect((await rheo.deadLetters('s', 'g')).map((x) => [x.event.sequence, x.reason])).toEqual([
        [2, 'r'],
        [3, 'r'],
      ]);
    });
  });
}
