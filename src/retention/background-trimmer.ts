import type { Backend } from '../core/backend.js';
import { trimInBatches } from './trim-batches.js';

export interface TrimmerOptions {
  /** Time between passes over the streams with retention. */
  intervalMs: number;
  /** Events per backend `trim` call. */
  batchSize: number;
  /** Batches per stream per pass, so one huge backlog cannot monopolise a pass. */
  maxBatchesPerPass: number;
}

/**
 * Trims every stream that has retention, in the background of a `Rheo`
 * (docs/semantics.md, "Background trimming"). One pass at a time; the timer
 * is `unref`'d so it never keeps the process alive, and `close()` clears it
 * and waits for a pass in flight. Every batch asks the backend to skip a
 * stream another trimmer (another process) is working on. Failures are
 * swallowed (the next pass retries); `lastError` keeps the last one.
 */
export class BackgroundTrimmer {
  readonly #backend: Backend;
  readonly #options: TrimmerOptions;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<void> | null = null;
  #closed = false;
  /** How many passes have completed (a gauge for tests and diagnostics). */
  passes = 0;
  lastError: unknown = null;

  constructor(backend: Backend, options: TrimmerOptions) {
    this.#backend = backend;
    this.#options = options;
  }

  start(): void {
    if (this.#closed || this.#timer || !this.#backend.capabilities.retention) return;
    this.#timer = setInterval(() => {
      void this.runOnce();
    }, this.#options.intervalMs);
    this.#timer.unref();
  }

  /** One pass now (or the pass already running). Never rejects. */
  runOnce(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#running ??= this.#pass().finally(() => {
      this.#running = null;
    });
    return this.#running;
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  async #pass(): Promise<void> {
    // A backend without the retention capability has nothing to trim (and no trim call).
    if (!this.#backend.capabilities.retention || !this.#backend.trim) {
      this.passes++;
      return;
    }
    try {
      const streams = await this.#backend.listStreams();
      for (const info of streams) {
        if (this.#closed) return;
        if (info.retention === null) continue;
        try {
          await trimInBatches(
            this.#backend,
            info.name,
            { before: null, keep: null, force: false, limit: this.#options.batchSize, skipIfBusy: true },
            this.#options.maxBatchesPerPass,
          );
        } catch (error) {
          // A stream deleted meanwhile, a lost connection, a closing backend: the next pass retries.
          this.lastError = error;
        }
      }
    } catch (error) {
      this.lastError = error;
    } finally {
      this.passes++;
    }
  }
}
