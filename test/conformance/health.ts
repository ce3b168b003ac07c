import { describe, expect, it } from 'vitest';
import { createRheo } from '../../src/rheo.js';
import { expectCode, useFixture, type BackendFactory } from './fixture.js';

const CAPABILITIES = ['durable', 'distributed', 'notifications', 'blockingFetch', 'transactions', 'partitionOwnership', 'retention', 'cluster'];

export function registerHealthTests(makeBackend: BackendFactory): void {
  describe('health and capabilities', () => {
    const fx = useFixture(makeBackend);

    it('ping names the backend, times the round trip and reports the schema version', async () => {
      const { rheo, backend } = fx();
      const result = await rheo.ping();
      expect(Object.keys(result).sort()).toEqual(['backend', 'roundTripMs', 'schemaVersion']);
      expect(result.backend).toBe(backend.name);
      expect(Number.isFinite(result.roundTripMs)).toBe(true);
      expect(result.roundTripMs).toBeGreaterThanOrEqual(0);
      // A durable backend keeps a migrated schema; one without a schema says null.
      if (backend.capabilities.durable) {
        expect(Number.isInteger(result.schemaVersion)).toBe(true);
        expect(result.schemaVersion).toBeGreaterThan(0);
      } else {
        expect(result.schemaVersion).toBeNull();
      }
    });

    it('ping after close is closed', async () => {
      const { rheo } = fx();
      await rheo.close();
      await expectCode(rheo.ping(), 'closed');
    });

    it('capabilities list every capability as a boolean, read-only, the same object the backend declares', () => {
      const { rheo, backend } = fx();
      expect(Object.keys(rheo.capabilities).sort()).toEqual([...CAPABILITIES].sort());
      for (const name of CAPABILITIES) expect(typeof rheo.capabilities[name as keyof typeof rheo.capabilities]).toBe('boolean');
      expect(rheo.capabilities).toBe(backend.capabilities);
      expect(Object.isFrozen(rheo.capabilities)).toBe(true);
      expect(() => {
        (rheo.capabilities as { durable: boolean }).durable = !rheo.capabilities.durable;
      }).toThrow(TypeError);
      // A backend claiming a capability promises its calls.
      expect(rheo.capabilities.transactions).toBe(typeof backend.transaction === 'function' && typeof backend.beginTransaction === 'function');
      const ownershipCalls = [backend.heartbeat, backend.leaveGroup, backend.releasePartitions, backend.readOwned, backend.commit, backend.members];
      expect(rheo.capabilities.partitionOwnership).toBe(ownershipCalls.every((call) => typeof call === 'function'));
      const retentionCalls = [backend.setRetention, backend.trim, backend.deleteGroup, backend.deleteStream];
      expect(rheo.capabilities.retention).toBe(retentionCalls.every((call) => typeof call === 'function'));
      expect(retentionCalls.some((call) => typeof call === 'function')).toBe(rheo.capabilities.retention);
      // Only the Redis backend runs on a sharded cluster (when made on Redis Cluster), and that is distributed.
      if (backend.name !== 'redis') expect(rheo.capabilities.cluster).toBe(false);
      if (rheo.capabilities.cluster) expect(rheo.capabilities.distributed).toBe(true);
      expect(rheo.capabilities.notifications).toBe(typeof backend.waitForAppend === 'function');
      // A blocking fetch waits on one server's connection; only Redis has one, and never on a cluster.
      if (rheo.capabilities.blockingFetch) expect([typeof backend.fetchAfterAppend, typeof backend.readOwnedAfterAppend]).toEqual(['function', 'function']);
      if (backend.name !== 'redis' || rheo.capabilities.cluster) expect(rheo.capabilities.blockingFetch).toBe(false);
    });

    it('a second facade over the same backend reports the same capabilities', () => {
      const { backend, clock } = fx();
      const other = createRheo({ backend, clock });
      expect(other.capabilities).toEqual(fx().rheo.capabilities);
    });
  });
}
