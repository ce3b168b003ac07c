import type { AppendOutcome, LogStore, NormalizedQuery, NotificationStore, PreparedAppend, RetentionPolicy } from '../../core/backend.js';
import { RheoError, invalidPartition, streamNotFound } from '../../core/errors.js';
import { uuidv7 } from '../../core/ids.js';
import type { QueryResult, RheoEvent, StreamInfo } from '../../core/types.js';
import { routePartition } from '../../core/validation.js';
import { decodeEvent, encodeEvent, entryFields } from './codec.js';
import type { FailureContext } from './errors.js';
import { APPEND } from './lua/scripts.js';
import { queryPartitions } from './query.js';
import * as retention from './retention.js';
import { range } from './partition-scope.js';
import type { RedisStore, StreamMeta } from './store.js';

/** The log on Redis: one Redis stream per partition, appends that publish to wake producers, reads and queries. */
export class RedisLog implements LogStore, NotificationStore {
  readonly #store: RedisStore;

  constructor(store: RedisStore) {
    this.#store = store;
  }

  async createStream(name: string, partitions: number, policy: RetentionPolicy | null = null): Promise<void> {
    const createdAt = this.#store.clock ? this.#store.clock.now() : Date.now();
    await retention.createStream(this.#store, name, partitions, policy, createdAt);
  }

  async listStreams(): Promise<StreamInfo[]> {
    const store = this.#store;
    const reply = await store.command(['hgetall', store.keys.streams], { action: 'list streams', writes: false });
    // ioredis turns an HGETALL reply into an object, even through call().
    const entries: Array<[string, string]> = Array.isArray(reply)
      ? Array.from({ length: reply.length / 2 }, (_, i) => [reply[2 * i] as string, reply[2 * i + 1] as string])
      : Object.entries(reply as Record<string, string>);
    const ctx = { action: 'list streams', writes: false };
    const policies = await retention.policies(store);
    const out: StreamInfo[] = await Promise.all(
      entries.map(async ([name, raw]) => {
        const meta = JSON.parse(raw) as StreamMeta;
        const marks = (await Promise.all(
          range(meta.partitions).map((p) => store.command(['hmget', store.keys.partition(name, p).meta, 'hw', 'lw'], { ...ctx, stream: name })),
        )) as Array<[string | null, string | null]>;
        const watermarks: StreamInfo['watermarks'] = {};
        marks.forEach(([h, l], p) => {
          watermarks[p] = { lowWatermark: Number(l ?? 1), highWatermark: Number(h ?? 0) };
        });
        const policy = policies.get(name);
        return { name, partitions: meta.partitions, createdAt: new Date(meta.createdAt), retention: policy ? { ...policy } : null, watermarks };
      }),
    );
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /**
   * One script per partition the batch touches, each atomic on its slot; on
   * a cluster the partitions commit independently, so a batch cut by a lost
   * connection is `ambiguous` and its retry (same ids) completes it.
   *
   * Each partition keeps the index of the ids stored in it, and the append
   * script checks it atomically with the write. An id given again with a
   * different key or partition routes elsewhere, so an append that carries
   * ids first looks them up in the other partitions (one HMGET per
   * partition, in parallel): a retry finds its event wherever it landed.
   * Only two appends of one id racing into different partitions could both
   * write; the same id with the same routing never can.
   *
   * On one server the wake-up PUBLISH is not in the scripts: it follows them
   * on the same connection, in the same socket write. Redis answers the
   * scripts first and then runs the PUBLISH, and it writes the clients it
   * answered last first, so the subscribers hear of the append before the
   * appender has its answer (inside the script it was the other way round).
   * An idle consumer in the appender's process was woken only after the
   * appender's own continuation had run: measured with appends alternating
   * between the two builds, the handler started 0.08–0.18 ms sooner at the
   * median (docs/performance.md). It also publishes once per call where the
   * scripts published once per partition. The PUBLISH goes out even when
   * every script fails or finds its events stored already (a wake-up that
   * finds nothing costs a waiter one fetch); only a call answered whole by
   * the id lookup above sends none. It goes out again after the scripts
   * when one of them had to be sent again after NOSCRIPT: that one ran
   * after the PUBLISH. On a cluster the
   * PUBLISH would go to some other node, which could run it before the
   * partition's node runs the script, so there the scripts still publish.
   */
  async append(stream: string, inputs: PreparedAppend[]): Promise<AppendOutcome[]> {
    const store = this.#store;
    const meta = await store.stream(stream);
    const partitions = inputs.map((i) => routePartition(stream, meta.partitions, i.partition, i.key));
    const ids = inputs.map((i) => i.id ?? uuidv7(store.clock ?? undefined));
    const ctx = { action: `append to stream "${stream}"`, stream, writes: true };
    const out: (AppendOutcome | undefined)[] = new Array(inputs.length);
    const firstOf = new Map<string, number>();
    inputs.forEach((input, i) => {
      if (input.id !== null && !firstOf.has(input.id)) firstOf.set(input.id, i);
    });
    if (firstOf.size > 0 && meta.partitions > 1) {
      const found = await store.locate(stream, meta.partitions, [...firstOf.keys()], { ...ctx, writes: false });
      await Promise.all(
        [...found].map(async ([id, { partition, sequence }]) => {
          const i = firstOf.get(id)!;
          if (partitions[i] === partition) return; // the append script checks its own partition atomically
          const [event] = await this.#readRange(stream, partition, sequence, ctx);
          if (event) out[i] = { event, existed: true };
        }),
      );
    }
    const byPartition = new Map<number, number[]>();
    inputs.forEach((input, i) => {
      if (out[i] !== undefined || (input.id !== null && firstOf.get(input.id) !== i)) return;
      const p = partitions[i]!;
      let list = byPartition.get(p);
      if (!list) byPartition.set(p, (list = []));
      list.push(i);
    });
    const channel = store.notify ? store.keys.appendChannel(stream) : '';
    const publishAfter = channel !== '' && !store.cluster && byPartition.size > 0;
    const publish = (): Promise<unknown> => store.command(['publish', channel, ''], ctx).catch(() => undefined);
    const reloads = store.scriptReloads;
    const sends: Array<[number, number[]] | null> = [...byPartition];
    if (publishAfter) sends.push(null);
    await store.burst(sends, async (send) => {
      if (send === null) return void (await publish());
      const [p, indexes] = send;
      const keys = store.keys.partition(stream, p);
      const args: (string | number)[] = [publishAfter ? '' : channel, meta.inc ?? ''];
      for (const i of indexes) {
        const input = inputs[i]!;
        args.push(ids[i]!, input.id === null ? '0' : '1', input.timestamp.getTime(), input.size, encodeEvent(ids[i]!, input));
      }
      const replies = (await store.run(APPEND, [keys.log, keys.meta, keys.ids], args, ctx).catch((error: unknown) => {
        // Deleted since this process cached it: forget it, so the next call looks again.
        if (error instanceof RheoError && error.code === 'stream_not_found') store.forget(stream);
        throw error;
      })) as Array<number | [string, string, string]>;
      replies.forEach((reply, k) => {
        const i = indexes[k]!;
        const input = inputs[i]!;
        const existed = typeof reply !== 'number';
        const event: RheoEvent = existed
          ? decodeEvent(stream, p, Number(reply[0]), reply[1], reply[2])
          : {
              id: ids[i]!,
              stream,
              partition: p,
              sequence: reply,
              type: input.type,
              key: input.key,
              payload: input.payload,
              metadata: input.metadata,
              timestamp: input.timestamp,
            };
        out[i] = { event, existed };
      });
    });
    if (publishAfter && store.scriptReloads !== reloads) await publish();
    // This process's own waiters need no round trip through pub/sub.
    if (out.some((o) => o !== undefined && !o.existed)) store.waiters.wake(stream);
    // A repeated id in the batch yields its first occurrence's event.
    return inputs.map((input, i) => out[i] ?? { event: out[firstOf.get(input.id!)!]!.event, existed: true });
  }

  async #readRange(stream: string, partition: number, sequence: number, ctx: FailureContext): Promise<RheoEvent[]> {
    const entries = (await this.#store.command(['xrange', this.#store.keys.partition(stream, partition).log, `${sequence}-0`, `${sequence}-0`], {
      ...ctx,
      writes: false,
    })) as unknown[];
    return entries.map((raw) => {
      const e = entryFields(raw);
      return decodeEvent(stream, partition, e.sequence, e.t, e.d);
    });
  }

  async read(stream: string, partition: number, after: number, limit: number, maxBytes: number): Promise<RheoEvent[]> {
    const meta = await this.#store.stream(stream);
    if (partition >= meta.partitions) throw invalidPartition(stream, partition, meta.partitions);
    const entries = (await this.#store.command(
      ['xrange', this.#store.keys.partition(stream, partition).log, `${after + 1}-0`, '+', 'COUNT', limit],
      { action: `read stream "${stream}"`, stream, writes: false },
    )) as unknown[];
    // Nothing read from a cached stream: another process may have deleted it (docs/semantics.md, "Other processes").
    if (entries.length === 0 && (await this.#store.deletedMeanwhile(stream))) throw streamNotFound(stream);
    const out: RheoEvent[] = [];
    let bytes = 0;
    for (const raw of entries) {
      const e = entryFields(raw);
      bytes += e.z;
      if (bytes > maxBytes && out.length > 0) break;
      out.push(decodeEvent(stream, partition, e.sequence, e.t, e.d));
    }
    return out;
  }

  /** Scans every event within the query's sequence bounds in the partitions asked (see query.ts). */
  async query(stream: string, query: NormalizedQuery): Promise<QueryResult> {
    const meta = await this.#store.stream(stream);
    if (query.partition !== null && query.partition >= meta.partitions) throw invalidPartition(stream, query.partition, meta.partitions);
    const partitions = query.partition === null ? range(meta.partitions) : [query.partition];
    return queryPartitions(stream, partitions, query, (p, from, count) =>
      this.#store.command(['xrange', this.#store.keys.partition(stream, p).log, from, '+', 'COUNT', count], {
        action: `query stream "${stream}"`,
        stream,
        writes: false,
      }) as Promise<unknown[]>,
    );
  }

  waitForAppend(stream: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.#store.closed) return Promise.resolve(false);
    return this.#store.waiters.wait(stream, timeoutMs, signal);
  }
}
