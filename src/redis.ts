export { redisBackend, RedisBackend } from './backends/redis/redis-backend.js';
export type { RedisBackendConfig, RedisBackendOptions, RedisClientLike, RedisConnection } from './backends/redis/redis-backend.js';
export { createRheo, Rheo } from './rheo.js';
export type { RheoOptions, RheoDefaults, SettleRequest } from './rheo.js';
