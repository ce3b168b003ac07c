export { createRheo, Rheo } from './rheo.js';
export { RheoTransaction } from './transaction/rheo-transaction.js';
export type { TransactionOwner } from './transaction/rheo-transaction.js';
export type { RheoOptions, RheoDefaults, RetentionTrimmerOptions, SettleRequest } from './rheo.js';
export type { BackgroundTrimmer, TrimmerOptions } from './retention/background-trimmer.js';
export type { RheoLimits } from './core/limits.js';
export { RheoError, isRheoError, RHEO_ERROR_CODES } from './core/errors.js';
export type { RheoErrorCode, RheoErrorDetails } from './core/errors.js';
export { ManualClock, systemClock } from './core/clock.js';
export type { Clock } from './core/clock.js';
export { silentLogger } from './core/logger.js';
export type { Logger, LogFields, LogLevel } from './core/logger.js';
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
  RheoProducerEvents,
  LeaseLostInfo,
  FetchErrorInfo,
  RenewErrorInfo,
  ReleasedInfo,
  FetchedInfo,
  WithLease,
} from './producer/producer-options.js';
export type { RenewSummary } from './producer/inflight-tracker.js';
export type { BackoffOptions } from './runtime/backoff.js';
export { systemTimers } from './runtime/timers.js';
export type { Timers, ScheduledTimer } from './runtime/timers.js';
export { createLeaseSink, LeaseSink } from './sinks/lease-sink.js';
export type { LeaseSinkOptions, LeaseSinkTuning, LeaseHandler, LeaseHandlerContext } from './sinks/lease-sink.js';
export { createBatchSink, BatchSink } from './sinks/batch-sink.js';
export { createBatcherRouter, BatcherRouter } from './sinks/batcher-router.js';
export type { BatcherRouterOptions } from './sinks/batcher-router.js';
export type { BatchSinkOptions, BatchSinkTuning, BatchHandler, BatchContext, BatchOutcome, BatchSinkEvents, BatchErrorInfo } from './sinks/batch-sink.js';
export { rejectLease, LeaseRejection } from './runtime/lease-outcome.js';
export type {
  FailurePolicy,
  HandlerFailure,
  LeaseOutcome,
  Settlement,
  LeaseSettler,
  SettlingStreamEvents,
  SettleErrorInfo,
  SinkLeaseLostInfo,
  HandlerErrorInfo,
} from './runtime/lease-outcome.js';
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
export type { FlushReason } from './runtime/batch-collector.js';
export { Consumer } from './consumer/consumer.js';
export type { ConsumerSource } from './consumer/consumer.js';
export type { LeaseSource } from './runtime/sources.js';
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
export { PartitionConsumer } from './consumer/partition-consumer.js';
export type { PartitionConsumerStats, PartitionConsumerEventMap, OwnershipErrorEvent } from './consumer/partition-consumer.js';
export type {
  PartitionConsumeOptions,
  PartitionHandler,
  PartitionHandlerContext,
  PartitionSource,
} from './consumer/partition-options.js';
export type { CommitInput, HeartbeatOptions, OwnershipFenceInput } from './core/ownership-arguments.js';
export { assignPartitions } from './core/assignor.js';
export { RHEO_EVENT_NAMES, channelName } from './observability/diagnostics.js';
export { WARNING_CHANNEL } from './observability/same-group-warning.js';
export type { RheoWarning } from './observability/same-group-warning.js';
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
  MemberJoinEvent,
  MemberLeaveEvent,
  RebalanceEvent,
} from './observability/lease-events.js';
export {
  createDashboardHandler,
  startDashboard,
  DASHBOARD_WRITE_HEADER,
  type DashboardHandler,
  type DashboardOptions,
  type DashboardServerOptions,
  type RunningDashboard,
} from './dashboard/index.js';
