import { describe, expect, it } from 'vitest';
import { appendN, expectCode, useFixture, type BackendFactory } from './fixture.js';

export function registerRenewTests(makeBackend: BackendFactory): void {
  describe('renew', () => {
    const fx = useFixture(makeBackend);

    it('moves expiresAt to now + leaseMs', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      const [lease] = await rheo.fetch('s', 'g', { leaseMs: 1000 });
      clock.advance(600);
      const renewed = await rheo.renew(lease!, { leaseMs: 5000 });
      expect(renewed.expiresAt.getTime()).toBe(clock.now() + 5000);
      expect(renewed.leaseId).toBe(lease!.leaseId);
      expect(renewed.attempt).toBe(1);
    });

    it('a renewed lease is not reclaimable until its new expiry', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      const [lease] = await rheo.fetch('s', 'g', { leaseMs: 1000 });
      clock.advance(500);
      await rheo.renew(lease!, { leaseMs: 1000 });
      clock.advance(999);
      expect(await rheo.fetch('s', 'g')).toEqual([]);
      clock.advance(1);
      const [again] = await rheo.fetch('s', 'g');
      expect(again!.attempt).toBe(2);
      await expectCode(rheo.renew(lease!), 'stale_lease');
    });

    it('renew without leaseMs uses the default 30 seconds', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      const [lease] = await rheo.fetch('s', 'g', { leaseMs: 1000 });
      clock.advance(100);
      expect((await rheo.renew(lease!)).expiresAt.getTime()).toBe(clock.now() + 30_000);
    });

    it('renew after ack is stale_lease', async () => {
      const { rheo } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 1);
      const [lease] = await rheo.fetch('s', 'g');
      await rheo.ack(lease!);
      await expectCode(rheo.renew(lease!), 'stale_lease');
    });

    it('renewMany returns one result per lease, in order', async () => {
      const { rheo, clock } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      await appendN(rheo, 's', 3);
      const leases = await rheo.fetch('s', 'g', { leaseMs: 1000 });
      await rheo.ack(leases[1]!);
      const results = await rheo.renewMany(leases, { leaseMs: 2000 });
      expect(results.map((r) => r.ok)).toEqual([true, false, true]);
      const [r0, r1] = results;
      if (r0?.ok) expect(r0.lease.expiresAt.getTime()).toBe(clock.now() + 2000);
      if (r1 && !r1.ok) expect(r1.error.code).toBe('stale_lease');
    });
  });
}
