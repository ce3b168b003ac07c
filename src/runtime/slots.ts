/**
 * The runtime's one concurrency limiter, a counting semaphore: `size`
 * handlers at once (across every worker of a partition consumer, or in the
 * competing consumer's loop). `tryTake` costs no promise and no turn of the
 * event loop, which the hot paths rely on; `take` waits for a slot.
 */
export class Slots {
  #free: number;
  readonly #waiters: Array<() => void> = [];

  constructor(size: number) {
    this.#free = size;
  }

  /** Takes a slot now if one is free (no promise, no turn of the event loop). */
  tryTake(): boolean {
    if (this.#free === 0) return false;
    this.#free--;
    return true;
  }

  async take(): Promise<void> {
    if (this.tryTake()) return;
    await new Promise<void>((resolve) => this.#waiters.push(resolve));
  }

  give(): void {
    const next = this.#waiters.shift();
    if (next) next();
    else this.#free++;
  }
}
