import { describe, expect, it } from 'vitest';
import { memoryBackend } from '../../src/backends/memory/memory-backend.js';
import type { BackendCapabilities } from '../../src/core/backend.js';
import { requireCapability } from '../../src/core/capabilities.js';
import { RheoError } from '../../src/core/errors.js';

const none: BackendCapabilities = {
  durable: false,
  distributed: false,
  notifications: false,
  blockingFetch: false,
  transactions: false,
  partitionOwnership: false,
  retention: false,
  cluster: false,
};

function thrown(fn: () => void): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return null;
}

describe('requireCapability', () => {
  it('passes when the backend has the capability', () => {
    expect(() => requireCapability({ name: 'x', capabilities: { ...none, transactions: true } }, 'transactions', 'appendInTransaction')).not.toThrow();
    expect(() => requireCapability(memoryBackend(), 'notifications', 'waitForAppend')).not.toThrow();
  });

  it('throws unsupported naming the call, the capability and the backend otherwise', () => {
    for (const name of Object.keys(none) as (keyof BackendCapabilities)[]) {
      const error = thrown(() => requireCapability({ name: 'test-backend', capabilities: none }, name, 'someCall'));
      expect(error).toBeInstanceOf(RheoError);
      expect((error as RheoError).code).toBe('unsupported');
      expect((error as RheoError).message).toContain(`"${name}"`);
      expect((error as RheoError).message).toContain('test-backend');
      expect((error as RheoError).message).toContain('someCall');
    }
    const error = thrown(() => requireCapability(memoryBackend(), 'durable', 'survive a restart'));
    expect((error as RheoError).code).toBe('unsupported');
    expect((error as RheoError).message).toContain('memory backend');
  });

  it('treats a missing or non-true entry (an older backend) as unsupported', () => {
    const old = { name: 'old', capabilities: { durable: true, distributed: true, notifications: true } as unknown as BackendCapabilities };
    expect((thrown(() => requireCapability(old, 'cluster', 'c')) as RheoError).code).toBe('unsupported');
    expect(() => requireCapability(old, 'durable', 'd')).not.toThrow();
  });
});
