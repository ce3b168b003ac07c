import { describe, expect, it } from 'vitest';
import type { Backend } from '../../src/core/backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { Coalescer } from '../../src/core/coalescer.js';
import { RheoError } from '../../src/core/errors.js';
import type { CommitInput, OwnershipFenceInput } from '../../src/core/ownership-arguments.js';
import type { ReadOptions, RheoEvent, SettleResult } from '../../src/core/types.js';
import { resolvePartitionOptions, type PartitionConsumeOptions, type PartitionHandler, type PartitionSource } from '../../src/consumer/partition-options.js';
import { PartitionWorker, type WorkerReport } from '../../src/consumer/partition-worker.js';
import { Slots } from '../../src/runtime/slots.js';
import { SettledInTransaction } from '../../src/consumer/transactional-handler.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { nextCallAt, turns, isSettled } from '../support/turns.js';

/*
 * PartitionWorker against a scripted source: every read waits until the test
 * answers it, commits answer what the test says, and time is a ManualTimers,
 * so read-ahead, backoff, fencing, stop grace and aborts can be driven one
 * step at a time (test/consumer/partitions.test.ts runs the same worker end
 * to end on every backend).
 */

type E = RheoEvent<{ n: number }>;

interface PendingRead {
  after: number;
  limit: number;
  fence: OwnershipFenceInput;
  resolve(events: E[]): void;
  reject(error: unknown): void;
}

const POLL_MS = 50;

function event(sequence: number, key: string | null = null): E {
  return {
    id: `e${sequence}`,
    stream: 's',
    partition: 0,
    sequence,
    type: 't',
    key,
    payload: { n: sequence },
    metadata: {},
    timestamp: new Date(0),
  };
}

function unavailable(): RheoError {
  return new RheoError('backend_unavailable', 'connection lost');
}

function stale(): RheoError {
  return new RheoError('stale_generation', 'partition 0 moved on');
}

class ScriptedOwned {
  readonly clock = new ManualClock(1_000_000);
  readonly timers = new ManualTimers(this.clock);
  readonly defaults = { pollMs: POLL_MS };
  readonly backend = { name: 'scripted', capabilities: { notifications: false } } as unknown as Backend;
  readonly reads: PendingRead[] = [];
  readonly commits: CommitInput[][] = [];
  commitAnswer: (ops: CommitInput[]) => Promise<SettleResult[]> = (ops) => Promise.resolve(ops.map(() => ({ ok: true as const })));

  readOwned<U>(fence: OwnershipFenceInput, options: ReadOptions = {}): Promise<RheoEvent<U>[]> {
    return new Promise((resolve, reject) =>
      this.reads.push({ fence, after: options.after ?? 0, limit: options.limit ?? 0, resolve: resolve as (events: E[]) => void, reject }),
    );
  }

  commit(ops: CommitInput[]): Promise<SettleResult[]> {
    this.commits.push(ops);
    return this.commitAnswer(ops);
  }

  /** The latest read, which must still be waiting. */
  lastRead(): PendingRead {
    const read = this.reads.at(-1);
    if (!read) throw new Error('no read was made');
    return read;
  }

  /** Commits as `[upTo, dead-letter sequences]`. */
  committed(): Array<[number, number[]]> {
    return this.commits.flat().map((op) => [op.upTo, (op.deadLetters ?? []).map((d) => d.sequence)]);
  }
}

/** A scripted source whose backend notifies appends when the test says so. */
class NotifyingOwned extends ScriptedOwned {
  readonly #waiters: Array<() => void> = [];
  override readonly backend = {
    name: 'scripted',
    capabilities: { notifications: true },
    waitForAppend: (_stream: string, _timeoutMs: number, signal?: AbortSignal): Promise<boolean> =>
      new Promise<boolean>((resolve) => {
        this.#waiters.push(() => resolve(true));
        signal?.addEventListener('abort', () => resolve(false), { once: true });
      }),
  } as unknown as Backend;

