import { memoryBackend } from '../src/backends/memory/memory-backend.js';
import { runConformanceSuite } from './conformance/suite.js';

runConformanceSuite('memory', (clock) => memoryBackend({ clock }), { storageEvents: 100_000 });
