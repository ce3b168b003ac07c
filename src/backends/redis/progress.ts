import type { GroupStart, GroupStorageStats, NormalizedReplay, ProgressStore } from '../../core/backend.js';
import { RheoError, invalidArgument } from '../../core/errors.js';
import type { DeadLetter, GroupInfo, LagReport, PartitionLag } from '../../core/types.js';
import { decodeEvent, decodeReason } from './codec.js';
import type { FailureContext } from './errors.js';
import { DEAD_LETTERS, INFO, REDRIVE, REPLAY, RESET_GROUP } from './lua/scripts.js';
import { matchingSequences } from './query.js';
import { checkStart, coveredOf, scopeOf, startArgs } from './partition-scope.js';
import type { GroupMeta, RedisStore } from './store.js';

/** A group's progress on Redis: lag and counts, replay, reset, dead letters and their redrive, one script per partition. */
export class RedisProgress implements ProgressStore {
  readonly #store: RedisStore;

  constructor(store: RedisStore) {
    this.#store = store;
  }

  async lag(stream: string, group: string, partitions: number[] | null = null): Promise<LagReport> {
    return (await this.#info(stream, group, partitions)).lag;
  }

  async groupInfo(stream: string, group: string): Promise<GroupInfo> {
    const { lag, g, leased, deadLetters, perPartition } = await this.#info(stream, group);
    return { stream, group, maxAttempts: g.maxAttempts, lag, inflight: leased, deadLetters, partitions: perPartition };
  }

  async storageStats(stream: string, group: string): Promise<GroupStorageStats> {
    const { open, deadLetters } = await this.#info(stream, group);
    return { deliveries: open, deadLetters };
  }

  async replay(stream: string, group: string, spec: NormalizedReplay, only: number[] | null): Promise<void> {
    const { meta, g } = await this.#store.groupMeta(stream, group);
    const partitions = scopeOf(stream, group, meta, g, only);
    const ctx = { action: `replay group "${group}" of stream "${stream}"`, stream, group, writes: true };
    if (spec.kind === 'query') {
      // Every match is found before the first is reopened, so a failed scan reopens nothing.
      const matched = await Promise.all(
        partitions.map((p) =>
          matchingSequences(stream, p, spec.query, (partition, from, count) =>
            this.#store.command(['xrange', this.#store.keys.partition(stream, partition).log, from, '+', 'COUNT', count], { ...ctx, writes: false }) as Promise<unknown[]>,
          ),
        ),
      );
      await Promise.all(
        partitions.map((p, i) => (matched[i]!.length > 0 ? this.#replayIds(stream, group, p, matched[i]!, ctx) : Promise.resolve())),
      );
      return;
    }
    if (spec.kind === 'eventIds') {
      const found = await this.#store.locate(stream, meta.partitions, spec.eventIds, ctx);
      const missing = spec.eventIds.find((id) => !found.has(id));
      if (missing !== undefined) throw invalidArgument(`replay: event "${missing}" does not exist in stream "${stream}"`, { stream, group });
      const bySeq = new Map<number, number[]>();
      for (const { partition, sequence } of found.values()) {
        if (!partitions.includes(partition)) continue;
        let list = bySeq.get(partition);
        if (!list) bySeq.set(partition, (list = []));
        list.push(sequence);
      }
      await Promise.all([...bySeq].map(([p, seqs]) => this.#replayIds(stream, group, p, seqs, ctx)));
      return;
    }
    const args = spec.kind === 'fromSequence' ? ['seq', spec.fromSequence] : ['at', spec.from.getTime()];
    await Promise.all(partitions.map((p) => this.#store.group(REPLAY, stream, group, p, args, ctx)));
  }

  /** Reopens the settled ones of `sequences` in one partition, in chunks that keep each script's argument list bounded. */
  async #replayIds(stream: string, group: string, partition: number, sequences: number[], ctx: FailureContext): Promise<void> {
    for (let i = 0; i < sequences.length; i += 5_000) {
      await this.#store.group(REPLAY, stream, group, partition, ['ids', ...sequences.slice(i, i + 5_000)], ctx);
    }
  }

  async resetGroup(stream: string, group: string, start: GroupStart, only: number[] | null = null): Promise<void> {
    const { meta, g } = await this.#store.groupMeta(stream, group);
    const scope = scopeOf(stream, group, meta, g, only);
    checkStart(stream, group, meta, start, scope);
    const ctx = { action: `reset group "${group}" of stream "${stream}"`, stream, group, writes: true };
    await Promise.all(scope.map((p) => this.#store.group(RESET_GROUP, stream, group, p, startArgs(start, p), ctx)));
  }

  /**
   * Dead-letter ids are 42 digits (DEAD_LETTER_ID): the time in ms, this
   * process's order of the call, the partition and a per-partition counter,
   * so they grow in the order deliveries died, and a page is a merge of each
   * partition's next ids. Deaths in one millisecond in different processes
   * (on a cluster: on different servers, whose clocks may differ) are
   * ordered arbitrarily, but the same way every time.
   */
  async deadLetters(stream: string, group: string, limit: number, after: string | null, maxBytes: number): Promise<DeadLetter[]> {
    const { meta, g } = await this.#store.groupMeta(stream, group);
    const covered = coveredOf(meta, g);
    const ctx = { action: `list dead letters of group "${group}" on stream "${stream}"`, stream, group, writes: false };
    let cursorPartition = -1;
    if (after !== null) {
      cursorPartition = DEAD_LETTER_ID.test(after) ? Number(after.slice(27, 32)) : -1;
      if (!covered.includes(cursorPartition)) throw cursorNotFound(stream, group, after);
    }
    const pages = await Promise.all(
      covered.map(async (p) => {
        const reply = await this.#store.group(DEAD_LETTERS, stream, group, p, [after ?? '', limit, p === cursorPartition ? '1' : '0'], ctx);
        if (reply === 'nocursor') throw cursorNotFound(stream, group, after!);
        return (reply as Array<[string, string, string, string, string, string]>).map(([id, sequence, record, t, z, d]) => {
          const [, attempt, at, reason] = /^(\d+)\|(\d+)\|(-?\d+)\|(.*)$/s.exec(record)!.slice(1, 5);
          const letter: DeadLetter = {
            id,
            stream,
            group,
            attempt: Number(attempt),
            reason: decodeReason(reason!),
            deadLetteredAt: new Date(Number(at)),
            event: decodeEvent(stream, p, Number(sequence), t, d),
          };
          return { letter, size: Number(z) };
        });
      }),
    );
    const merged = pages.flat().sort((a, b) => (a.letter.id < b.letter.id ? -1 : a.letter.id > b.letter.id ? 1 : 0));
    const out: DeadLetter[] = [];
    let bytes = 0;
    for (const { letter, size } of merged.slice(0, limit)) {
      bytes += size;
      if (bytes > maxBytes && out.length > 0) break;
      out.push(letter);
    }
    return out;
  }

  async redrive(stream: string, group: string, eventIds: string[] | null): Promise<number> {
    const { meta, g } = await this.#store.groupMeta(stream, group);
    const covered = coveredOf(meta, g);
    const ctx = { action: `redrive dead letters of group "${group}" on stream "${stream}"`, stream, group, writes: true };
    if (eventIds === null) {
      const counts = await Promise.all(covered.map((p) => this.#store.group(REDRIVE, stream, group, p, ['all'], ctx)));
      return counts.reduce((n: number, c) => n + Number(c), 0);
    }
    const found = await this.#store.locate(stream, meta.partitions, eventIds, ctx);
    const byPartition = new Map<number, number[]>();
    for (const { partition, sequence } of found.values()) {
      if (!covered.includes(partition)) continue; // the group holds no dead letter there
      let list = byPartition.get(partition);
      if (!list) byPartition.set(partition, (list = []));
      list.push(sequence);
    }
    const counts = await Promise.all([...byPartition].map(([p, seqs]) => this.#store.group(REDRIVE, stream, group, p, ['seqs', ...seqs], ctx)));
    return counts.reduce((n: number, c) => n + Number(c), 0);
  }

  async #info(
    stream: string,
    group: string,
    only: number[] | null = null,
  ): Promise<{
    lag: LagReport;
    g: GroupMeta;
    leased: number;
    deadLetters: number;
    open: number;
    perPartition: GroupInfo['partitions'];
  }> {
    const { meta, g } = await this.#store.groupMeta(stream, group);
    const scope = scopeOf(stream, group, meta, g, only);
    const ctx = { action: `read progress of group "${group}" on stream "${stream}"`, stream, group, writes: false };
    const rows = (await Promise.all(scope.map((p) => this.#store.group(INFO, stream, group, p, [], ctx)))) as Array<
      [string, string, string, number, number, number, string]
    >;
    const partitions: Record<number, PartitionLag> = {};
    let total = 0;
    let leased = 0;
    let deadLetters = 0;
    let open = 0;
    const perPartition: GroupInfo['partitions'] = {};
    rows.forEach(([f, h, oldest, l, dl, o, low], i) => {
      const p = scope[i]!;
      const frontier = Number(f);
      const highWatermark = Number(h);
      const lag = Math.max(0, highWatermark - frontier);
      total += lag;
      partitions[p] = { lowWatermark: Number(low), frontier, highWatermark, lag, oldestUnsettledAt: lag > 0 && oldest !== '' ? new Date(Number(oldest)) : null };
      perPartition[p] = { inflight: l, deadLetters: dl };
      leased += l;
      deadLetters += dl;
      open += o;
    });
    return { lag: { stream, group, lag: total, partitions }, g, leased, deadLetters, open, perPartition };
  }
}

/** 15 digits of ms, 12 of order, 5 of partition, 10 of counter (lua/group-prelude.ts `dead`). */
const DEAD_LETTER_ID = /^\d{42}$/;

function cursorNotFound(stream: string, group: string, after: string): RheoError {
  return new RheoError('cursor_not_found', `dead-letter cursor "${after}" not found in group "${group}" of stream "${stream}"`, { stream, group });
}