  /** An append landed: wakes whoever waits now (a notification nobody waits for is lost, as on a real store). */
  notify(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}

class Reports implements WorkerReport {
  readonly log: string[] = [];
  readonly errors: Array<[string, string]> = [];
  handled(): void {
    this.log.push('handled');
  }
  retried(): void {
    this.log.push('retried');
  }
  deadLettered(count: number): void {
    this.log.push(`dead ${count}`);
  }
  committed(): void {
    this.log.push('committed');
  }
  error(kind: 'read' | 'commit', error: RheoError): void {
    this.errors.push([kind, error.code]);
  }
  count(entry: string): number {
    return this.log.filter((e) => e === entry).length;
  }
}

interface Built {
  source: ScriptedOwned;
  worker: PartitionWorker<{ n: number }>;
  reports: Reports;
  slots: Slots;
}

function build(
  handler: PartitionHandler<{ n: number }>,
  options: Partial<PartitionConsumeOptions<{ n: number }>> = {},
  env: { source?: ScriptedOwned; slots?: Slots; maxAttempts?: number; frontier?: number; partition?: number } = {},
): Built {
  const source = env.source ?? new ScriptedOwned();
  const o = resolvePartitionOptions<{ n: number }>(
    { stream: 's', group: 'g', assignment: 'partitions', handler, memberId: 'm', retryBackoff: { initialMs: 10, maxMs: 1000 }, ...options },
    source.defaults,
    () => 'x',
  );
  const reports = new Reports();
  const slots = env.slots ?? new Slots(o.concurrency);
  const committer = new Coalescer((ops: CommitInput[]) => source.commit(ops), { key: (op) => op.partition });
  const worker = new PartitionWorker<{ n: number }>(
    source as unknown as PartitionSource,
    o,
    { partition: env.partition ?? 0, generation: 7, frontier: env.frontier ?? 0 },
    { timers: source.timers, slots, maxAttempts: env.maxAttempts ?? 3, report: reports, committer },
  );
  return { source, worker, reports, slots };
}

/** A worker whose handler never settles; `signal()` is the last run's signal. */
function hanging(options: Partial<PartitionConsumeOptions<{ n: number }>> = {}): Built & { signal(): AbortSignal } {
  let last: AbortSignal | null = null;
  const built = build((_e, context) => {
    last = context.signal;
    return new Promise<never>(() => {});
  }, options);
  return { ...built, signal: () => last! };
}

/** A deferred the test resolves by hand. */
function gate<T = void>(): { promise: Promise<T>; open(value: T): void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}

describe('Slots', () => {
  it('hands out its size, then queues takers in order and passes each freed slot to the oldest', async () => {
    const slots = new Slots(2);
    expect([slots.tryTake(), slots.tryTake(), slots.tryTake()]).toEqual([true, true, false]);
    const order: string[] = [];
    void slots.take().then(() => order.push('a'));
    void slots.take().then(() => order.push('b'));
    await turns(2);
    expect(order).toEqual([]);
    slots.give();
    await turns(2);
    expect(order).toEqual(['a']);
    slots.give();
    await turns(2);
    expect(order).toEqual(['a', 'b']);
    // No one waits now: a freed slot is kept for the next taker.
    slots.give();
    expect(slots.tryTake()).toBe(true);
    expect(slots.tryTake()).toBe(false);
  });

  it('take() resolves at once while a slot is free', async () => {
    const slots = new Slots(1);
    expect(await isSettled(slots.take())).toBe(true);
    expect(await isSettled(slots.take())).toBe(false);
  });
});

describe('PartitionWorker', () => {
  it('listens before it reads: an append notified while an empty read is on its way wakes it, with no poll timer', async () => {
    const source = new NotifyingOwned();
    const seen: number[] = [];
    const { worker } = build((e) => void seen.push(e.sequence), {}, { source });
    await turns();
    expect(source.reads).toHaveLength(1);
    // The append commits (and is notified) after the read's snapshot, before its answer arrives.
    source.notify();
    source.lastRead().resolve([]);
    await turns();
    expect(source.reads).toHaveLength(2);
    source.lastRead().resolve([event(1)]);
    await turns();
    expect(seen).toEqual([1]);
    // Caught up and idle: a notification alone wakes it, again with no timer advanced.
    expect(source.reads).toHaveLength(3);
    source.lastRead().resolve([]);
    await turns();
    expect(source.reads).toHaveLength(3);
    source.notify();
    await turns();
    expect(source.reads).toHaveLength(4);
    worker.stop(0);
    source.lastRead().resolve([]);
    await worker.done;
  });

  it('backs idle reads off while notifications come; events no notification announced keep it at pollMs until one does', async () => {
    const source = new NotifyingOwned();
    const { worker } = build(() => undefined, { maxPollMs: 4 * POLL_MS }, { source });
    const readsAt = (ms: number): Promise<void> => nextCallAt(source.timers, source.reads, ms, 'read');
    await turns();
    source.lastRead().resolve([]);
    await turns();
    for (const ms of [POLL_MS, 2 * POLL_MS, 4 * POLL_MS, 4 * POLL_MS]) {
      await readsAt(ms);
      source.lastRead().resolve([]);
      await turns();
    }
    // Found by the poll, with no notification: back to pollMs, and it stays there.
    await readsAt(4 * POLL_MS);
    source.lastRead().resolve([event(1)]);
    await turns();
    source.lastRead().resolve([]);
    await turns();
    for (let i = 0; i < 3; i++) {
      await readsAt(POLL_MS);
      source.lastRead().resolve([]);
      await turns();
    }
    // A notification: trusted again, so the next empty reads back off.
    source.notify();
    await turns();
    source.lastRead().resolve([]);
    await turns();
    await readsAt(POLL_MS);
    source.lastRead().resolve([]);
    await turns();
    await readsAt(2 * POLL_MS);
    worker.stop(0);
    source.lastRead().resolve([]);
    await worker.done;
  });

  it('reads from the frontier with the fence, runs a batch in order and commits it once', async () => {
    const seen: number[] = [];
    const { source, worker, reports } = build((e) => void seen.push(e.sequence), { batchSize: 3 }, { frontier: 4 });
    await turns();
    expect(source.reads).toHaveLength(1);
    expect(source.lastRead()).toMatchObject({ after: 4, limit: 3, fence: { stream: 's', group: 'g', partition: 0, memberId: 'm', generation: 7 } });
    expect(worker.fence).toEqual({ stream: 's', group: 'g', partition: 0, memberId: 'm', generation: 7 });
    expect(worker.position).toBe(4);
    source.lastRead().resolve([event(5), event(6)]);
    await turns();
    expect(seen).toEqual([5, 6]);
    expect(source.commits).toEqual([[{ stream: 's', group: 'g', partition: 0, memberId: 'm', generation: 7, upTo: 6, deadLetters: [] }]]);
    expect(worker.position).toBe(6);
    expect(reports.log).toEqual(['handled', 'handled', 'committed']);
    // A short batch: the next read starts after it, once the batch is done.
    expect(source.reads).toHaveLength(2);
    expect(source.lastRead().after).toBe(6);
    worker.stop(0);
    source.lastRead().resolve([]);
    await worker.done;
  });

  it('reads the next batch while a full one is handled, and not after a short one', async () => {
    const held = gate();
    const { source, worker } = build(() => held.promise, { batchSize: 2 });
    await turns();
    source.lastRead().resolve([event(1), event(2)]);
    await turns();
    // Full batch: the read ahead is out before the handler finished.
    expect(source.reads.map((r) => r.after)).toEqual([0, 2]);
    source.lastRead().resolve([event(3)]);
    held.open();
    await turns();
    // 3 was short: nothing more is read until it is done and committed.
    expect(source.committed()).toEqual([
      [2, []],
      [3, []],
    ]);
    expect(source.reads.map((r) => r.after)).toEqual([0, 2, 3]);
    worker.stop(0);
    source.lastRead().resolve([]);
    await worker.done;
  });

  it('does not read ahead once stopping, and lets the commit in flight land before an idle wait of pollMs', async () => {
    const commit = gate<SettleResult[]>();
    const { source, worker } = build(() => undefined, { batchSize: 1 });
    source.commitAnswer = () => commit.promise;
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    expect(source.reads.map((r) => r.after)).toEqual([0, 1]);
    source.lastRead().resolve([]);
    await turns();
    // Nothing new and the commit of 1 still out: no idle timer yet.
    expect(source.timers.pendingDelays()).toEqual([]);
    commit.open([{ ok: true }]);
    await turns();
    expect(source.timers.pendingDelays()).toEqual([POLL_MS]);
    source.timers.advance(POLL_MS);
    await turns();
    expect(source.reads.map((r) => r.after)).toEqual([0, 1, 1]);
    worker.stop(10);
    source.lastRead().resolve([event(2)]);
    await worker.done;
    // Stopping: the batch read before the stop is still handled and committed, nothing after it is read.
    expect(source.committed().map(([upTo]) => upTo)).toEqual([1, 2]);
    expect(source.reads).toHaveLength(3);
  });

  it('ends an idle wait at once when stopped', async () => {
    const { source, worker } = build(() => undefined);
    await turns();
    source.lastRead().resolve([]);
    await turns();
    expect(source.timers.pendingDelays()).toEqual([POLL_MS]);
    worker.stop(1000);
    expect(await isSettled(worker.done)).toBe(true);
    expect(source.reads).toHaveLength(1);
  });

  it('retries a failed read with growing backoff from the same position, and reports each failure', async () => {
    const { source, worker, reports } = build(() => undefined);
    await turns();
    source.lastRead().reject(unavailable());
    await turns();
    const [first] = source.timers.pendingDelays();
    expect(first).toBeGreaterThanOrEqual(8);
    expect(first).toBeLessThanOrEqual(10);
    source.timers.advance(first!);
    await turns();
    source.lastRead().reject(unavailable());
    await turns();
    const [second] = source.timers.pendingDelays();
    expect(second).toBeGreaterThanOrEqual(16);
    expect(second).toBeLessThanOrEqual(20);
    source.timers.advance(second!);
    await turns();
    expect(source.reads.map((r) => r.after)).toEqual([0, 0, 0]);
    expect(reports.errors).toEqual([
      ['read', 'backend_unavailable'],
      ['read', 'backend_unavailable'],
    ]);
    // A good read resets the count: the next failure waits the first delay again.
    source.lastRead().resolve([]);
    await turns();
    source.timers.advance(POLL_MS);
    await turns();
    source.lastRead().reject(unavailable());
    await turns();
    expect(source.timers.pendingDelays()[0]).toBeLessThanOrEqual(10);
    worker.stop(0);
    await worker.done;
  });

  it.each([
    ['stale_generation', stale()],
    ['closed', new RheoError('closed', 'rheo is closed')],
  ])('a read answered %s fences the worker and ends it without a commit', async (_code, error) => {
    const { source, worker, reports } = build(() => undefined);
    await turns();
    source.lastRead().reject(error);
    await worker.done;
    expect(worker.fenced).toBe(true);
    expect(reports.errors).toEqual([]);
    expect(source.commits).toEqual([]);
    expect(source.reads).toHaveLength(1);
  });

  it('retries a failed or throwing commit with backoff until it lands', async () => {
    const answers: Array<() => Promise<SettleResult[]>> = [
      () => Promise.resolve([{ ok: false, error: unavailable() }]),
      () => Promise.reject(new RheoError('ambiguous', 'reply lost')),
      () => Promise.resolve([{ ok: true }]),
    ];
    const { source, worker, reports } = build(() => ({ reject: 'bad' }), { batchSize: 1 });
    source.commitAnswer = () => answers.shift()!();
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    expect(reports.errors).toEqual([['commit', 'backend_unavailable']]);
    expect(worker.position).toBe(0);
    const [first] = source.timers.pendingDelays();
    expect(first).toBeLessThanOrEqual(10);
    source.timers.advance(first!);
    await turns();
    expect(reports.errors).toEqual([
      ['commit', 'backend_unavailable'],
      ['commit', 'ambiguous'],
    ]);
    const [second] = source.timers.pendingDelays();
    expect(second).toBeGreaterThanOrEqual(16);
    source.timers.advance(second!);
    await turns();
    // The same commit each time, dead letter included; counted once, when it landed.
    expect(source.committed()).toEqual([
      [1, [1]],
      [1, [1]],
      [1, [1]],
    ]);
    expect(worker.position).toBe(1);
    expect(reports.log).toEqual(['handled', 'committed', 'dead 1']);
    worker.stop(0);
    source.lastRead().resolve([]);
    await worker.done;
  });

  it.each([
    ['answered', () => Promise.resolve([{ ok: false as const, error: stale() }])],
    ['thrown', () => Promise.reject(stale())],
  ])('a commit %s stale_generation fences the worker: no retry, no further batch', async (_how, answer) => {
    const { source, worker, reports } = build(() => undefined, { batchSize: 1 });
    source.commitAnswer = answer;
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    // The read ahead answers after the fence: its batch is never run.
    source.lastRead().resolve([event(2)]);
    await worker.done;
    expect(worker.fenced).toBe(true);
    expect(source.commits).toHaveLength(1);
    expect(reports.count('handled')).toBe(1);
    expect(reports.errors).toEqual([]);
    expect(worker.position).toBe(0);
  });

  /** A worker whose every commit fails, stopped with no grace after `before` failed tries; how many tries it made in all. */
  async function triesWhenAbortedAfter(before: number): Promise<number> {
    const { source, worker, reports } = build(() => undefined, { batchSize: 2 });
    source.commitAnswer = () => Promise.resolve([{ ok: false, error: unavailable() }]);
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    for (let i = 1; i < before; i++) {
      source.timers.advance(source.timers.pendingDelays()[0]!);
      await turns();
    }
    expect(source.commits).toHaveLength(before);
    worker.stop(0); // aborts: the grace is over
    for (const read of source.reads) read.resolve([]);
    for (let i = 0; i < 10 && !(await isSettled(worker.done)); i++) source.timers.advance(source.timers.pendingDelays()[0] ?? 0);
    await worker.done;
    expect(worker.position).toBe(0);
    expect(reports.errors.every(([kind]) => kind === 'commit')).toBe(true);
    return source.commits.length;
  }

  it('a failing commit is retried for as long as the worker is not aborted; once aborted, three tries in all are its last', async () => {
    // Not aborted, it keeps trying (five tries here); aborted, the next failure is past three: it gives up.
    expect(await triesWhenAbortedAfter(5)).toBe(6);
    // Aborted after the first failure: the second and third try still go out.
    expect(await triesWhenAbortedAfter(1)).toBe(3);
  });

  it('stop(grace) lets running handlers finish within the grace (a longer second grace does not extend it), then commits what finished', async () => {
    const held = gate();
    let signal: AbortSignal | null = null;
    const { source, worker } = build(
      async (_e, context) => {
        signal = context.signal;
        await held.promise;
      },
      { batchSize: 1 },
    );
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    worker.stop(500);
    worker.stop(1000); // again, later: the first deadline stands
    source.timers.advance(499);
    expect(signal!.aborted).toBe(false);
    held.open();
    source.lastRead().resolve([]);
    await worker.done;
    expect(source.committed()).toEqual([[1, []]]);
    expect(source.timers.pendingDelays()).toEqual([]);
  });

  it('past the grace, running handlers are aborted with an AbortError naming the partition; nothing after them commits', async () => {
    let signal: AbortSignal | null = null;
    const seen: number[] = [];
    const { source, worker, reports } = build(
      (e, context) => {
        seen.push(e.sequence);
        if (e.sequence === 1) return 'ack' as const;
        signal = context.signal;
        return new Promise<never>(() => {});
      },
      { batchSize: 3 },
      { partition: 3 },
    );
    await turns();
    source.lastRead().resolve([event(1), event(2), event(3)]);
    await turns();
    worker.stop(100);
    source.timers.advance(100);
    await worker.done;
    expect(signal!.aborted).toBe(true);
    expect(signal!.reason).toBeInstanceOf(Error);
    expect((signal!.reason as Error).name).toBe('AbortError');
    expect((signal!.reason as Error).message).toBe('partition 3 is being handed over: stop work on it');
    // 2 was aborted, so 3 never ran; only 1 commits.
    expect(seen).toEqual([1, 2]);
    expect(source.committed()).toEqual([[1, []]]);
    expect(reports.count('handled')).toBe(2);
    expect(worker.fenced).toBe(false);
  });

  it('a second stop with a shorter grace cuts the first short, and stop(0) aborts at once', async () => {
    for (const second of [100, 0]) {
      const { source, worker, signal } = hanging();
      await turns();
      source.lastRead().resolve([event(1)]);
      await turns();
      worker.stop(15_000); // revoked: half the rebalance timeout
      worker.stop(second); // then the consumer stops with a shorter timeout
      source.timers.advance(second);
      expect(signal().aborted).toBe(true);
      await worker.done;
      expect(source.commits).toEqual([]);
    }
  });

  it('lose() aborts at once, fences, and commits nothing', async () => {
    const { source, worker, signal } = hanging();
    await turns();
    source.lastRead().resolve([event(1), event(2)]);
    await turns();
    worker.lose();
    await worker.done;
    expect(worker.fenced).toBe(true);
    expect(signal().aborted).toBe(true);
    expect(source.commits).toEqual([]);
  });

  it('lose() during a graceful stop ends the grace: the running handler is aborted now, not when the grace runs out', async () => {
    const { source, worker, signal } = hanging();
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    worker.stop(15_000); // revoked: half the rebalance timeout to finish
    expect(signal().aborted).toBe(false);
    worker.lose(); // the next heartbeat shows it moved on
    expect(signal().aborted).toBe(true);
    await worker.done;
    expect(source.commits).toEqual([]);
  });

  it("orderBy 'key': an aborted event stops only its own key's chain; events without a key do not chain", async () => {
    const started: number[] = [];
    const holds = new Map<number, { open(): void }>();
    const { source, worker } = build(
      (e) => {
        started.push(e.sequence);
        if (e.sequence === 2) return new Promise<never>(() => {});
        const held = gate();
        holds.set(e.sequence, held);
        return held.promise.then(() => 'ack' as const);
      },
      { orderBy: 'key', batchSize: 6, concurrency: 10 },
    );
    await turns();
    source.lastRead().resolve([event(1, 'a'), event(2, 'b'), event(3, null), event(4, 'b'), event(5, null), event(6, 'a')]);
    await turns();
    // Heads of a, b and both unkeyed events run at once.
    expect(started.sort((x, y) => x - y)).toEqual([1, 2, 3, 5]);
    holds.get(1)!.open();
    await turns();
    expect(started).toContain(6);
    for (const s of [3, 5, 6]) holds.get(s)!.open();
    await turns();
    worker.stop(0); // aborts 2; 4 (key b) never runs
    source.lastRead().resolve([]);
    await worker.done;
    expect(started).not.toContain(4);
    expect(source.committed()).toEqual([[1, []]]);
  });

  it('a reject dead-letters at once with its attempt and reason; a retry uses its own delay, else the backoff', async () => {
    const attempts = new Map<number, number>();
    const { source, worker, reports } = build(
      (e, context) => {
        attempts.set(e.sequence, context.attempt);
        if (e.sequence === 1) return context.attempt === 1 ? { retry: 'later', delayMs: 250 } : 'ack';
        if (e.sequence === 2) return context.attempt === 1 ? { retry: 'soon' } : { reject: 'poison' };
        return 'ack';
      },
      { batchSize: 2 },
    );
    await turns();
    source.lastRead().resolve([event(1), event(2)]);
    await turns();
    expect(source.timers.pendingDelays()).toEqual([250]);
    source.timers.advance(250);
    await turns();
    const [backoff] = source.timers.pendingDelays();
    expect(backoff).toBeGreaterThanOrEqual(8);
    expect(backoff).toBeLessThanOrEqual(10);
    source.timers.advance(backoff!);
    await turns();
    expect(source.commits[0]).toEqual([expect.objectContaining({ upTo: 2, deadLetters: [{ sequence: 2, attempt: 2, reason: 'poison' }] })]);
    expect(reports.log).toEqual(['handled', 'retried', 'handled', 'handled', 'retried', 'handled', 'committed', 'dead 1']);
    worker.stop(0);
    source.lastRead().resolve([]);
    await worker.done;
  });

  it("dead-letters at maxAttempts with the last failure's reason; onFailure 'block' never does", async () => {
    const failing: PartitionHandler<{ n: number }> = () => {
      throw new Error('boom');
    };
    const run = async (options: Partial<PartitionConsumeOptions<{ n: number }>>, maxAttempts: number, advances: number) => {
      const built = build(failing, { batchSize: 1, ...options }, { maxAttempts });
      await turns();
      built.source.lastRead().resolve([event(1)]);
      await turns();
      for (let i = 0; i < advances; i++) {
        const [next] = built.source.timers.pendingDelays();
        if (next === undefined) break;
        built.source.timers.advance(next);
        await turns();
      }
      return built;
    };
    const dead = await run({}, 2, 5);
    expect(dead.source.commits[0]).toEqual([expect.objectContaining({ upTo: 1, deadLetters: [{ sequence: 1, attempt: 2, reason: 'handler threw: boom' }] })]);
    expect(dead.reports.count('handled')).toBe(2);
    dead.worker.stop(0);
    dead.source.lastRead().resolve([]);
    await dead.worker.done;

    const blocked = await run({ onFailure: 'block' }, 2, 6);
    expect(blocked.source.commits).toEqual([]);
    expect(blocked.reports.count('handled')).toBe(7);
    blocked.worker.stop(0);
    await blocked.worker.done;
    expect(blocked.source.commits).toEqual([]);
  });

  it('an async handler that rejects is a failure like a throw', async () => {
    const { source, worker } = build(() => Promise.reject(new Error('async boom')), { batchSize: 1 }, { maxAttempts: 1 });
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    expect(source.commits[0]).toEqual([expect.objectContaining({ deadLetters: [{ sequence: 1, attempt: 1, reason: 'handler threw: async boom' }] })]);
    worker.stop(0);
    source.lastRead().resolve([]);
    await worker.done;
  });

  it('handlerTimeoutMs aborts the signal with a TimeoutError, counts a failure, and its timer keeps no process alive', async () => {
    let signal: AbortSignal | null = null;
    let fail!: (error: Error) => void;
    const { source, worker } = build(
      (_e, context) => {
        signal = context.signal;
        return new Promise<never>((_resolve, reject) => (fail = reject));
      },
      { batchSize: 1, handlerTimeoutMs: 40 },
      { maxAttempts: 1 },
    );
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    expect(source.timers.pendingDelays({ keepAlive: false })).toEqual([40]);
    expect(source.timers.pendingDelays({ keepAlive: true })).toEqual([]);
    source.timers.advance(40);
    await turns();
    expect((signal!.reason as Error).name).toBe('TimeoutError');
    expect(source.commits[0]).toEqual([expect.objectContaining({ deadLetters: [{ sequence: 1, attempt: 1, reason: 'handler timed out after 40 ms' }] })]);
    // The handler gives up late, as its signal asked: that answer is ignored, and nothing throws.
    fail(new Error('aborted late'));
    await turns();
    expect(source.commits).toHaveLength(1);
    worker.stop(0);
    source.lastRead().resolve([]);
    await worker.done;
  });

  it('a handler that finishes before its timeout cancels the timer', async () => {
    const { source, worker } = build(() => Promise.resolve('ack' as const), { batchSize: 1, handlerTimeoutMs: 40 });
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    expect(source.committed()).toEqual([[1, []]]);
    source.lastRead().resolve([]);
    await turns();
    // Only the idle wait is left.
    expect(source.timers.pendingDelays()).toEqual([POLL_MS]);
    worker.stop(0);
    await worker.done;
  });

  it("a handler's signal is made on first read, once, and is already aborted for a run that starts after the abort", async () => {
    const signals: AbortSignal[] = [];
    const { source, worker } = build(
      (_e, context) => {
        signals.push(context.signal, context.signal);
        return 'ack' as const;
      },
      { batchSize: 1 },
    );
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    expect(signals[0]).toBe(signals[1]);
    expect(signals[0]!.aborted).toBe(false);
    worker.stop(0);
    source.lastRead().resolve([]);
    await worker.done;
  });

  it('a handler that returns a promise after the worker aborted is settled at once as aborted', async () => {
    let reason: unknown = null;
    const { source, worker, reports } = build(
      (_e, context) => {
        // Aborts while this very call runs: its promise is ignored.
        worker.stop(0);
        reason = context.signal.reason;
        return new Promise<never>(() => {});
      },
      { batchSize: 1 },
    );
    await turns();
    source.lastRead().resolve([event(1)]);
    await worker.done;
    expect((reason as Error).name).toBe('AbortError');
    expect(source.commits).toEqual([]);
    expect(reports.count('handled')).toBe(1);
  });

  it("a consumer's transactional outcome returned by a plain handler: committed ack is done, committed reject is dead, uncommitted retries", async () => {
    const { source, worker, reports } = build(
      (e, context) => {
        if (e.sequence === 1) return new SettledInTransaction({ kind: 'committed', settle: 'ack', reason: null }) as never;
        if (e.sequence === 2) return new SettledInTransaction({ kind: 'committed', settle: 'reject', reason: null }) as never;
        if (context.attempt === 1) return new SettledInTransaction({ kind: 'uncommitted', error: unavailable() }) as never;
        return new SettledInTransaction({ kind: 'uncommitted', error: new RheoError('internal', 'gave up') }) as never;
      },
      { batchSize: 3 },
      { maxAttempts: 2 },
    );
    await turns();
    source.lastRead().resolve([event(1), event(2), event(3)]);
    await turns();
    source.timers.advance(source.timers.pendingDelays()[0]!);
    await turns();
    expect(source.commits[0]).toEqual([
      expect.objectContaining({
        upTo: 3,
        deadLetters: [
          { sequence: 2, attempt: 1, reason: 'rejected' },
          { sequence: 3, attempt: 2, reason: 'gave up' },
        ],
      }),
    ]);
    expect(reports.count('retried')).toBe(1);
    worker.stop(0);
    source.lastRead().resolve([]);
    await worker.done;
  });

  it('an uncommitted outcome that says stale_generation fences the worker', async () => {
    const { source, worker } = build(() => new SettledInTransaction({ kind: 'uncommitted', error: stale() }) as never, { batchSize: 1 });
    await turns();
    source.lastRead().resolve([event(1)]);
    await worker.done;
    expect(worker.fenced).toBe(true);
    expect(source.commits).toEqual([]);
  });

  it('a batch finished while the commit before it was out is not committed once that commit comes back stale', async () => {
    const first = gate<SettleResult[]>();
    const { source, worker, reports } = build(() => undefined, { batchSize: 1 });
    source.commitAnswer = () => first.promise;
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    // 1 is committing; 2 (read ahead) is handled meanwhile and waits for that commit.
    source.lastRead().resolve([event(2)]);
    await turns();
    expect(reports.count('handled')).toBe(2);
    first.open([{ ok: false, error: stale() }]);
    await worker.done;
    expect(source.commits).toHaveLength(1);
    expect(worker.fenced).toBe(true);
  });

  it('a worker fenced part-way through a short batch ends without reading again', async () => {
    const { source, worker } = build(
      (e) => (e.sequence === 2 ? (new SettledInTransaction({ kind: 'uncommitted', error: stale() }) as never) : undefined),
      { batchSize: 5 },
    );
    await turns();
    source.lastRead().resolve([event(1), event(2), event(3)]);
    expect(await isSettled(worker.done)).toBe(true);
    expect(source.reads).toHaveLength(1);
    expect(source.commits).toEqual([]); // fenced: not even the finished 1
  });

  it('done waits for the commit in flight when the worker stops, also for the finished part of a batch cut short', async () => {
    const commit = gate<SettleResult[]>();
    const { source, worker } = build(() => undefined, { batchSize: 5 });
    source.commitAnswer = () => commit.promise;
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    worker.stop(0);
    for (const read of source.reads) read.resolve([]);
    expect(await isSettled(worker.done)).toBe(false);
    commit.open([{ ok: true }]);
    await worker.done;
    expect(worker.position).toBe(1);

    const prefix = gate<SettleResult[]>();
    const cut = build((e) => (e.sequence === 1 ? undefined : new Promise<never>(() => {})), { batchSize: 2 });
    cut.source.commitAnswer = () => prefix.promise;
    await turns();
    cut.source.lastRead().resolve([event(1), event(2)]);
    await turns();
    cut.worker.stop(100);
    cut.source.timers.advance(100); // 2 is aborted: 1 is committed on the way out
    await turns();
    expect(cut.source.committed()).toEqual([[1, []]]);
    expect(await isSettled(cut.worker.done)).toBe(false);
    prefix.open([{ ok: true }]);
    await cut.worker.done;
    expect(cut.worker.position).toBe(1);
  });

  it("onFailure 'block' retries an uncommitted transactional outcome forever too", async () => {
    const { source, worker, reports } = build(() => new SettledInTransaction({ kind: 'uncommitted', error: unavailable() }) as never, {
      batchSize: 1,
      onFailure: 'block',
    }, { maxAttempts: 1 });
    await turns();
    source.lastRead().resolve([event(1)]);
    await turns();
    for (let i = 0; i < 4; i++) {
      source.timers.advance(source.timers.pendingDelays()[0]!);
      await turns();
    }
    expect(reports.count('handled')).toBe(5);
    expect(reports.count('retried')).toBe(5);
    expect(source.commits).toEqual([]);
    worker.stop(0);
    await worker.done;
    expect(source.commits).toEqual([]);
  });

  it('workers share the slots: with concurrency 1 a second partition waits for the first handler', async () => {
    const source = new ScriptedOwned();
    const slots = new Slots(1);
    const held = gate();
    const started: number[] = [];
    const handler: PartitionHandler<{ n: number }> = async (e) => {
      started.push(e.partition);
      if (e.partition === 0) await held.promise;
    };
    const a = build(handler, { batchSize: 1, concurrency: 1 }, { source, slots, partition: 0 });
    const b = build(handler, { batchSize: 1, concurrency: 1 }, { source, slots, partition: 1 });
    await turns();
    source.reads[0]!.resolve([event(1)]);
    source.reads[1]!.resolve([{ ...event(1), partition: 1 }]);
    await turns();
    expect(started).toEqual([0]);
    held.open();
    await turns();
    expect(started).toEqual([0, 1]);
    for (const w of [a.worker, b.worker]) w.stop(0);
    for (const read of source.reads.slice(2)) read.resolve([]);
    await Promise.all([a.worker.done, b.worker.done]);
  });

  it('lose() after a graceful stop aborts at once: an event waiting for a slot never runs', async () => {
    const source = new ScriptedOwned();
    const slots = new Slots(1);
    const started: number[] = [];
    const a = build(
      (e) => {
        started.push(e.partition);
        return new Promise<never>(() => {});
      },
      { batchSize: 1, concurrency: 1 },
      { source, slots, partition: 0 },
    );
    const b = build(
      (e) => void started.push(e.partition),
      { batchSize: 1, concurrency: 1 },
      { source, slots, partition: 1 },
    );
    await turns();
    source.reads[0]!.resolve([event(1)]);
    await turns();
    source.reads[1]!.resolve([{ ...event(1), partition: 1 }]);
    await turns();
    b.worker.stop(1000); // b waits for the slot: stopping, with a grace
    b.worker.lose(); // lost meanwhile: aborted at once, so it must not run its event when a frees the slot
    a.worker.stop(0);
    await Promise.all([a.worker.done, b.worker.done]);
    expect(started).toEqual([0]);
    expect(slots.tryTake()).toBe(true);
  });
});
