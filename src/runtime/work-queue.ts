/**
 * The waiting line behind the sinks' concurrency limits: a FIFO array read
 * from a head index, so `push` and `shift` cost O(1) and no promise per item.
 * It replaces p-limit, which chains a promise per task (profiles of the lease
 * sink showed that as a large share of its time) and, from version 7, ships
 * only as ESM, so `require('rheo')` could not load it. An item can be
 * withdrawn while it waits; its slot becomes a hole that `shift` skips.
 */
export class WorkQueue<T extends object> {
  #items: Array<T | null> = [];
  #head = 0;
  #length = 0;

  /** Items waiting (holes not counted). */
  get length(): number {
    return this.#length;
  }

  /**
   * Array slots held, consumed ones and holes included: the queue's memory
   * gauge. About `length + max(1024, length)` at most while items wait, 0 once
   * the queue has run empty.
   */
  get slots(): number {
    return this.#items.length;
  }

  push(item: T): void {
    this.#items.push(item);
    this.#length++;
  }

  /** The oldest waiting item, removed; `undefined` when none waits. */
  shift(): T | undefined {
    let item: T | null | undefined;
    while (this.#head < this.#items.length) {
      item = this.#items[this.#head];
      this.#items[this.#head++] = null;
      if (item !== null) break;
    }
    if (item !== null && item !== undefined) this.#length--;
    this.#compact();
    return item ?? undefined;
  }

  /** Removes the oldest waiting item that `match` accepts; whether there was one. */
  withdraw(match: (item: T) => boolean): boolean {
    for (let i = this.#head; i < this.#items.length; i++) {
      const item = this.#items[i];
      if (item !== null && item !== undefined && match(item)) {
        this.#items[i] = null;
        this.#length--;
        return true;
      }
    }
    return false;
  }

  /** Empties the queue and returns what waited, oldest first. */
  drain(): T[] {
    const waiting = this.#items.slice(this.#head).filter((item): item is T => item !== null);
    this.#items = [];
    this.#head = 0;
    this.#length = 0;
    return waiting;
  }

  #compact(): void {
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      // A queue that never runs empty would otherwise keep every slot it ever had.
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
  }
}
