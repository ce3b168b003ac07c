interface Pending<I, O> {
  item: I;
  resolve(result: O): void;
  reject(error: unknown): void;
}

export interface CoalescerOptions<I> {
  /** Items with equal keys never go out in one call (the later waits for the next). */
  key?: (item: I) => unknown;
  /** At most this many items per call. Default unbounded. */
  maxBatch?: number;
}

/**
 * Sends items in batches, one call in flight at a time: what is submitted
 * while a call runs waits and goes out with the others in the next call,
 * when it answers. Under load this turns one round trip (and, for a
 * commit, one durable write) per item into one per batch, without adding
 * latency when idle: an item submitted to an idle coalescer goes out at the
 * end of the current turn, together with whatever the same turn submitted.
 *
 * `send` answers one result per item, in order. A call that throws rejects
 * every item it carried.
 */
export class Coalescer<I, O> {
  readonly #send: (items: I[]) => Promise<O[]>;
  readonly #key: ((item: I) => unknown) | undefined;
  readonly #maxBatch: number;
  #pending: Array<Pending<I, O>> = [];
  #sending = false;

  constructor(send: (items: I[]) => Promise<O[]>, options: CoalescerOptions<I> = {}) {
    this.#send = send;
    this.#key = options.key;
    this.#maxBatch = options.maxBatch ?? Infinity;
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#pending.push({ item, resolve, reject });
      if (!this.#sending) void this.#drain();
    });
  }

  async #drain(): Promise<void> {
    this.#sending = true;
    try {
      // Items submitted in the same turn go out together.
      await Promise.resolve();
      while (this.#pending.length > 0) {
        const batch = this.#take();
        try {
          const results = await this.#send(batch.map((p) => p.item));
          batch.forEach((p, i) => {
            if (i < results.length) p.resolve(results[i]!);
            else p.reject(new Error(`a batched call answered ${results.length} results for ${batch.length} items`));
          });
        } catch (error) {
          for (const p of batch) p.reject(error);
        }
      }
    } finally {
      this.#sending = false;
    }
  }

  #take(): Array<Pending<I, O>> {
    const batch: Array<Pending<I, O>> = [];
    const rest: Array<Pending<I, O>> = [];
    const keys = new Set<unknown>();
    for (const p of this.#pending) {
      const key = this.#key?.(p.item);
      if (batch.length >= this.#maxBatch || (this.#key && keys.has(key))) rest.push(p);
      else {
        if (this.#key) keys.add(key);
        batch.push(p);
      }
    }
    this.#pending = rest;
    return batch;
  }
}
