/**
 * At most one item per key in flight: the first item of a key takes it, later
 * items of the same key park behind it, oldest first, and each `leave` hands
 * the key to the next parked item. Different keys never wait for each other.
 * The consumer's `orderBy` runs on it.
 */
export class KeyQueue<V> {
  /** Keys in flight → items parked behind them, oldest first. */
  readonly #busy = new Map<string, V[]>();
  #parked = 0;

  /** Items parked behind a busy key. */
  get parkedCount(): number {
    return this.#parked;
  }

  /** `true`: `value` holds `key` now and may start; `false`: it is parked until the key frees. */
  enter(key: string, value: V): boolean {
    const parked = this.#busy.get(key);
    if (parked === undefined) {
      this.#busy.set(key, []);
      return true;
    }
    parked.push(value);
    this.#parked++;
    return false;
  }

  /** Frees `key`; returns the parked item that holds it now, if any. */
  leave(key: string): V | undefined {
    const parked = this.#busy.get(key);
    if (parked === undefined) return undefined;
    const next = parked.shift();
    if (next === undefined) this.#busy.delete(key);
    else this.#parked--;
    return next;
  }

  /** Takes `value` out of the queue of `key`; `false` when it was not parked there. */
  unpark(key: string, value: V): boolean {
    const parked = this.#busy.get(key);
    const index = parked?.indexOf(value) ?? -1;
    if (index < 0) return false;
    parked!.splice(index, 1);
    this.#parked--;
    return true;
  }

  /** Forgets every key; returns what was parked. */
  clear(): V[] {
    const parked: V[] = [];
    for (const queue of this.#busy.values()) parked.push(...queue);
    this.#busy.clear();
    this.#parked = 0;
    return parked;
  }
}
