import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/types.js';
import { backendFactories } from '../support/backends.js';
import { useStreamsFixture } from './support/fixture.js';
import { readOne } from './support/wait.js';

for (const factory of backendFactories) {
  describe(`producer events (${factory.name})`, () => {
    const fx = useStreamsFixture(factory);

    it('emits lease, ack, retry, dead-letter and settle-error with the lease attached and no payload', async () => {
      const { faulty } = fx();
      await fx().append(4);
      const producer = fx().producer({ maxDemand: 4, minDemand: 4 });
      const seen: Array<[string, number, Record<string, unknown>]> = [];
      for (const name of ['lease', 'ack', 'retry', 'dead-letter', 'settle-error'] as const) {
        producer.on(name, (info) => seen.push([name, info.lease.event.sequence, info as unknown as Record<string, unknown>]));
      }
      const leases: Lease[] = [];
      for (let i = 0; i < 4; i++) leases.push(await readOne<Lease>(producer));
      await producer.ack(leases[0]!);
      await producer.nack(leases[1]!, 'later', { delayMs: 5 });
      await producer.reject(leases[2]!, 'poison');
      faulty.fail('settle', 'internal', { times: 1 });
      await expect(producer.ack(leases[3]!)).rejects.toMatchObject({ code: 'internal' });

      expect(seen.map(([name, seq]) => `${name}:${seq}`)).toEqual([
        'lease:1',
        'lease:2',
        'lease:3',
        'lease:4',
        'ack:1',
        'retry:2',
        'dead-letter:3',
        'settle-error:4',
      ]);
      for (const [, , info] of seen) {
        expect(info).toMatchObject({ stream: fx().stream, group: fx().group, attempt: 1 });
        expect(info).not.toHaveProperty('payload');
        expect(info).not.toHaveProperty('leaseId');
      }
      expect(seen[5]![2]).toMatchObject({ reason: 'later', delayMs: 5 });
      expect(seen[6]![2]).toMatchObject({ reason: 'poison' });
      expect(seen[7]![2]).toMatchObject({ op: 'ack', error: { code: 'internal' } });
      expect(producer.inflightCount).toBe(0);
    });
  });
}
