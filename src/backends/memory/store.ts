import type { RetentionPolicy } from '../../core/backend.js';
import type { Clock } from '../../core/clock.js';
import { RheoError, groupNotFound, streamNotFound } from '../../core/errors.js';
import type { GroupState } from './group-state.js';
import type { GroupPartition, OpenDelivery } from './group-partition.js';
import type { StreamLog } from './stream-log.js';
import { StreamWaiters } from '../../core/stream-waiters.js';

export interface StreamState {
  readonly log: StreamLog;
  retention: RetentionPolicy | null;
  readonly groups: Map<string, GroupState>;
}

/**
 * The memory backend's whole state, shared by its concerns (log, leases,
 * progress, ownership, retention): the streams by name, the clock, the
 * dead-letter id counter and whether the backend is closed.
 */
export class MemoryStore {
  readonly clock: Clock;
  readonly streams = new Map<string, StreamState>();
  /** The waits of `waitForAppend`, by stream name. */
  readonly waiters = new StreamWaiters();
  #deadLetterIds = 0;
  #closed = false;

  constructor(clock: Clock) {
    this.clock = clock;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Refuses every later call and wakes every waiter, which then answers `false`. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.waiters.close();
  }

  nextDeadLetterId(): number {
    return ++this.#deadLetterIds;
  }

  /** Closes the delivery if it is still open, and records it as a dead letter of the group. */
  deadLetter(g: GroupState, p: number, part: GroupPartition, d: OpenDelivery, reason: string | null, now: number): void {
    if (part.open.get(d.sequence) === d) part.close(d);
    g.deadLetters.add({
      id: this.nextDeadLetterId(),
      partition: p,
      sequence: d.sequence,
      attempt: d.attempt,
      reason,
      deadLetteredAt: now,
    });
  }

  stream(stream: string): StreamState {
    this.assertOpen();
    const s = this.streams.get(stream);
    if (!s) throw streamNotFound(stream);
    return s;
  }

  group(stream: string, group: string): { log: StreamLog; g: GroupState } {
    const s = this.stream(stream);
    const g = s.groups.get(group);
    if (!g) throw groupNotFound(stream, group);
    return { log: s.log, g };
  }

  assertOpen(): void {
    if (this.#closed) throw new RheoError('closed', 'the memory backend is closed');
  }
}
