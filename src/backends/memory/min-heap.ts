/**
 * A binary min-heap ordered by a numeric comparator. The memory backend keeps
 * stale entries and skips them on pop (lazy deletion), which keeps every
 * operation O(log n) without an index into the heap; `retain` sweeps them out
 * when they pile up.
 */
export class MinHeap<T> {
  readonly #items: T[] = [];
  readonly #less: (a: T, b: T) => boolean;

  constructor(less: (a: T, b: T) => boolean) {
    this.#less = less;
  }

  get size(): number {
    return this.#items.length;
  }

  peek(): T | undefined {
    return this.#items[0];
  }

  push(item: T): void {
    const items = this.#items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.#less(items[i]!, items[parent]!)) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }

  pop(): T | undefined {
    const items = this.#items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last !== undefined) {
      items[0] = last;
      this.#siftDown(0);
    }
    return top;
  }

  clear(): void {
    this.#items.length = 0;
  }

  /** Drops every item `keep` rejects and restores heap order: O(n). */
  retain(keep: (item: T) => boolean): void {
    const items = this.#items;
    let n = 0;
    for (const item of items) if (keep(item)) items[n++] = item;
    items.length = n;
    for (let i = (n >> 1) - 1; i >= 0; i--) this.#siftDown(i);
  }

  #siftDown(start: number): void {
    const items = this.#items;
    let i = start;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < items.length && this.#less(items[l]!, items[m]!)) m = l;
      if (r < items.length && this.#less(items[r]!, items[m]!)) m = r;
      if (m === i) return;
      [items[i], items[m]] = [items[m]!, items[i]!];
      i = m;
    }
  }
}
