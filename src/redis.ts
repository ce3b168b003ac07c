export { redisBackend, RedisBackend } from './backends/redis/redis-backend.js';
export type { RedisBackendConfig, RedisBackendOptions, RedisClientLike, RedisConnection } from './backends/redis/redis-backend.js';
export { createRheo, Rheo } from './rheo.js';
export type { RheoOptions, RheoDefaults, SettleRequest } from './rheo.js';
export type { RheoTransaction, TransactionOwner } from './transaction/rheo-transaction.js';
// The contract types its signatures use, so this entry's declarations are
// self-contained whichever chunks the declaration bundler shares between entries.
export type * from './core/types.js';
export type * from './core/backend.js';
export type { Clock } from './core/clock.js';
