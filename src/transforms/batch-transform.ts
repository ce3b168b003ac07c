import { assertKnownKeys, optionKeys } from '../core/option-keys.js';
import { Transform } from 'node:stream';
import { invalidArgument } from '../core/errors.js';
import { systemTimers, type Timers } from '../runtime/timers.js';
import { BatchCollector } from '../runtime/batch-collector.js';
import { releaseHeld, type LeaseReleaser } from './release-held.js';

export interface BatchTransformOptions {
  /** Emit a batch at this many items... */
  size?: number;
  /** ...or this long after the batch's first item, whichever comes first. */
  timeMs?: number;
  timers?: Timers;
  /** When given, leases of a batch still being collected are released if the stream is destroyed. */
  producer?: LeaseReleaser;
}

/**
 * Groups items (leases, or `{ lease, value }` from a map) into arrays by size
 * and/or time for a downstream writer; the partial batch is emitted when the
 * stream ends. It settles nothing: the writer settles each lease (given a
 * `producer`, it releases the leases of an unfinished batch on destroy).
 */
/** Every option `createBatchTransform` takes; any other key is refused. */
const OPTION_KEYS = optionKeys<BatchTransformOptions>()('size', 'timeMs', 'timers', 'producer');

export function createBatchTransform<C = unknown>(options: BatchTransformOptions): BatchTransform<C> {
  return new BatchTransform<C>(options);
}

export class BatchTransform<C = unknown> extends Transform {
  readonly #collector: BatchCollector<C>;
  readonly #producer: LeaseReleaser | undefined;

  constructor(options: BatchTransformOptions) {
    assertKnownKeys('createBatchTransform options', options, OPTION_KEYS);
    if (options === null || typeof options !== 'object') throw invalidArgument('createBatchTransform expects { size?, timeMs? }');
    super({ objectMode: true });
    this.#producer = options.producer;
    this.#collector = new BatchCollector<C>({
      size: options.size,
      intervalMs: options.timeMs,
      timers: options.timers ?? systemTimers,
      onFlush: (items) => {
        // Stryker disable next-line ConditionalExpression: equivalent: _destroy's take() cancels the collector's timer, so no flush follows a destroy, and a push after destroy is a no-op anyway
        if (!this.destroyed) this.push(items);
      },
    });
  }

  override _transform(item: C, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.#collector.add(item);
    callback();
  }

  override _flush(callback: (error?: Error | null) => void): void {
    // Stryker disable next-line StringLiteral: equivalent: onFlush above ignores the flush reason
    this.#collector.flush('end');
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const held = this.#collector.take();
    if (!this.#producer || held.length === 0) return callback(error);
    releaseHeld(this.#producer, held, this).then(() => callback(error));
  }
}
