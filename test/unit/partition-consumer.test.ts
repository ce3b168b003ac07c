import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { Backend, MemberView } from '../../src/core/backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { RheoError } from '../../src/core/errors.js';
import type { CommitInput, HeartbeatOptions, OwnershipFenceInput } from '../../src/core/ownership-arguments.js';
import type { GroupInfo, ReadOptions, RheoEvent, SettleResult } from '../../src/core/types.js';
import { PartitionConsumer, type OwnershipErrorEvent } from '../../src/consumer/partition-consumer.js';
import type { PartitionConsumeOptions, PartitionSource } from '../../src/consumer/partition-options.js';
import type { RebalanceEvent } from '../../src/observability/lease-events.js';
import { thrown } from '../support/thrown.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { turns, isSettled } from '../support/turns.js';

/*
 * PartitionConsumer against a scripted ownership source: heartbeats answer
 * the views the test queues (or fail as it says), reads of owned partitions
 * wait for the test, and time is a ManualTimers. This drives joins,
 * rebalances, hand-overs, losses, heartbeat backoff and every ownership
 * error path one step at a time; test/consumer/partitions.test.ts runs the
 * consumer end to end on every backend.
 */

const HEARTBEAT_MS = 1_000;
const REBALANCE_MS = 4_000;

interface PendingRead {
  fence: OwnershipFenceInput;
  after: number;
  resolve(events: RheoEvent[]): void;
  reject(error: unknown): void;
}

type Answer<T> = T | Error | (() => Promise<T>);

class ScriptedOwnership {
  readonly clock = new ManualClock(1_000_000);
  readonly timers = new ManualTimers(this.clock);
  readonly defaults = { pollMs: 50 };
  readonly backend = { name: 'scripted', capabilities: { notifications: false, transactions: false } } as unknown as Backend;
  readonly heartbeats: HeartbeatOptions[] = [];
  readonly views: Array<Answer<MemberView>> = [];
  readonly releases: OwnershipFenceInput[] = [];
  releaseAnswer: Answer<SettleResult[]> = [{ ok: true }];
  leaveAnswer: Answer<void> = undefined;
  readonly leaves: string[] = [];
  groupInfos = 0;
  readonly reads: PendingRead[] = [];
  readonly commits: CommitInput[] = [];

  heartbeat(_stream: string, _group: string, options: HeartbeatOptions): Promise<MemberView> {
    this.heartbeats.push(options);
    const next = this.views.shift();
    if (next === undefined) return Promise.reject(new Error('the test queued no heartbeat answer'));
    return answer(next);
  }

  leaveGroup(_stream: string, _group: string, memberId: string): Promise<void> {
    this.leaves.push(memberId);
    return answer(this.leaveAnswer);
  }

  releasePartitions(fences: OwnershipFenceInput[]): Promise<SettleResult[]> {
    this.releases.push(...fences);
    return answer(this.releaseAnswer);
  }

  readOwned<U>(fence: OwnershipFenceInput, options: ReadOptions = {}): Promise<RheoEvent<U>[]> {
    return new Promise((resolve, reject) =>
      this.reads.push({ fence, after: options.after ?? 0, resolve: resolve as (events: RheoEvent[]) => void, reject }),
    );
  }

  commit(ops: CommitInput[]): Promise<SettleResult[]> {
    this.commits.push(...ops);
    return Promise.resolve(ops.map(() => ({ ok: true as const })));
  }

  groupInfo(): Promise<GroupInfo> {
    this.groupInfos++;
    return Promise.resolve({ maxAttempts: 4 } as GroupInfo);
  }

  members(): Promise<never> {
    return Promise.reject(new Error('not used'));
  }

  /** Queues a heartbeat answer: owned partitions as [partition, generation], and the revoking ones. */
  view(owned: Array<[number, number]>, revoking: number[] = [], groupGeneration = 1): this {
    this.views.push({
      memberId: 'm',
      groupGeneration,
      owned: owned.map(([partition, generation]) => ({ partition, generation, frontier: 0 })),
      revoking,
      expiresAt: new Date(this.clock.now() + 10_000),
    } as MemberView);
    return this;
  }

  /** The waiting reads of one partition. */
  readsOf(partition: number): PendingRead[] {
    return this.reads.filter((r) => r.fence.partition === partition);
  }

