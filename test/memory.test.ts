import { memoryBackend } from '../src/backends/memory/memory-backend.js';
import { runConformanceSuite } from './conformance/suite.js';

// Mutation runs (RHEO_MEMORY_ONLY) keep the storage test small: it covers most
// of the backend, so it runs for nearly every mutant.
const storageEvents = process.env.RHEO_MEMORY_ONLY === '1' ? 5_000 : 100_000;

runConformanceSuite('memory', (clock) => memoryBackend({ clock }), { storageEvents });
