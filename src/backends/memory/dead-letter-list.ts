export interface DeadLetterEntry {
  readonly id: number;
  readonly partition: number;
  readonly sequence: number;
  readonly attempt: number;
  readonly reason: string | null;
  readonly deadLetteredAt: number;
}

/**
 * One group's dead letters, listed by increasing id. Ids only grow, so
 * appending keeps `order` sorted; removal is lazy and compacted once half of
 * `order` is dead, which keeps paging O(log n + limit) amortised.
 */
export class DeadLetterList {
  readonly #byId = new Map<number, DeadLetterEntry>();
  /** partition → sequence → id */
  readonly #byDelivery = new Map<number, Map<number, number>>();
  #order: number[] = [];

  get size(): number {
    return this.#byId.size;
  }

  add(entry: DeadLetterEntry): void {
    this.#byId.set(entry.id, entry);
    let m = this.#byDelivery.get(entry.partition);
    if (!m) this.#byDelivery.set(entry.partition, (m = new Map()));
    m.set(entry.sequence, entry.id);
    this.#order.push(entry.id);
  }

  /** How many entries one partition holds. */
  countIn(partition: number): number {
    return this.#byDelivery.get(partition)?.size ?? 0;
  }

  has(id: number): boolean {
    return this.#byId.has(id);
  }

  find(partition: number, sequence: number): DeadLetterEntry | undefined {
    const id = this.#byDelivery.get(partition)?.get(sequence);
    return id === undefined ? undefined : this.#byId.get(id);
  }

  remove(entry: DeadLetterEntry): void {
    if (!this.#byId.delete(entry.id)) return;
    this.#byDelivery.get(entry.partition)?.delete(entry.sequence);
    if (this.#order.length > 64 && this.#byId.size * 2 < this.#order.length) {
      this.#order = this.#order.filter((id) => this.#byId.has(id));
    }
  }

  /** Entries of one partition with `sequence >= from` (cost bounded by that partition's dead letters). */
  inPartitionFrom(partition: number, from: number): DeadLetterEntry[] {
    const out: DeadLetterEntry[] = [];
    for (const [sequence, id] of this.#byDelivery.get(partition) ?? []) {
      if (sequence >= from) out.push(this.#byId.get(id)!);
    }
    return out;
  }

  /** Removes the entries of one partition with `sequence <= upTo` (their events were trimmed). */
  removeUpTo(partition: number, upTo: number): void {
    for (const [sequence, id] of this.#byDelivery.get(partition) ?? []) {
      if (sequence <= upTo) this.remove(this.#byId.get(id)!);
    }
  }

  all(): DeadLetterEntry[] {
    return [...this.#byId.values()];
  }

  /** Up to `limit` entries with id greater than `after`, ascending. */
  page(after: number, limit: number): DeadLetterEntry[] {
    const order = this.#order;
    let lo = 0;
    let hi = order.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (order[mid]! <= after) lo = mid + 1;
      else hi = mid;
    }
    const out: DeadLetterEntry[] = [];
    for (let i = lo; i < order.length && out.length < limit; i++) {
      const e = this.#byId.get(order[i]!);
      if (e) out.push(e);
    }
    return out;
  }

  clear(): void {
    this.#byId.clear();
    this.#byDelivery.clear();
    this.#order = [];
  }
}
