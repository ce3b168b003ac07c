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
 * Appended events a process counts per stream before it asks again whether
 * the stream's current segment is full (one call of `roll_segment`): at
 * least this many, the smallest span (256 events per partition).
 */
const CHECK_EVERY = 256;

/** At most this many: a retention policy set by another process is seen within it. */
const MAX_QUIET = 1 << 14;

/** After a roll gave up, the next check waits 4× longer, up to this many events. */
const MAX_CHECK_EVERY = 1 << 16;

/**
 * The events between checks of a stream whose retention is as given: a
 * sixteenth of its span (the count that opens a segment, migration 009),
 * between CHECK_EVERY and MAX_QUIET, so that a segment overshoots its span
 * by at most a sixteenth of it (or 256 events) per appending process.
 * Checking every 256 events cost a 1,000-event append one more round trip
 * each time. An age policy keeps CHECK_EVERY: its segments open by time.
 */
export function checkInterval(maxSpan: number, maxEvents: number | null, byAge: boolean): number {
  if (byAge) return CHECK_EVERY;
  const span = Math.min(maxSpan, Math.max(256, maxEvents === null ? maxSpan : Math.floor(maxEvents / 4)));
  return Math.max(CHECK_EVERY, Math.min(MAX_QUIET, Math.floor(span / 16)));
}

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
  /** Per stream id, the events until its next check: checkInterval() after an answer, 4× more after each roll that gave up. */
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

  /** After an append through the pool: checks on the first append per stream, then every checkInterval() events. */
  async appended(streamId: number, stream: string, count: number): Promise<void> {
    const seen = this.#sinceCheck.get(streamId);
    const total = (seen ?? 0) + count;
    const interval = this.#interval.get(streamId) ?? CHECK_EVERY;
    if (seen !== undefined && total < interval) {
      this.#sinceCheck.set(streamId, total);
      return;
    }
    // Before the call: appends that finish while it is out count towards the next check, not towards another one now.
    this.#sinceCheck.set(streamId, 0);
    const { gaveUp } = await this.#attempt(streamId, stream);
    if (gaveUp) this.#interval.set(streamId, Math.min(interval * 4, MAX_CHECK_EVERY));
  }

  /**
   * Opens the next segment if due; returns it, or null when none was due or
   * the roll gave up. Answered for a stream this process has not appended
   * to yet (it has just created it), it stands for the first append's check.
   */
  async roll(streamId: number, stream: string): Promise<number | null> {
    const { segment, gaveUp } = await this.#attempt(streamId, stream);
    if (!gaveUp && !this.#sinceCheck.has(streamId)) this.#sinceCheck.set(streamId, 0);
    return segment;
  }

  /** One check; when answered, the stream's next one is checkInterval() events away. */
  async #attempt(streamId: number, stream: string): Promise<{ segment: number | null; gaveUp: boolean }> {
    try {
      const [row] = await this.#db.query<{ segment: string | number | null; max_events: string | number | null; by_age: boolean | null }>(
        { action: `open the next segment of stream "${stream}"`, stream, writes: true },
        this.#statement,
        [streamId, this.#maxSpan],
      );
      const segment = row?.segment === null || row?.segment === undefined ? null : Number(row.segment);
      if (segment !== null) this.#onOpened();
      const maxEvents = row?.max_events === null || row?.max_events === undefined ? null : Number(row.max_events);
      this.#interval.set(streamId, checkInterval(this.#maxSpan, maxEvents, row?.by_age === true));
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
