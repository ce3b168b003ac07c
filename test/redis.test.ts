import { runConformanceSuite } from './conformance/suite.js';
import { makeRedisTestBackend, useRedis } from './support/redis.js';

// The whole backend-agnostic suite, every case, against a real redis-server
// with the suite's ManualClock as the time authority; a fresh key prefix per test.
const redis = useRedis('single');
runConformanceSuite('redis', (clock) => makeRedisTestBackend(redis(), clock), { storageEvents: 20_000 });
