import diagnosticsChannel from 'node:diagnostics_channel';
import type { Backend } from '../core/backend.js';
import { log, silentLogger, type Logger } from '../core/logger.js';

/** The `node:diagnostics_channel` rheo publishes its warnings on. */
export const WARNING_CHANNEL = 'rheo:warning';

/** What `rheo:warning` carries. */
export interface RheoWarning {
  /** Stable: branch on it, never on `message`. */
  code: 'consumer_and_producer_in_one_process';
  message: string;
  stream: string;
  group: string;
}

const channel = diagnosticsChannel.channel(WARNING_CHANNEL);

/** Which in-process role reads a group: the one-call runtime, or a pipeline's `RheoProducer`. */
export type GroupRole = 'consumer' | 'producer';

interface Readers {
  consumer: number;
  producer: number;
  /** The loggers of the rheo instances whose readers count here: each gets the warning once. */
  loggers: Set<Logger>;
}

/**
 * Live consumers and producers per (store, stream, group), across every
 * rheo instance of the process, so that running both on one group warns
 * once: they compete for the same deliveries, so each sees about half of
 * them (the original design's "half your events skip the batcher"). A
 * consumer's own internal producer is not counted: only `rheo.producer()`.
 */
const readers = new Map<string, Readers>();
const warned = new Set<string>();
const memoryStores = new WeakMap<Backend, number>();
let memoryStoreCount = 0;

/**
 * A key for the store a backend reaches: a shared store by its `storeId`
 * (PostgreSQL: server, database and schema; Redis: server or cluster, database
 * and prefix), so two instances on one store count as one and instances on
 * different stores never meet; a store without one (memory, process-local) by
 * the backend object itself.
 */
function storeKey(backend: Backend): string {
  if (typeof backend.storeId === 'string') return `${backend.name}\u0000${backend.storeId}`;
  let id = memoryStores.get(backend);
  if (id === undefined) {
    id = ++memoryStoreCount;
    memoryStores.set(backend, id);
  }
  return `${backend.name}#${id}`;
}

/**
 * Records a reader of the group; returns the function that removes it.
 * When a consumer and a producer of the same group are both live, publishes
 * one warning per group and process on `rheo:warning`, and, only when nobody
 * subscribed there, hands it to `process.emitWarning`; either way it also
 * goes, at warn level, to the logger of every rheo instance with a reader
 * of the group (`logger`: the one of the instance registering this reader).
 */
export function trackGroupReader(backend: Backend, stream: string, group: string, role: GroupRole, logger: Logger = silentLogger): () => void {
  const key = `${storeKey(backend)}\u0000${stream}\u0000${group}`;
  let counts = readers.get(key);
  if (!counts) {
    counts = { consumer: 0, producer: 0, loggers: new Set() };
    readers.set(key, counts);
  }
  counts[role]++;
  if (logger !== silentLogger) counts.loggers.add(logger);
  if (counts.consumer > 0 && counts.producer > 0 && !warned.has(key)) {
    warned.add(key);
    warn({
      code: 'consumer_and_producer_in_one_process',
      message:
        `a consumer (rheo.consume) and a producer (rheo.producer) of group "${group}" on stream "${stream}" ` +
        'run in this process: they compete for the same deliveries, so each gets only part of them. ' +
        'Use one of the two per group, or give each its own group.',
      stream,
      group,
    }, counts.loggers);
  }
  let removed = false;
  return () => {
    if (removed) return;
    removed = true;
    const live = readers.get(key);
    if (!live) return;
    live[role]--;
    if (live.consumer === 0 && live.producer === 0) readers.delete(key);
  };
}

function warn(warning: RheoWarning, loggers: Iterable<Logger>): void {
  for (const logger of loggers) log(logger, 'warn', { code: warning.code, stream: warning.stream, group: warning.group }, `rheo: ${warning.message}`);
  if (channel.hasSubscribers) {
    channel.publish(warning);
    return;
  }
  process.emitWarning(warning.message, { type: 'RheoWarning', code: 'RHEO_CONSUMER_AND_PRODUCER' });
}
