import type { Backend, BackendCapability, CapabilityStores, OptionalCapability } from './backend.js';
import { RheoError } from './errors.js';

/**
 * Refuses a call the backend cannot serve before anything reaches it, so a
 * caller learns `unsupported` (naming the capability and the backend)
 * instead of a backend-specific failure halfway through.
 */
export function requireCapability(backend: Pick<Backend, 'name' | 'capabilities'>, name: BackendCapability, call: string): void {
  if (backend.capabilities[name] === true) return;
  throw new RheoError('unsupported', `${call} needs the "${name}" capability, which the ${backend.name} backend does not have`);
}

/** The methods each optional interface must have, checked once per backend. */
const METHODS: { [K in OptionalCapability]: ReadonlyArray<keyof CapabilityStores[K]> } = {
  notifications: ['waitForAppend'],
  blockingFetch: ['fetchAfterAppend', 'readOwnedAfterAppend'],
  partitionOwnership: ['heartbeat', 'leaveGroup', 'releasePartitions', 'readOwned', 'commit', 'members'],
  transactions: ['transaction', 'beginTransaction'],
  retention: ['setRetention', 'trim', 'deleteGroup', 'deleteStream'],
};

/**
 * The backend as the optional interface of one capability: `unsupported`
 * when the flag is off, and also when a backend declares the flag without
 * implementing the whole interface (a broken backend, named as such).
 */
export function capability<K extends OptionalCapability>(backend: Backend, name: K, call: string): CapabilityStores[K] {
  requireCapability(backend, name, call);
  if (!hasCapability(backend, name)) {
    throw new RheoError('unsupported', `the ${backend.name} backend declares "${name}" but does not implement ${METHODS[name].join(', ')}`);
  }
  return backend;
}

/** Whether the backend declares the capability and implements its whole interface. */
export function hasCapability<K extends OptionalCapability>(backend: Backend, name: K): backend is Backend & CapabilityStores[K] {
  if (backend.capabilities[name] !== true) return false;
  const record = backend as unknown as Record<string, unknown>;
  return METHODS[name].every((method) => typeof record[method as string] === 'function');
}
