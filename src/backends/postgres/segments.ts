import type { Database } from './connection.js';

/**
 * The largest segment, in events per partition: 2^20. A query over the
 * partitioned log plans and locks every segment of its stream, so their
 * number is what this bounds: one million events per partition per segment
 * keeps a stream without retention at one segment per million events. With
 * retention a segment is a quarter of `maxEvents` (migration 009), so
 * dropping whole segments keeps storage within 1.25× the retained events.
 */
export const DEFAULT_SEGMENT_EVENTS = 1 << 20;

/**
 * Appended events a process counts per stream before it asks whether the
 * stream's current segment is full (one cheap call of `roll_segment`). A
 * segment overshoots its span by at most this many events per appending
 * process, which is small against the smallest span (256 events per
 * partition times the partitions, or a quarter of `maxEvents`).
 */
const CHECK_EVERY = 256;

/**
 * Opens a stream's next segment when its current one is due
 * (`roll_segment`, migration 009). Rolling is opportunistic: it needs a
 * short DDL lock on `events`, and when a session holds a conflicting lock
 * (a pg_dump, a long query on the log) it gives up after its lock_timeout;
 * appends go on into the current segment and the next check rolls. So a
 * failed roll is counted, never thrown into an append or a trim.
 */
export class SegmentRoller {
  readonly #db: Database;
  readonly #statement: string;
  readonly #maxSpan: number;
  /** Events appended through this process per stream id since its last check; absent: never checked. */
  readonly #sinceCheck = new Map<number, number>();
  #failures = 0;

  constructor(db: Database, statement: string, maxSpan: number) {
    this.#db = db;
    this.#statement = statement;
    this.#maxSpan = maxSpan;
  }

  /** Rolls that gave up (lock timeout, connection error) since this backend opened. */
  get failures(): number {
    return this.#failures;
  }

  /** After an append through the pool: checks on the first append per stream, then every CHECK_EVERY events. */
  async appended(streamId: number, stream: string, count: number): Promise<void> {
    const seen = this.#sinceCheck.get(streamId);
    const total = (seen ?? 0) + count;
    if (seen !== undefined && total < CHECK_EVERY) {
      this.#sinceCheck.set(streamId, total);
      return;
    }
    this.#sinceCheck.set(streamId, 0);
    await this.roll(streamId, stream);
  }

  /** Opens the next segment if due; returns it, or null when none was due or the roll gave up. */
  async roll(streamId: number, stream: string): Promise<number | null> {
    try {
      const [row] = await this.#db.query<{ segment: string | number | null }>(
        { action: `open the next segment of stream "${stream}"`, stream, writes: true },
        this.#statement,
        [streamId, this.#maxSpan],
      );
      return row?.segment === null || row?.segment === undefined ? null : Number(row.segment);
    } catch {
      this.#failures++;
      return null;
    }
  }

  forget(streamId: number): void {
    this.#sinceCheck.delete(streamId);
  }
}
