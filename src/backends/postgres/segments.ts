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

/** After a roll gave up, the next check waits 4× longer, up to this many events. */
const MAX_CHECK_EVERY = 1 << 16;

/**
 * Opens a stream's next segment when its current one is due
 * (`roll_segment`, migration 009). Rolling is opportunistic: its ATTACH
 * takes an ACCESS EXCLUSIVE lock on segment 0 for a moment, which every
 * statement on the log holds in ACCESS SHARE while it runs, so a session
 * that keeps a transaction open after touching the log (a pg_dump, a
 * report) makes it give up after its 200 ms lock_timeout, during which
 * statements on the log queue behind it. Appends go on into the current
 * segment. A failed roll is counted, never thrown into an append or a
 * trim, and the stream's next check waits 4× more events each time (up to
 * 65,536), so a long dump costs a 200 ms pause per that many events, not
 * per 256.
 */
export class SegmentRoller {
  readonly #db: Database;
  readonly #statement: string;
  readonly #maxSpan: number;
  readonly #onOpened: () => void;
  /** Events appended through this process per stream id since its last check; absent: never checked. */
  readonly #sinceCheck = new Map<number, number>();
  /** Per stream id, the events between checks when above CHECK_EVERY (after rolls that gave up). */
  readonly #interval = new Map<number, number>();
  #failures = 0;

  /** `onOpened`: called after each segment this roller opened (the log has one table more). */
  constructor(db: Database, statement: string, maxSpan: number, onOpened: () => void = () => undefined) {
    this.#db = db;
    this.#statement = statement;
    this.#maxSpan = maxSpan;
    this.#onOpened = onOpened;
  }

  /** Rolls that gave up (lock timeout, connection error) since this backend opened. */
  get failures(): number {
    return this.#failures;
  }

  /** After an append through the pool: checks on the first append per stream, then every CHECK_EVERY events. */
  async appended(streamId: number, stream: string, count: number): Promise<void> {
    const seen = this.#sinceCheck.get(streamId);
    const total = (seen ?? 0) + count;
    const interval = this.#interval.get(streamId) ?? CHECK_EVERY;
    if (seen !== undefined && total < interval) {
      this.#sinceCheck.set(streamId, total);
      return;
    }
    this.#sinceCheck.set(streamId, 0);
    const { gaveUp } = await this.#attempt(streamId, stream);
    if (gaveUp) this.#interval.set(streamId, Math.min(interval * 4, MAX_CHECK_EVERY));
    else this.#interval.delete(streamId);
  }

  /** Opens the next segment if due; returns it, or null when none was due or the roll gave up. */
  async roll(streamId: number, stream: string): Promise<number | null> {
    return (await this.#attempt(streamId, stream)).segment;
  }

  async #attempt(streamId: number, stream: string): Promise<{ segment: number | null; gaveUp: boolean }> {
    try {
      const [row] = await this.#db.query<{ segment: string | number | null }>(
        { action: `open the next segment of stream "${stream}"`, stream, writes: true },
        this.#statement,
        [streamId, this.#maxSpan],
      );
      const segment = row?.segment === null || row?.segment === undefined ? null : Number(row.segment);
      if (segment !== null) this.#onOpened();
      return { segment, gaveUp: false };
    } catch {
      this.#failures++;
      return { segment: null, gaveUp: true };
    }
  }

  forget(streamId: number): void {
    this.#sinceCheck.delete(streamId);
    this.#interval.delete(streamId);
  }
}
