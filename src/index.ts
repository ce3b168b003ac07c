export { createRheo, Rheo } from './rheo.js';
export type { RheoOptions, RheoDefaults, SettleRequest } from './rheo.js';
export type { RheoLimits } from './core/limits.js';
export { RheoError, isRheoError, RHEO_ERROR_CODES } from './core/errors.js';
export type { RheoErrorCode, RheoErrorDetails } from './core/errors.js';
export { ManualClock, systemClock } from './core/clock.js';
export type { Clock } from './core/clock.js';
export { murmur2, partitionForKey } from './core/partitioner.js';
export { uuidv7 } from './core/ids.js';
export { memoryBackend } from './backends/memory/memory-backend.js';
export { postgresBackend } from './backends/postgres/postgres-backend.js';
export type { PostgresBackendConfig, PostgresBackendOptions, PostgresConnection } from './backends/postgres/postgres-backend.js';
export type { MemoryBackendOptions } from './backends/memory/memory-backend.js';
// ioredis (an optional peer) is loaded by the first call that needs Redis, never by this import.
export { redisBackend, RedisBackend } from './backends/redis/redis-backend.js';
export type { RedisBackendConfig, RedisBackendOptions, RedisClientLike, RedisConnection } from './backends/redis/redis-backend.js';
export type * from './core/types.js';
export type * from './core/backend.js';
export type { PingResult } from './core/health.js';
export { requireCapability } from './core/capabilities.js';
export { CORRELATION_ID, CAUSATION_ID } from './core/lineage.js';
export { RheoProducer } from './producer/rheo-producer.js';
export type {
  ProducerOptions,
  ProducerSource,
  RheoProducerEvents,
  LeaseLostInfo,
  FetchErrorInfo,
  RenewErrorInfo,
  ReleasedInfo,
  FetchedInfo,
  WithLease,
} from './producer/producer-options.js';
export type { RenewSummary } from './producer/inflight-tracker.js';
export type { BackoffOptions } from './producer/backoff.js';
export { systemTimers } from './producer/timers.js';
export type { Timers, ScheduledTimer } from './producer/timers.js';
export { createLeaseSink, LeaseSink } from './sinks/lease-sink.js';
export type { LeaseSinkOptions, LeaseHandlerContext } from './sinks/lease-sink.js';
export { createBatchSink, BatchSink } from './sinks/batch-sink.js';
export type { BatchSinkOptions, BatchContext, BatchOutcome, BatchSinkEvents, BatchErrorInfo } from './sinks/batch-sink.js';
export type {
  LeaseOutcome,
  Settlement,
  LeaseSettler,
  SettlingStreamEvents,
  SettleErrorInfo,
  SinkLeaseLostInfo,
  HandlerErrorInfo,
} from './sinks/lease-outcome.js';
export { createMapTransform, MapTransform } from './transforms/map-transform.js';
export type { Mapped, MapTransformOptions } from './transforms/map-transform.js';
export { createWindowTransform, WindowTransform } from './transforms/window-transform.js';
export type { WindowTransformOptions, WindowContext, WindowTransformEvents, TriggerErrorInfo } from './transforms/window-transform.js';
export { createKeyOrderedTransform, KeyOrderedTransform } from './transforms/key-ordered-transform.js';
export type { KeyOrderedTransformOptions } from './transforms/key-ordered-transform.js';
export { createRateLimit, RateLimit } from './transforms/rate-limit.js';
export type { RateLimitOptions } from './transforms/rate-limit.js';
export { createBatchTransform, BatchTransform } from './transforms/batch-transform.js';
export type { BatchTransformOptions } from './transforms/batch-transform.js';
export type { LeaseReleaser } from './transforms/release-held.js';
export type { FlushReason } from './transforms/batch-collector.js';
export { Consumer } from './consumer/consumer.js';
export type { ConsumerSource } from './consumer/consumer.js';
export type {
  ConsumeOptions,
  ConsumerHandler,
  HandlerContext,
  HandlerOutcome,
  RetryOutcome,
  RejectOutcome,
  OrderBy,
  StopOptions,
  ConsumerStats,
  ConsumerState,
} from './consumer/consumer-types.js';
export { RHEO_EVENT_NAMES, channelName } from './observability/diagnostics.js';
export type {
  LeaseEventInfo,
  LeaseEvent,
  AckEvent,
  RetryEvent,
  DeadLetterEvent,
  LeaseLostEvent,
  SettleErrorEvent,
  FetchErrorEvent,
  HandlerErrorKind,
  HandlerErrorEvent,
  DrainEvent,
  RheoEventMap,
  RheoEventName,
  ConsumerEventMap,
  RenewErrorEvent,
  WithLeaseId,
} from './observability/lease-events.js';
