import type { RetentionPolicy, RetentionStore, TrimReport, TrimRequest } from '../../core/backend.js';
import { groupNotFound } from '../../core/errors.js';
import type { MemoryStore } from './store.js';

/** Retention and deletion on the memory backend: policies, trims and the deletion of groups and streams. */
export class MemoryRetention implements RetentionStore {
  readonly #store: MemoryStore;

  constructor(store: MemoryStore) {
    this.#store = store;
  }

  async setRetention(stream: string, retention: RetentionPolicy | null): Promise<void> {
    this.#store.stream(stream).retention = retention && { ...retention };
  }

  /**
   * Per partition in order, while the batch limit lasts: the bound is the
   * higher of the count bound and the age bound (the leading run of old
   * events), capped by every group's frontier unless forced. Groups passed
   * by a forced bound lose their unsettled sequences below it.
   */
  async trim(stream: string, request: TrimRequest): Promise<TrimReport> {
    const s = this.#store.stream(stream);
    const { log } = s;
    const explicit = request.before !== null || request.keep !== null;
    const policy = explicit ? null : s.retention;
    const keep = explicit ? request.keep : (policy?.maxEvents ?? null);
    const beforeMs = explicit
      ? (request.before?.getTime() ?? null)
      : policy?.maxAgeMs != null
        ? this.#store.clock.now() - policy.maxAgeMs
        : null;
    const report: TrimReport = { deleted: 0, partitions: {}, forced: [] };
    let budget = request.limit;
    for (let p = 0; p < log.partitions; p++) {
      const low = log.lowWatermark(p);
      let bound = low - 1;
      if (budget > 0 && (explicit || policy !== null)) {
        if (keep !== null) bound = Math.max(bound, log.highWatermark(p) - keep);
        if (beforeMs !== null) bound = Math.max(bound, log.lastBefore(p, beforeMs, budget));
        bound = Math.min(bound, low - 1 + budget);
        if (!request.force) for (const g of s.groups.values()) bound = Math.min(bound, g.parts[p]!.frontier());
      }
      if (bound >= low) {
        for (const g of [...s.groups.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
          const unsettled = g.parts[p]!.trimTo(bound);
          g.deadLetters.removeUpTo(p, bound);
          if (unsettled > 0) report.forced.push({ group: g.name, partition: p, unsettled });
        }
      }
      const deleted = bound >= low ? log.trimTo(p, bound) : 0;
      budget -= deleted;
      report.deleted += deleted;
      report.partitions[p] = { deleted, lowWatermark: log.lowWatermark(p) };
    }
    return report;
  }

  async deleteGroup(stream: string, group: string): Promise<void> {
    const s = this.#store.stream(stream);
    if (!s.groups.delete(group)) throw groupNotFound(stream, group);
  }

  async deleteStream(stream: string): Promise<void> {
    this.#store.stream(stream); // stream_not_found for an unknown one
    this.#store.streams.delete(stream);
    // Idle producers of the stream look again (and find it gone) instead of waiting out their poll.
    this.#store.waiters.wake(stream);
  }
}
