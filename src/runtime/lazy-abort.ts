/**
 * An abort signal created only when someone reads it. Every lease handed to
 * a handler comes with a signal, but most handlers never look at it, and an
 * AbortController per lease was among the top allocations in profiles of the
 * lease sink and the consumer. An abort that happens first is replayed onto
 * the signal when it is read.
 */
export class LazyAbort {
  #controller: AbortController | null = null;
  #aborted = false;
  #reason: unknown = undefined;

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  /** Idempotent: the first reason wins. */
  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }
}
