import type { Backend, BackendCapability } from './backend.js';
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
