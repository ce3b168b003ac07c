import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import { backendFactories } from '../support/backends.js';
import { useStreamsFixture } from './support/fixture.js';
import { readOne, until } from './support/wait.js';

/** Settles a promise's outcome into a value the test can inspect without awaiting it. */
function track(promise: Promise<void>): { state: 'pending' | 'resolved' | 'rejected'; error: unknown } {
  const box: { state: 'pending' | 'resolved' | 'rejected'; error: unknown } = { state: 'pending', error: null };
  promise.then(
    () => (box.state = 'resolved'),
    (error: unknown) => {
      box.state = 'rejected';
      box.error = error;
    },
  );
  return box;
}

for (const factory of backendFactories) {
  describe(`producer settle retries (${factory.name})`, () => {
    const fx = useStreamsFixture(factory);

    it('an ack that failed with backend_unavailable is sent again after a backoff and lands', async () => {
      const { rheo, faulty, timers, clock, stream, group } = fx();
      await fx().append(1);
      const producer = fx().producer({ maxDemand: 1, leaseMs: 10_000 });
      const lease = await readOne<Lease>(producer);
      faulty.fail('settle', 'backend_unavailable', { wholeCall: true, times: 2 });
      const errors: unknown[] = [];
      producer.on('settle-error', (info) => errors.push(info));
      const ack = track(producer.ack(lease));
      await until(() => faulty.settles.length === 1, 'the first ack failed');
      // Still held (and counted against maxDemand) while it waits to be sent again.
      expect(ack.state).toBe('pending');
      expect(producer.holds(lease.leaseId)).toBe(true);
      expect(producer.inflightCount).toBe(1);
      timers.advance(100);
      await until(() => faulty.settles.length === 2, 'the second ack failed');
      expect(ack.state).toBe('pending');
      timers.advance(200);
      await until(() => ack.state !== 'pending', 'the third ack answered');
      expect(ack.state).toBe('resolved');
      expect(faulty.settles.map((s) => s.code)).toEqual(['backend_unavailable', 'backend_unavailable', null]);
      expect(errors).toEqual([]);
      expect(producer.inflightCount).toBe(0);
      clock.advance(10_000);
      expect(await rheo.fetch(stream, group)).toEqual([]); // acked: never redelivered
    });

    it('an ambiguous ack is answered at once, never sent again', async () => {
      const { faulty } = fx();
      await fx().append(1);
      const producer = fx().producer({ maxDemand: 1, leaseMs: 10_000 });
      const lease = await readOne<Lease>(producer);
      faulty.fail('settle', 'ambiguous', { wholeCall: true });
      await expect(producer.ack(lease)).rejects.toMatchObject({ code: 'ambiguous' });
      expect(faulty.settles.map((s) => s.code)).toEqual(['ambiguous']);
      expect(producer.inflightCount).toBe(0);
    });

    it('stops retrying before the lease expires, then answers with backend_unavailable', async () => {
      const { faulty, timers } = fx();
      await fx().append(1);
      // Jitter off: waits of exactly 100, 200, 400 ms; 800 more would pass the 1000 ms lease.
      const producer = fx().producer({ maxDemand: 1, leaseMs: 1000, random: () => 0 });
      const lease = await readOne<Lease>(producer);
      faulty.fail('settle', 'backend_unavailable', { wholeCall: true, times: Infinity });
      const ack = track(producer.ack(lease));
      for (let sent = 1; ack.state === 'pending'; sent++) {
        await until(() => faulty.settles.length === sent || ack.state !== 'pending', `ack number ${sent} failed`);
        if (ack.state === 'pending') timers.advance(Math.min(...timers.pendingDelays({ keepAlive: true })));
      }
      expect(ack.state).toBe('rejected');
      expect(ack.error).toMatchObject({ code: 'backend_unavailable' });
      expect(faulty.settles).toHaveLength(4); // 0, 100, 300, 700 ms after the first; 1500 would be past expiry
      expect(producer.inflightCount).toBe(0);
    });

    it('maxRetries bounds the retries', async () => {
      const { faulty, timers } = fx();
      await fx().append(1);
      const producer = fx().producer({ maxDemand: 1, leaseMs: 600_000, settleRetry: { maxRetries: 2, initialMs: 10 } });
      const lease = await readOne<Lease>(producer);
      faulty.fail('settle', 'backend_unavailable', { wholeCall: true, times: Infinity });
      const ack = track(producer.ack(lease));
      for (let sent = 1; ack.state === 'pending'; sent++) {
        await until(() => faulty.settles.length === sent || ack.state !== 'pending', `ack number ${sent} failed`);
        if (ack.state === 'pending') timers.advance(Math.min(...timers.pendingDelays({ keepAlive: true })));
      }
      expect(ack.error).toMatchObject({ code: 'backend_unavailable' });
      expect(faulty.settles).toHaveLength(3);
    });

    it('maxRetries: 0 answers the first backend_unavailable; a bad settleRetry is invalid_argument', async () => {
      const { faulty } = fx();
      await fx().append(1);
      expect(() => fx().producer({ settleRetry: { maxRetries: -1 } })).toThrow(/settleRetry\.maxRetries/);
      expect(() => fx().producer({ settleRetry: { initialMs: 0 } })).toThrow(/settleRetry\.initialMs/);
      const producer = fx().producer({ maxDemand: 1, leaseMs: 600_000, settleRetry: { maxRetries: 0 } });
      const lease = await readOne<Lease>(producer);
      faulty.fail('settle', 'backend_unavailable', { wholeCall: true });
      await expect(producer.ack(lease)).rejects.toMatchObject({ code: 'backend_unavailable' });
      expect(faulty.settles).toHaveLength(1);
    });

    it('close() during a retry wait sends the settle once more instead of waiting out the backoff', async () => {
      const { faulty, rheo, stream, group } = fx();
      await fx().append(1);
      const producer = fx().producer({ maxDemand: 1, leaseMs: 600_000 });
      const lease = await readOne<Lease>(producer);
      faulty.fail('settle', 'backend_unavailable', { wholeCall: true, times: 1 });
      const ack = track(producer.ack(lease));
      await until(() => faulty.settles.length === 1, 'the first ack failed');
      await producer.close(); // no timer advanced: the retry went out at once
      expect(ack.state).toBe('resolved');
      expect(faulty.settles.map((s) => s.code)).toEqual(['backend_unavailable', null]);
      expect((await rheo.lag(stream, group)).lag).toBe(0);
    });
  });
}
