import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import type { RenewSummary } from '../../src/producer/inflight-tracker.js';
import type { LeaseLostInfo, RenewErrorInfo } from '../../src/producer/producer-options.js';
import { backendFactories } from '../support/backends.js';
import { useStreamsFixture } from './support/fixture.js';
import { nextEvent, readOne } from './support/wait.js';

for (const factory of backendFactories) {
  describe(`producer renewal (${factory.name})`, () => {
    const fx = useStreamsFixture(factory);

    it('keeps a slow handler’s lease alive past its original expiry', async () => {
      const { rheo, timers, stream, group } = fx();
      await fx().append(1);
      const producer = fx().producer({ maxDemand: 1, leaseMs: 1000, random: () => 0.5 });
      const lease = await readOne<Lease>(producer);
      // Six renewal rounds (one every ~450 ms) take the clock 3 lease lengths past the claim.
      for (let round = 1; round <= 6; round++) {
        const renewed = nextEvent<RenewSummary>(producer, 'renewed');
        timers.advance(500);
        expect(await renewed).toEqual({ renewed: 1, lost: 0, failed: 0 });
        // A competing worker cannot take the lease: it is still live.
        expect(await rheo.fetch(stream, group, { consumerId: 'thief' })).toEqual([]);
      }
      expect(timers.clock.now() - lease.leasedAt.getTime()).toBeGreaterThanOrEqual(3000);
      await producer.ack(lease);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });

    it('renews on one timer at about half the lease, unref’d', async () => {
      const { timers } = fx();
      await fx().append(3);
      const producer = fx().producer({ maxDemand: 3, leaseMs: 1000, random: () => 0 });
      await readOne<Lease>(producer);
      await readOne<Lease>(producer);
      await readOne<Lease>(producer);
      expect(timers.pendingDelays({ keepAlive: false })).toEqual([500]);
    });

    it('drops a lease whose renewal comes back stale_lease and emits lease-lost', async () => {
      const { rheo, clock, timers, stream, group } = fx();
      await fx().append(1);
      const producer = fx().producer({ maxDemand: 1, leaseMs: 1000 });
      const lease = await readOne<Lease>(producer);
      // The lease expires before the producer gets to renew it, and another worker reclaims it.
      clock.advance(1500);
      const [stolen] = await rheo.fetch(stream, group, { consumerId: 'thief' });
      expect(stolen?.attempt).toBe(2);
      const lost = nextEvent<LeaseLostInfo<unknown>>(producer, 'lease-lost');
      timers.runDue();
      const info = await lost;
      expect(info.lease.leaseId).toBe(lease.leaseId);
      expect(info.error.code).toBe('stale_lease');
      expect(producer.holds(lease.leaseId)).toBe(false);
      expect(producer.inflightCount).toBe(0);
    });

    it('emits lease-lost when a settle of a held lease comes back stale_lease, once', async () => {
      const { rheo, clock, timers, stream, group } = fx();
      await fx().append(1);
      const producer = fx().producer({ maxDemand: 1, leaseMs: 1000 });
      const lease = await readOne<Lease>(producer);
      const lost: Array<LeaseLostInfo<unknown>> = [];
      producer.on('lease-lost', (info) => lost.push(info));
      // Expired and reclaimed before any renewal ran: the ack is the first to notice.
      clock.advance(1500);
      expect(await rheo.fetch(stream, group, { consumerId: 'thief' })).toHaveLength(1);
      await expect(producer.ack(lease)).rejects.toMatchObject({ code: 'stale_lease' });
      expect(lost.map((l) => [l.lease.leaseId, l.error.code])).toEqual([[lease.leaseId, 'stale_lease']]);
      expect(producer.holds(lease.leaseId)).toBe(false);
      // A second stale settle of the same lease is answered, not reported again.
      await expect(producer.nack(lease)).rejects.toMatchObject({ code: 'stale_lease' });
      timers.advance(1000);
      expect(lost).toHaveLength(1);
    });

    it('a lease a renewal reported lost is not reported again by its stale settle', async () => {
      const { rheo, clock, timers, stream, group } = fx();
      await fx().append(1);
      const producer = fx().producer({ maxDemand: 1, leaseMs: 1000 });
      const lease = await readOne<Lease>(producer);
      const lost: Array<LeaseLostInfo<unknown>> = [];
      producer.on('lease-lost', (info) => lost.push(info));
      clock.advance(1500);
      expect(await rheo.fetch(stream, group, { consumerId: 'thief' })).toHaveLength(1);
      const renewalLost = nextEvent<LeaseLostInfo<unknown>>(producer, 'lease-lost');
      timers.runDue();
      await renewalLost;
      await expect(producer.ack(lease)).rejects.toMatchObject({ code: 'stale_lease' });
      expect(lost.map((l) => l.lease.leaseId)).toEqual([lease.leaseId]);
    });

    it('keeps a lease whose renewal fails for another reason, and retries sooner', async () => {
      const { faulty, timers } = fx();
      await fx().append(1);
      const producer = fx().producer({ maxDemand: 1, leaseMs: 1000, random: () => 0 });
      const lease = await readOne<Lease>(producer);
      faulty.fail('renew', 'backend_unavailable', { wholeCall: true });
      const failed = nextEvent<RenewErrorInfo<unknown>>(producer, 'renew-error');
      timers.advance(500);
      expect((await failed).error.code).toBe('backend_unavailable');
      expect(producer.holds(lease.leaseId)).toBe(true);
      expect(timers.pendingDelays({ keepAlive: false })).toEqual([125]);
      const renewed = nextEvent<RenewSummary>(producer, 'renewed', (s) => s.renewed === 1);
      timers.advance(125);
      await renewed;
      expect(producer.inflightCount).toBe(1);
    });
  });
}
