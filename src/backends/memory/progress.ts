import type { GroupStart, GroupStorageStats, NormalizedReplay, ProgressStore } from '../../core/backend.js';
import { RheoError, invalidArgument } from '../../core/errors.js';
import type { DeadLetter, GroupInfo, LagReport } from '../../core/types.js';
import { groupLag, groupScope, startPartitions, type GroupState } from './group-state.js';
import { bumpGenerations } from './ownership.js';
import type { MemoryStore } from './store.js';

/** A group's progress on the memory backend: lag, replay, reset, dead letters and their redrive. */
export class MemoryProgress implements ProgressStore {
  readonly #store: MemoryStore;

  constructor(store: MemoryStore) {
    this.#store = store;
  }

  async lag(stream: string, group: string, only: number[] | null = null): Promise<LagReport> {
    const { log, g } = this.#store.group(stream, group);
    return groupLag(log, g, groupScope(log, g, only));
  }

  async replay(stream: string, group: string, spec: NormalizedReplay, only: number[] | null): Promise<void> {
    const { log, g } = this.#store.group(stream, group);
    const partitions = groupScope(log, g, only);
    const now = this.#store.clock.now();
    if (spec.kind === 'query') {
      // Reopened in log order per partition; all matches are found before
      // the first is reopened, so the replay is all or nothing like the others.
      const matched = partitions.flatMap((p) => log.matching(p, spec.query));
      for (const e of matched) reopen(g, e.partition, e.sequence, now);
      return;
    }
    if (spec.kind === 'eventIds') {
      const events = spec.eventIds.map((id) => {
        const e = log.byId.get(id);
        if (!e) throw invalidArgument(`replay: event "${id}" does not exist in stream "${stream}"`, { stream, group });
        return e;
      });
      const allowed = new Set(partitions);
      bumpGenerations(g, [...new Set(events.map((e) => e.partition))].filter((p) => allowed.has(p)));
      for (const e of events) {
        if (allowed.has(e.partition)) reopen(g, e.partition, e.sequence, now);
      }
      return;
    }
    bumpGenerations(g, partitions);
    for (const p of partitions) {
      // Below the low watermark a replay starts at it (docs/semantics.md, "Retention").
      const from =
        spec.kind === 'fromSequence' ? Math.max(spec.fromSequence, log.lowWatermark(p)) : log.firstSequenceAt(p, spec.from.getTime());
      if (from === null) continue;
      const part = g.parts[p]!;
      part.rewind(from);
      for (const dead of g.deadLetters.inPartitionFrom(p, from)) g.deadLetters.remove(dead);
    }
  }

  async resetGroup(stream: string, group: string, start: GroupStart, only: number[] | null = null): Promise<void> {
    const { log, g } = this.#store.group(stream, group);
    const scope = groupScope(log, g, only);
    const fresh = startPartitions(log, group, start, scope);
    for (const p of scope) {
      g.parts[p] = fresh[p]!;
      for (const dead of g.deadLetters.inPartitionFrom(p, 0)) g.deadLetters.remove(dead);
    }
    bumpGenerations(g, scope);
  }

  async groupInfo(stream: string, group: string): Promise<GroupInfo> {
    const { log, g } = this.#store.group(stream, group);
    return {
      stream,
      group,
      maxAttempts: g.maxAttempts,
      lag: groupLag(log, g),
      inflight: g.parts.reduce((n, part) => n + part.leasedCount, 0),
      deadLetters: g.deadLetters.size,
      partitions: Object.fromEntries(
        g.partitions.map((p) => [p, { inflight: g.parts[p]!.leasedCount, deadLetters: g.deadLetters.countIn(p) }]),
      ),
    };
  }

  async deadLetters(stream: string, group: string, limit: number, after: string | null, maxBytes: number): Promise<DeadLetter[]> {
    const { log, g } = this.#store.group(stream, group);
    let afterId = 0;
    if (after !== null) {
      // The id spelled exactly as it was handed out: '01' names no dead letter.
      afterId = /^[1-9]\d{0,14}$/.test(after) ? Number(after) : -1;
      if (!g.deadLetters.has(afterId)) {
        throw new RheoError('cursor_not_found', `dead-letter cursor "${after}" not found in group "${group}" of stream "${stream}"`, {
          stream,
          group,
        });
      }
    }
    const page = g.deadLetters.page(afterId, limit);
    let n = 0;
    for (let bytes = 0; n < page.length; n++) {
      bytes += log.size(page[n]!.partition, page[n]!.sequence);
      if (bytes > maxBytes && n > 0) break;
    }
    return page.slice(0, n).map((e) => ({
      id: String(e.id),
      stream,
      group,
      attempt: e.attempt,
      reason: e.reason,
      deadLetteredAt: new Date(e.deadLetteredAt),
      event: log.event(e.partition, e.sequence)!,
    }));
  }

  async redrive(stream: string, group: string, eventIds: string[] | null): Promise<number> {
    const { log, g } = this.#store.group(stream, group);
    const now = this.#store.clock.now();
    const entries =
      eventIds === null
        ? g.deadLetters.all()
        : eventIds.flatMap((id) => {
            const e = log.byId.get(id);
            const dead = e && g.deadLetters.find(e.partition, e.sequence);
            return dead ? [dead] : [];
          });
    bumpGenerations(g, [...new Set(entries.map((dead) => dead.partition))]);
    for (const dead of entries) {
      g.deadLetters.remove(dead);
      g.parts[dead.partition]!.reopen(dead.sequence, now);
    }
    return entries.length;
  }

  async storageStats(stream: string, group: string): Promise<GroupStorageStats> {
    const { g } = this.#store.group(stream, group);
    return {
      deliveries: g.parts.reduce((n, part) => n + part.open.size, 0),
      deadLetters: g.deadLetters.size,
    };
  }
}

/** Replay of one event: a settled (acked or dead) delivery becomes claimable again with attempts reset; an open one is left alone. */
function reopen(g: GroupState, p: number, sequence: number, now: number): void {
  const part = g.parts[p]!;
  if (!part.isSettled(sequence)) return;
  const dead = g.deadLetters.find(p, sequence);
  if (dead) g.deadLetters.remove(dead);
  part.reopen(sequence, now);
}
