import type { AppendOutcome, LogStore, NormalizedQuery, NotificationStore, PreparedAppend, RetentionPolicy } from '../../core/backend.js';
import { RheoError, invalidPartition } from '../../core/errors.js';
import { uuidv7 } from '../../core/ids.js';
import type { JsonValue, QueryResult, RheoEvent, StreamInfo } from '../../core/types.js';
import { routePartition } from '../../core/validation.js';
import type { MemoryStore } from './store.js';
import { StreamLog } from './stream-log.js';

/** The log on the memory backend: streams, appends that wake the stream's waiters, reads and queries. */
export class MemoryLog implements LogStore, NotificationStore {
  readonly #store: MemoryStore;

  constructor(store: MemoryStore) {
    this.#store = store;
  }

  async createStream(name: string, partitions: number, retention: RetentionPolicy | null = null): Promise<void> {
    this.#store.assertOpen();
    if (this.#store.streams.has(name)) {
      throw new RheoError('already_exists', `stream "${name}" already exists`, { stream: name });
    }
    this.#store.streams.set(name, {
      log: new StreamLog(name, partitions, new Date(this.#store.clock.now())),
      retention: retention && { ...retention },
      groups: new Map(),
    });
  }

  async listStreams(): Promise<StreamInfo[]> {
    this.#store.assertOpen();
    return [...this.#store.streams.values()]
      .map(({ log, retention }) => {
        const watermarks: StreamInfo['watermarks'] = {};
        for (let p = 0; p < log.partitions; p++) {
          watermarks[p] = { lowWatermark: log.lowWatermark(p), highWatermark: log.highWatermark(p) };
        }
        return {
          name: log.name,
          partitions: log.partitions,
          createdAt: new Date(log.createdAt),
          retention: retention && { ...retention },
          watermarks,
        };
      })
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async append(stream: string, inputs: PreparedAppend[]): Promise<AppendOutcome[]> {
    const s = this.#store.stream(stream);
    const log = s.log;
    // Route everything first: an invalid partition anywhere must write nothing.
    const partitions = inputs.map((i) => routePartition(stream, log.partitions, i.partition, i.key));
    const inBatch = new Map<string, RheoEvent>();
    const out: AppendOutcome[] = [];
    for (let i = 0; i < inputs.length; i++) {
      const input = inputs[i]!;
      const existing = input.id === null ? undefined : (log.byId.get(input.id) ?? inBatch.get(input.id));
      if (existing) {
        out.push({ event: existing, existed: true });
        continue;
      }
      const partition = partitions[i]!;
      const event: RheoEvent = deepFreeze({
        id: input.id ?? uuidv7(this.#store.clock),
        stream,
        partition,
        sequence: log.nextSequence(partition),
        type: input.type,
        key: input.key,
        payload: input.payload,
        metadata: input.metadata,
        timestamp: input.timestamp,
      });
      log.push(event, input.size);
      inBatch.set(event.id, event);
      out.push({ event, existed: false });
    }
    if (inBatch.size > 0) this.#store.waiters.wake(stream);
    return out;
  }

  async read(stream: string, partition: number, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    const { log } = this.#store.stream(stream);
    if (partition >= log.partitions) throw invalidPartition(stream, partition, log.partitions);
    return log.read(partition, after, limit, maxBytes);
  }

  async query(stream: string, query: NormalizedQuery): Promise<QueryResult> {
    const { log } = this.#store.stream(stream);
    if (query.partition !== null && query.partition >= log.partitions) {
      throw invalidPartition(stream, query.partition, log.partitions);
    }
    return log.query(query);
  }

  waitForAppend(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    const store = this.#store;
    if (!store.streams.has(stream) || store.closed) return Promise.resolve(false);
    return store.waiters.wait(stream, timeoutMs, signal);
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value) && !(value instanceof Date)) {
    for (const v of Object.values(value as Record<string, JsonValue>)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