  consumer(options: Partial<PartitionConsumeOptions> = {}): Recorded {
    const consumer = new PartitionConsumer(this as unknown as PartitionSource, {
      stream: 's',
      group: 'g',
      assignment: 'partitions',
      handler: () => undefined,
      memberId: 'm',
      heartbeatMs: HEARTBEAT_MS,
      sessionMs: 9_000,
      rebalanceTimeoutMs: REBALANCE_MS,
      timers: this.timers,
      ...options,
    });
    return record(consumer);
  }
}

function answer<T>(value: Answer<T>): Promise<T> {
  if (value instanceof Error) return Promise.reject(value);
  if (typeof value === 'function') return (value as () => Promise<T>)();
  return Promise.resolve(value);
}

interface Recorded {
  consumer: PartitionConsumer;
  events: string[];
  rebalances: RebalanceEvent[];
  errors: Array<Pick<OwnershipErrorEvent, 'op' | 'partition'> & { code: string }>;
  drains: Array<{ aborted: number; timedOut: boolean }>;
}

function record(consumer: PartitionConsumer): Recorded {
  const r: Recorded = { consumer, events: [], rebalances: [], errors: [], drains: [] };
  consumer.on('member-join', (e) => r.events.push(`join ${e.memberId}`));
  consumer.on('member-leave', (e) => r.events.push(`leave ${e.memberId}`));
  consumer.on('rebalance', (e) => r.rebalances.push(e));
  consumer.on('ownership-error', (e) => r.errors.push({ op: e.op, partition: e.partition, code: e.error.code }));
  consumer.on('drain', (e) => r.drains.push({ aborted: e.aborted, timedOut: e.timedOut }));
  return r;
}

/** Event `sequence` of `partition`. */
function event(partition: number, sequence: number): RheoEvent {
  return { id: `e${partition}-${sequence}`, stream: 's', partition, sequence, type: 't', key: null, payload: null, metadata: {}, timestamp: new Date(0) };
}

/** Fires the next heartbeat (due now or after `ms`) and lets it land. */
async function beat(source: ScriptedOwnership, ms = HEARTBEAT_MS): Promise<void> {
  source.timers.advance(ms);
  await turns();
}

const unavailable = (): RheoError => new RheoError('backend_unavailable', 'connection lost');

