import { runConformanceSuite } from './conformance/suite.js';
import { makeRedisTestBackend, useRedis } from './support/redis.js';

// The same suite on a three-master Redis Cluster started for this file: every
// partition's keys hash to their own slot, so multi-partition cases cross nodes.
const redis = useRedis('cluster');
runConformanceSuite('redis cluster', (clock) => makeRedisTestBackend(redis(), clock), { storageEvents: 20_000 });
