import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import type { Backend } from '../../src/core/backend.js';
import type { Lease } from '../../src/core/types.js';
import type { FetchedInfo, ReleasedInfo } from '../../src/producer/producer-options.js';
import { backendFactories } from '../support/backends.js';
import { useStreamsFixture } from './support/fixture.js';
import { nextEvent, until } from './support/wait.js';

for (const factory of backendFactories) {
  describe(`producer teardown releases leases never read (${factory.name})`, () => {
    const fx = useStreamsFixture(factory);

    /** Claims what is claimable now with another consumer: released leases come back at once, same attempt. */
    async function reclaim(): Promise<Lease[]> {
      const { rheo, stream, group } = fx();
      return rheo.fetch(stream, group, { limit: 100, consumerId: 'next-worker' });
    }

    it('on a pipeline error', async () => {
      await fx().append(5);
      const producer = fx().producer({ maxDemand: 5 });
      const handed: Lease[] = [];
      const failing = new Writable({
        objectMode: true,
        highWaterMark: 1,
        write(lease: Lease, _encoding, callback) {
          handed.push(lease);
          callback(new Error('sink crashed'));
        },
      });
      const released = nextEvent<ReleasedInfo<unknown>>(producer, 'released');
      await expect(pipeline(producer, failing)).rejects.toThrow('sink crashed');
      const info = await released;
      expect(info.error).toBeNull();
      expect(info.leases.length + handed.length).toBe(5);
      const again = await reclaim();
      expect(again.map((l) => l.receipt).sort()).toEqual(info.leases.map((l) => l.receipt).sort());
      expect(again.every((l) => l.attempt === 1)).toBe(true);
    });

    it('on a for-await break', async () => {
      await fx().append(5);
      const producer = fx().producer({ maxDemand: 5 });
      producer.read(0);
      await nextEvent<FetchedInfo>(producer, 'fetched', (f) => f.inflight === 5);
      const released = nextEvent<ReleasedInfo<unknown>>(producer, 'released');
      let first: Lease | undefined;
      for await (const lease of producer) {
        first = lease;
        break;
      }
      const info = await released;
      expect(info.leases).toHaveLength(4);
      expect(info.leases.map((l) => l.leaseId)).not.toContain(first?.leaseId);
      const again = await reclaim();
      expect(again).toHaveLength(4);
      expect(again.every((l) => l.attempt === 1)).toBe(true);
    });

    it('on an AbortSignal', async () => {
      await fx().append(5);
      const abort = new AbortController();
      const producer = fx().producer({ maxDemand: 5, signal: abort.signal });
      producer.on('error', () => {});
      // Nothing reads: all five sit in the buffer once fetched (fetching starts on the first read request).
      producer.read(0);
      await nextEvent<FetchedInfo>(producer, 'fetched', (f) => f.inflight === 5);
      const released = nextEvent<ReleasedInfo<unknown>>(producer, 'released');
      abort.abort();
      expect((await released).leases).toHaveLength(5);
      await until(() => producer.closed, 'the producer closed');
      expect(producer.errored?.name).toBe('AbortError');
      expect(await reclaim()).toHaveLength(5);
    });

    it('releases, instead of pushing, leases whose fetch returns during teardown', async () => {
      const { faulty } = fx();
      await fx().append(3);
      let openGate: () => void = () => {};
      const gate = new Promise<void>((resolve) => (openGate = resolve));
      let fetchStarted: () => void = () => {};
      const started = new Promise<void>((resolve) => (fetchStarted = resolve));
      const inner: Backend = faulty.inner;
      const realFetch = inner.fetch.bind(inner);
      faulty.fetch = async (...args) => {
        fetchStarted();
        await gate;
        return realFetch(...args);
      };
      const producer = fx().producer({ maxDemand: 3 });
      producer.read(0);
      await started;
      const released = nextEvent<ReleasedInfo<unknown>>(producer, 'released');
      producer.destroy();
      openGate();
      expect((await released).leases).toHaveLength(3);
      await until(() => producer.closed, 'the producer closed');
      expect(producer.inflightCount).toBe(0);
      faulty.fetch = realFetch;
      expect(await reclaim()).toHaveLength(3);
    });

    it('close() is idempotent and async-disposable', async () => {
      await fx().append(2);
      const producer = fx().producer({ maxDemand: 2 });
      producer.read(0);
      await nextEvent<FetchedInfo>(producer, 'fetched', (f) => f.inflight === 2);
      await Promise.all([producer.close(), producer.close(), producer[Symbol.asyncDispose]()]);
      expect(producer.destroyed).toBe(true);
      expect(producer.inflightCount).toBe(0);
      expect(await reclaim()).toHaveLength(2);
    });
  });
}
