import { describe, expect, it } from 'vitest';
import type { HandlerOutcome } from '../../src/consumer/consumer-types.js';
import { createRheo } from '../../src/rheo.js';
import { consumerFactories } from '../support/backends.js';
import { deferred, useConsumerFixture, waitFor } from './harness.js';

for (const factory of consumerFactories) {
  describe(`consume: lease renewal (${factory.name})`, () => {
    const fx = useConsumerFixture(factory);

    it('a handler running three lease lengths succeeds, and nobody else can fetch its event meanwhile', async () => {
      const { rheo, stream, group, consume, faulty, clock } = fx();
      const leaseMs = 200;
      await rheo.append(stream, { payload: { slow: true } });
      const started = deferred();
      const finish = deferred<HandlerOutcome>();
      const consumer = consume({
        leaseMs,
        handler: () => {
          started.resolve();
          return finish.promise;
        },
      });
      await started.promise;
      // A competitor on the same group, straight on the backend (not through the consumer's fetch path).
      const competitor = createRheo({ backend: faulty.inner, clock });
      // Six steps of half a lease: three lease lengths on the backend's clock. Each
      // step waits for a renewal to land first, so the lease is never left unrenewed
      // for a whole lease length.
      for (let step = 0; step < 6; step++) {
        const renewals = faulty.calls.renew;
        await waitFor(() => faulty.calls.renew > renewals && faulty.active('renew') === 0, `renewal ${step + 1}`);
        clock.advance(leaseMs / 2);
        expect(await competitor.fetch(stream, group, { consumerId: 'competitor' })).toEqual([]);
      }
      finish.resolve('ack');
      await waitFor(() => consumer.stats().acked === 1, 'the slow handler acked');
      expect(faulty.settlesOf(0, 1)).toMatchObject([{ kind: 'ack', ok: true }]);
      expect(consumer.stats()).toMatchObject({ lost: 0, settleErrors: 0 });
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });
  });
}