describe('PartitionConsumer', () => {
  it('joins on its first heartbeat, starts a worker per owned partition, and beats every heartbeatMs', async () => {
    const source = new ScriptedOwnership().view([[2, 5], [0, 3]]);
    const r = source.consumer();
    expect(r.consumer.state).toBe('running');
    await beat(source, 0);
    expect(source.groupInfos).toBe(1);
    expect(source.heartbeats).toEqual([{ memberId: 'm', sessionMs: 9_000, rebalanceTimeoutMs: REBALANCE_MS }]);
    expect(r.events).toEqual(['join m']);
    expect(r.rebalances).toEqual([
      {
        stream: 's',
        group: 'g',
        memberId: 'm',
        groupGeneration: 1,
        assigned: [
          { partition: 2, generation: 5 },
          { partition: 0, generation: 3 },
        ],
        revoked: [],
        lost: [],
        owned: [2, 0],
      },
    ]);
    expect(r.consumer.stats()).toMatchObject({ state: 'running', owned: [0, 2], revoking: [], groupGeneration: 1 });
    expect(source.reads.map((read) => [read.fence.partition, read.fence.generation, read.after])).toEqual([
      [2, 5, 0],
      [0, 3, 0],
    ]);
    // The same view again: no rebalance, no second join, no second groupInfo.
    source.view([[2, 5], [0, 3]], [], 1);
    await beat(source, HEARTBEAT_MS - 1);
    expect(source.heartbeats).toHaveLength(1);
    await beat(source, 1);
    expect(source.heartbeats).toHaveLength(2);
    expect(r.events).toEqual(['join m']);
    expect(r.rebalances).toHaveLength(1);
    expect(source.groupInfos).toBe(1);
    for (const read of source.reads) read.resolve([]);
    await r.consumer.stop();
  });

  it("takes maxAttempts from the options when given, without asking the group", async () => {
    const source = new ScriptedOwnership().view([[0, 1]]);
    const r = source.consumer({ maxAttempts: 2 });
    await beat(source, 0);
    expect(source.groupInfos).toBe(0);
    source.reads[0]!.resolve([]);
    await r.consumer.stop();
  });

  it('a failed heartbeat is reported and retried with backoff capped at heartbeatMs; a good one resets the backoff', async () => {
    const source = new ScriptedOwnership();
    source.views.push(unavailable(), unavailable(), unavailable(), unavailable(), unavailable());
    source.view([[0, 1]]);
    source.views.push(unavailable());
    const r = source.consumer({ heartbeatMs: 300 });
    await beat(source, 0);
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      const [next] = source.timers.pendingDelays({ keepAlive: true });
      delays.push(next!);
      await beat(source, next!);
    }
    // 100, 200, then capped at heartbeatMs (300), with up to 20 % jitter off.
    expect(delays[0]).toBeGreaterThanOrEqual(80);
    expect(delays[0]).toBeLessThanOrEqual(100);
    expect(delays[1]).toBeGreaterThanOrEqual(160);
    expect(delays[1]).toBeLessThanOrEqual(200);
    expect(delays[2]).toBeGreaterThanOrEqual(240);
    expect(delays[3]).toBeLessThanOrEqual(300);
    expect(delays[4]).toBeLessThanOrEqual(300);
    // The sixth heartbeat landed: the usual period again.
    expect(source.timers.pendingDelays({ keepAlive: true })).toEqual([300]);
    expect(r.errors).toEqual(Array.from({ length: 5 }, () => ({ op: 'heartbeat', partition: null, code: 'backend_unavailable' })));
    expect(r.events).toEqual(['join m']);
    // The next failure starts from the first delay again.
    await beat(source, 300);
    expect(source.timers.pendingDelays({ keepAlive: true }).filter((d) => d <= 100)).toHaveLength(1);
    expect(r.consumer.stats().errors).toBe(6);
    for (const read of source.reads) read.resolve([]);
    await r.consumer.stop();
  });

  it("a heartbeat answered 'closed' stops the consumer without waiting for handlers; it had never joined, so it does not leave", async () => {
    const source = new ScriptedOwnership();
    source.views.push(new RheoError('closed', 'rheo is closed'));
    const r = source.consumer();
    await beat(source, 0);
    await r.consumer.done;
    expect(r.consumer.state).toBe('stopped');
    expect(r.errors).toEqual([{ op: 'heartbeat', partition: null, code: 'closed' }]);
    expect(source.leaves).toEqual([]);
    expect(r.events).toEqual([]);
    expect(source.timers.pendingDelays()).toEqual([]);
  });

  it('a revoked partition finishes, commits, and is released with its generation; stats show it revoking meanwhile', async () => {
    let finish!: () => void;
    const held = new Promise<void>((resolve) => (finish = resolve));
    const source = new ScriptedOwnership().view([[0, 1], [1, 4]]);
    const r = source.consumer({ handler: (e) => (e.partition === 1 ? held : undefined) });
    await beat(source, 0);
    source.readsOf(1)[0]!.resolve([event(1, 1)]);
    await turns();
    source.view([[0, 1], [1, 4]], [1], 2);
    await beat(source);
    expect(r.rebalances.at(-1)).toMatchObject({ groupGeneration: 2, assigned: [], revoked: [1], lost: [], owned: [0, 1] });
    expect(r.consumer.stats()).toMatchObject({ owned: [0, 1], revoking: [1], groupGeneration: 2 });
    // Half the rebalance timeout is the handler's grace: a timer that keeps no process alive.
    expect(source.timers.pendingDelays({ keepAlive: false })).toContain(REBALANCE_MS / 2);
    // Still revoking on the next view: not stopped twice, no second rebalance event.
    source.view([[0, 1], [1, 4]], [1], 2);
    await beat(source);
    expect(r.rebalances).toHaveLength(2);
    finish();
    await turns();
    expect(source.commits).toEqual([expect.objectContaining({ partition: 1, generation: 4, upTo: 1 })]);
    expect(source.releases).toEqual([{ stream: 's', group: 'g', partition: 1, memberId: 'm', generation: 4 }]);
    expect(r.consumer.stats()).toMatchObject({ owned: [0], revoking: [] });
    expect(r.errors).toEqual([]);
    for (const read of source.reads) read.resolve([]);
    await r.consumer.stop();
  });

  it('a partition granted and revoked before it started is released untouched: no worker, no read', async () => {
    const source = new ScriptedOwnership().view([[0, 1], [3, 9]], [3]);
    const r = source.consumer();
    await beat(source, 0);
    expect(source.releases).toEqual([{ stream: 's', group: 'g', partition: 3, memberId: 'm', generation: 9 }]);
    expect(source.readsOf(3)).toEqual([]);
    expect(r.rebalances[0]).toMatchObject({ assigned: [{ partition: 0, generation: 1 }], revoked: [], owned: [0, 3] });
    expect(r.consumer.stats().owned).toEqual([0]);
    for (const read of source.reads) read.resolve([]);
    await r.consumer.stop();
  });

  it('a release that fails is reported; one answered stale_generation (it moved already) is not', async () => {
    const source = new ScriptedOwnership().view([
      [1, 1],
      [2, 1],
      [3, 1],
    ], [1, 2, 3]);
    const answers: Array<Answer<SettleResult[]>> = [
      [{ ok: false, error: new RheoError('stale_generation', 'moved') }],
      [{ ok: false, error: unavailable() }],
      new RheoError('ambiguous', 'reply lost'),
    ];
    source.releaseAnswer = () => answer(answers.shift()!);
    const r = source.consumer();
    await beat(source, 0);
    expect(source.releases.map((f) => f.partition)).toEqual([1, 2, 3]);
    expect(r.errors).toEqual([
      { op: 'release', partition: 2, code: 'backend_unavailable' },
      { op: 'release', partition: 3, code: 'ambiguous' },
    ]);
    expect(r.consumer.stats().errors).toBe(2);
    await r.consumer.stop();
  });

  it('a partition that moved on without our release (new generation, or gone) is lost: aborted, not committed, counted', async () => {
    const signals: AbortSignal[] = [];
    const source = new ScriptedOwnership().view([[0, 1], [1, 1], [2, 1]]);
    const r = source.consumer({
      handler: (_e, context) => {
        signals.push(context.signal);
        return new Promise<never>(() => {});
      },
    });
    await beat(source, 0);
    for (const p of [0, 1]) {
      source.readsOf(p)[0]!.resolve([event(p, 1)]);
    }
    await turns();
    // 0 was taken and granted back under a new generation; 1 is gone; 2 stays.
    source.view([[0, 2], [2, 1]], [], 3);
    await beat(source);
    expect(signals.map((s) => s.aborted)).toEqual([true, true]);
    expect(r.rebalances.at(-1)).toMatchObject({ groupGeneration: 3, assigned: [{ partition: 0, generation: 2 }], revoked: [], lost: [0, 1], owned: [0, 2] });
    expect(r.consumer.stats()).toMatchObject({ owned: [0, 2], lost: 2 });
    expect(source.readsOf(0).map((read) => read.fence.generation)).toEqual([1, 2]);
    expect(source.commits).toEqual([]);
    for (const read of source.reads) read.resolve([]);
    await r.consumer.stop();
  });

  it('a worker fenced by a stale read or commit is a lost partition: counted in stats().lost and named by a rebalance event', async () => {
    const source = new ScriptedOwnership().view([[0, 1], [1, 1], [2, 1]], [], 4);
    source.commit = (ops) => {
      source.commits.push(...ops);
      return Promise.resolve(ops.map(() => ({ ok: false as const, error: new RheoError('stale_generation', 'moved') })));
    };
    const r = source.consumer();
    await beat(source, 0);
    source.readsOf(0)[0]!.reject(new RheoError('stale_generation', 'moved'));
    source.readsOf(1)[0]!.resolve([event(1, 1)]);
    await turns();
    expect(source.commits.map((c) => c.partition)).toEqual([1]);
    // The refused commit fences the worker; it ends once its read ahead returns.
    source.readsOf(1)[1]!.resolve([]);
    await turns();
    expect(r.consumer.stats()).toMatchObject({ owned: [2], lost: 2 });
    expect(r.rebalances.slice(1)).toEqual([
      { stream: 's', group: 'g', memberId: 'm', groupGeneration: 4, assigned: [], revoked: [], lost: [0], owned: [1, 2] },
      { stream: 's', group: 'g', memberId: 'm', groupGeneration: 4, assigned: [], revoked: [], lost: [1], owned: [2] },
    ]);
    // rheo closing under a worker moves nothing: not a loss.
    source.readsOf(2)[0]!.reject(new RheoError('closed', 'rheo is closed'));
    await turns();
    expect(r.consumer.stats()).toMatchObject({ owned: [], lost: 2 });
    expect(r.rebalances).toHaveLength(3);
    await r.consumer.stop();
  });

  it('a worker fenced by a read is dropped at once, and the partition is started afresh if the next view still grants it', async () => {
    const source = new ScriptedOwnership().view([[0, 1]]);
    const r = source.consumer();
    await beat(source, 0);
    source.readsOf(0)[0]!.reject(new RheoError('stale_generation', 'moved'));
    await turns();
    expect(r.consumer.stats().owned).toEqual([]);
    source.view([[0, 2]], [], 2);
    await beat(source);
    expect(r.consumer.stats().owned).toEqual([0]);
    expect(r.rebalances.at(-1)).toMatchObject({ assigned: [{ partition: 0, generation: 2 }], lost: [] });
    expect(source.readsOf(0).map((read) => read.fence.generation)).toEqual([1, 2]);
    source.readsOf(0)[1]!.resolve([]);
    await r.consumer.stop();
  });

  it('stop() waits for handlers, commits, leaves the group and reports drain; the same promise when called again', async () => {
    let finish!: () => void;
    const held = new Promise<void>((resolve) => (finish = resolve));
    const source = new ScriptedOwnership().view([[0, 1]]);
    const r = source.consumer({ handler: () => held });
    await beat(source, 0);
    source.readsOf(0)[0]!.resolve([event(0, 1)]);
    await turns();
    const stopping = r.consumer.stop({ timeoutMs: 5_000 });
    expect(r.consumer.stop()).toBe(stopping);
    expect(r.consumer.state).toBe('stopping');
    await turns();
    expect(source.leaves).toEqual([]);
    finish();
    await stopping;
    expect(source.commits).toEqual([expect.objectContaining({ partition: 0, upTo: 1 })]);
    expect(source.leaves).toEqual(['m']);
    expect(r.events).toEqual(['join m', 'leave m']);
    expect(r.drains).toEqual([{ aborted: 0, timedOut: false }]);
    expect(r.consumer.state).toBe('stopped');
    expect(r.consumer.stats().owned).toEqual([]);
    // No heartbeat is left scheduled, nor the stop timer.
    expect(source.timers.pendingDelays()).toEqual([]);
  });

  it('stop() past its timeout aborts the handlers and reports how many partitions it cut short', async () => {
    const source = new ScriptedOwnership().view([[0, 1], [1, 1]]);
    const r = source.consumer({ handler: () => new Promise<never>(() => {}), stopTimeoutMs: 700 });
    await beat(source, 0);
    for (const p of [0, 1]) {
      source.readsOf(p)[0]!.resolve([event(p, 1)]);
    }
    await turns();
    const stopping = r.consumer.stop();
    await turns();
    // One timer for the consumer's stop and one grace per worker, all of stopTimeoutMs.
    expect(source.timers.pendingDelays({ keepAlive: false })).toEqual([700, 700, 700]);
    source.timers.advance(700);
    await stopping;
    expect(r.drains).toEqual([{ aborted: 2, timedOut: true }]);
    expect(source.commits).toEqual([]);
  });

  it('stop({ timeoutMs: 0 }) aborts at once and sets no timer', async () => {
    const source = new ScriptedOwnership().view([[0, 1]]);
    const r = source.consumer({ handler: () => new Promise<never>(() => {}) });
    await beat(source, 0);
    source.readsOf(0)[0]!.resolve([event(0, 1)]);
    await turns();
    await r.consumer.stop({ timeoutMs: 0 });
    expect(r.drains).toEqual([{ aborted: 0, timedOut: false }]);
    expect(source.timers.pendingDelays()).toEqual([]);
  });

  it('a failed leave is reported; the consumer still stops', async () => {
    const source = new ScriptedOwnership().view([]);
    source.leaveAnswer = unavailable();
    const r = source.consumer();
    await beat(source, 0);
    await r.consumer.stop();
    expect(r.errors).toEqual([{ op: 'leave', partition: null, code: 'backend_unavailable' }]);
    expect(r.events).toEqual(['join m', 'leave m']);
    expect(r.consumer.state).toBe('stopped');
  });

  it('stop() during a heartbeat waits for it, and applies nothing it answered', async () => {
    let land!: (view: MemberView) => void;
    const source = new ScriptedOwnership();
    source.views.push(() => new Promise<MemberView>((resolve) => (land = resolve)));
    const r = source.consumer();
    await beat(source, 0);
    const stopping = r.consumer.stop();
    await turns();
    expect(r.consumer.state).toBe('stopping');
    land({ memberId: 'm', groupGeneration: 1, owned: [{ partition: 0, generation: 1, frontier: 0 }], revoking: [], expiresAt: new Date() });
    await stopping;
    expect(source.reads).toEqual([]);
    expect(r.events).toEqual([]);
    expect(source.leaves).toEqual([]);
  });

  it('an abort signal stops it, also one aborted before it started; Symbol.asyncDispose stops it too', async () => {
    const controller = new AbortController();
    const source = new ScriptedOwnership().view([]);
    const r = source.consumer({ signal: controller.signal });
    await beat(source, 0);
    controller.abort();
    await r.consumer.done;
    expect(r.consumer.state).toBe('stopped');
    expect(source.leaves).toEqual(['m']);

    const early = new ScriptedOwnership();
    const aborted = early.consumer({ signal: AbortSignal.abort() });
    await aborted.consumer.done;
    expect(aborted.consumer.state).toBe('stopped');
    expect(early.heartbeats).toEqual([]);

    const disposed = new ScriptedOwnership().view([]);
    const d = disposed.consumer();
    await beat(disposed, 0);
    await d.consumer[Symbol.asyncDispose]();
    expect(d.consumer.state).toBe('stopped');
  });

  it('a stopped consumer drops its abort listener', async () => {
    const controller = new AbortController();
    const source = new ScriptedOwnership().view([]);
    const r = source.consumer({ signal: controller.signal });
    await beat(source, 0);
    await r.consumer.stop();
    const drains = r.drains.length;
    controller.abort();
    await turns();
    expect(r.drains.length).toBe(drains);
  });

  it('stats list the partitions being handed over in ascending order; stop(0) does not wait out their grace', async () => {
    const source = new ScriptedOwnership().view([[3, 1], [1, 1], [2, 1]]);
    const r = source.consumer({ handler: () => new Promise<never>(() => {}) });
    await beat(source, 0);
    for (const p of [3, 1]) source.readsOf(p)[0]!.resolve([event(p, 1)]);
    await turns();
    source.view([[3, 1], [1, 1], [2, 1]], [3, 1], 2);
    await beat(source);
    expect(r.consumer.stats()).toMatchObject({ owned: [1, 2, 3], revoking: [1, 3] });
    for (const read of source.reads) read.resolve([]);
    await r.consumer.stop({ timeoutMs: 0 });
  });

  it('a stopped consumer leaves no listener on its signal', async () => {
    const controller = new AbortController();
    const source = new ScriptedOwnership().view([]);
    const r = source.consumer({ signal: controller.signal });
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
    await beat(source, 0);
    await r.consumer.stop();
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('stop({ timeoutMs: 0 }) sets no stop timer, even while a commit is still out', async () => {
    let land!: (results: SettleResult[]) => void;
    const source = new ScriptedOwnership().view([[0, 1]]);
    source.commit = (ops) => {
      source.commits.push(...ops);
      return new Promise((resolve) => (land = resolve));
    };
    const r = source.consumer();
    await beat(source, 0);
    source.readsOf(0)[0]!.resolve([event(0, 1)]);
    await turns();
    const stopping = r.consumer.stop({ timeoutMs: 0 });
    for (const read of source.reads) read.resolve([]);
    await turns();
    expect(source.timers.pendingDelays()).toEqual([]);
    land([{ ok: true }]);
    await stopping;
    expect(r.drains).toEqual([{ aborted: 0, timedOut: false }]);
  });

  it('a heartbeat that fails while the consumer stops schedules no other', async () => {
    let fail!: (error: unknown) => void;
    const source = new ScriptedOwnership();
    source.views.push(() => new Promise<MemberView>((_resolve, reject) => (fail = reject)));
    const r = source.consumer();
    await beat(source, 0);
    const stopping = r.consumer.stop();
    fail(unavailable());
    await stopping;
    expect(r.errors).toEqual([{ op: 'heartbeat', partition: null, code: 'backend_unavailable' }]);
    expect(source.timers.pendingDelays()).toEqual([]);
    expect(source.heartbeats).toHaveLength(1);
  });

  it("a heartbeat answered 'closed' after joining stops without waiting for running handlers", async () => {
    let signal: AbortSignal | null = null;
    const source = new ScriptedOwnership().view([[0, 1]]);
    source.views.push(new RheoError('closed', 'rheo is closed'));
    const r = source.consumer({
      handler: (_e, context) => {
        signal = context.signal;
        return new Promise<never>(() => {});
      },
    });
    await beat(source, 0);
    source.readsOf(0)[0]!.resolve([event(0, 1)]);
    await turns();
    await beat(source);
    expect(await isSettled(r.consumer.done)).toBe(true);
    expect(signal!.aborted).toBe(true);
    expect(r.drains).toEqual([{ aborted: 0, timedOut: false }]);
  });

  it('a revoked partition whose worker was fenced meanwhile is not released (it has moved already)', async () => {
    let finish!: () => void;
    const source = new ScriptedOwnership().view([[0, 1]]);
    const r = source.consumer({ handler: (e) => (e.sequence === 1 ? new Promise<void>((resolve) => (finish = resolve)) : undefined) });
    await beat(source, 0);
    source.readsOf(0)[0]!.resolve([event(0, 1), event(0, 2)]);
    await turns();
    source.view([[0, 1]], [0], 2);
    await beat(source);
    expect(r.consumer.stats().revoking).toEqual([0]);
    // The finished first event's commit comes back stale: the worker is fenced.
    source.commit = (ops) => {
      source.commits.push(...ops);
      return Promise.resolve(ops.map(() => ({ ok: false as const, error: new RheoError('stale_generation', 'moved') })));
    };
    finish();
    await turns();
    expect(source.commits).toHaveLength(1);
    expect(source.releases).toEqual([]);
    expect(r.consumer.stats()).toMatchObject({ owned: [], revoking: [] });
    await r.consumer.stop();
  });

  it('a partition lost while being handed over and granted back keeps its new worker when the old one finishes', async () => {
    let finish!: () => void;
    const source = new ScriptedOwnership().view([[0, 1]]);
    const r = source.consumer({ handler: (e) => (e.sequence === 1 && e.id === 'e0-1' ? new Promise<void>((resolve) => (finish = resolve)) : undefined) });
    await beat(source, 0);
    source.readsOf(0)[0]!.resolve([event(0, 1)]);
    await turns();
    source.view([[0, 1]], [0], 2);
    await beat(source);
    // Moved on and granted back under generation 2 before the first worker finished.
    source.view([[0, 2]], [], 3);
    await beat(source);
    expect(r.rebalances.at(-1)).toMatchObject({ lost: [0], assigned: [{ partition: 0, generation: 2 }] });
    finish();
    await turns();
    expect(r.consumer.stats()).toMatchObject({ owned: [0], revoking: [] });
    expect(source.readsOf(0).map((read) => read.fence.generation)).toEqual([1, 2]);
    for (const read of source.reads) read.resolve([]);
    await r.consumer.stop();
  });

  it("a worker's failed read is an ownership-error naming the op and the partition", async () => {
    const source = new ScriptedOwnership().view([[2, 1]]);
    const r = source.consumer({ retryBackoff: { initialMs: 5, maxMs: 5 } });
    await beat(source, 0);
    source.readsOf(2)[0]!.reject(unavailable());
    await turns();
    expect(r.errors).toEqual([{ op: 'read', partition: 2, code: 'backend_unavailable' }]);
    expect(r.consumer.stats().errors).toBe(1);
    r.consumer.stop({ timeoutMs: 0 }).catch(() => undefined);
    for (const read of source.reads) read.resolve([]);
    await r.consumer.done;
  });

  it('transaction: true on a backend without transactions is unsupported, and nothing starts', () => {
    const source = new ScriptedOwnership();
    const error = thrown(() => source.consumer({ transaction: true }));
    expect(error.code).toBe('unsupported');
    expect(error.message).toMatch(/consume\(\{ assignment: 'partitions', transaction: true \}\)/);
    expect(source.timers.pendingDelays()).toEqual([]);
  });

  it('without an ownership-error listener, errors are only counted', async () => {
    const source = new ScriptedOwnership();
    source.views.push(unavailable());
    const consumer = new PartitionConsumer(source as unknown as PartitionSource, {
      stream: 's',
      group: 'g',
      assignment: 'partitions',
      handler: () => undefined,
      timers: source.timers,
    });
    expect(consumer.memberId).toMatch(/^member-[0-9a-f]{12}$/);
    await beat(source, 0);
    expect(consumer.stats().errors).toBe(1);
    await consumer.stop();
  });
});
