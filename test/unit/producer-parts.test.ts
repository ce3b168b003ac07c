import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { RheoError } from '../../src/core/errors.js';
import type { Lease, SettleRequest, SettleResult } from '../../src/core/types.js';
import { backoffDelay, resolveFetchBackoff } from '../../src/runtime/backoff.js';
import { InflightTracker, type RenewManyFn, type RenewSummary } from '../../src/producer/inflight-tracker.js';
import { SettleBatcher } from '../../src/producer/settle-batcher.js';
import { sleep } from '../../src/runtime/timers.js';
import { fakeLease } from '../support/fake-settler.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { turns } from '../support/turns.js';

describe('backoffDelay', () => {
  const options = { initialMs: 100, maxMs: 1000 };

  it('doubles from initialMs per failure up to maxMs, with up to 20% jitter taken off', () => {
    expect([1, 2, 3, 4, 5].map((f) => backoffDelay(f, options, () => 0))).toEqual([100, 200, 400, 800, 1000]);
    expect(backoffDelay(0, options, () => 0)).toBe(100);
    expect(backoffDelay(2, options, () => 1)).toBe(160);
    expect(backoffDelay(1, options, () => 0.5)).toBe(90);
    expect(backoffDelay(1, { initialMs: 3, maxMs: 10 }, () => 0.5)).toBe(3); // 2.7 rounds to 3
    expect(backoffDelay(1, { initialMs: 0, maxMs: 10 }, () => 0)).toBe(1); // never below 1
    // The exponent stops at 30: a long outage neither overflows nor passes maxMs.
    expect(backoffDelay(1000, { initialMs: 1, maxMs: 2 ** 40 }, () => 0)).toBe(2 ** 30);
  });
});

describe('resolveFetchBackoff', () => {
  it('fills defaults from pollMs and refuses bad values naming the field', () => {
    expect(resolveFetchBackoff(undefined, 50)).toBeUndefined();
    expect(resolveFetchBackoff({}, 50)).toEqual({ initialMs: 50, maxMs: 30_000 });
    expect(resolveFetchBackoff({}, 500)).toEqual({ initialMs: 100, maxMs: 30_000 });
    expect(resolveFetchBackoff({ initialMs: 60_000 }, 50)).toEqual({ initialMs: 60_000, maxMs: 60_000 });
    expect(resolveFetchBackoff({ initialMs: 10, maxMs: 10 }, 50)).toEqual({ initialMs: 10, maxMs: 10 });
    expect(() => resolveFetchBackoff({ initialMs: 10, maxMs: 9 }, 50)).toThrow(/fetchBackoff\.maxMs/);
    expect(() => resolveFetchBackoff({ initialMs: 0 }, 50)).toThrow(/fetchBackoff\.initialMs/);
    expect(() => resolveFetchBackoff({ maxMs: 3_600_001 }, 50)).toThrow(/fetchBackoff\.maxMs/);
    expect(() => resolveFetchBackoff('fast', 50)).toThrow(/fetchBackoff/);
  });
});

describe('sleep', () => {
  it('resolves after its time on the timers, or at once on abort', async () => {
    const timers = new ManualTimers(new ManualClock(0));
    let done = false;
    void sleep(timers, 100).then(() => (done = true));
    timers.advance(99);
    await turns(1);
    expect(done).toBe(false);
    timers.advance(1);
    await turns(1);
    expect(done).toBe(true);

    const stop = new AbortController();
    let woken = false;
    void sleep(timers, 100, stop.signal).then(() => (woken = true));
    stop.abort();
    await turns(1);
    expect(woken).toBe(true);
    expect(timers.pendingDelays()).toEqual([]); // the timer was cancelled
    await expect(sleep(timers, 100, stop.signal)).resolves.toBeUndefined(); // already aborted: no timer at all
    expect(timers.pendingDelays()).toEqual([]);
  });
});

/** A settleMany whose calls the test answers by hand. */
function heldSettleMany(): {
  fn: (ops: SettleRequest[]) => Promise<SettleResult[]>;
  calls: Array<{ ops: SettleRequest[]; answer(results: SettleResult[]): void; fail(error: unknown): void }>;
} {
  const calls: Array<{ ops: SettleRequest[]; answer(results: SettleResult[]): void; fail(error: unknown): void }> = [];
  return {
    calls,
    fn: (ops) =>
      new Promise<SettleResult[]>((resolve, reject) => calls.push({ ops, answer: resolve, fail: reject })),
  };
}

const ack = (n: number): SettleRequest => ({ kind: 'ack', lease: fakeLease(n) });
const ok = (n: number): SettleResult[] => Array.from({ length: n }, () => ({ ok: true }) as SettleResult);

describe('SettleBatcher', () => {
  it('sends the settles of one turn in one call, at once when maxBatch is reached, at most maxConcurrentCalls at a time', async () => {
    const many = heldSettleMany();
    const batcher = new SettleBatcher(many.fn, 3, 2);
    const answered: number[] = [];
    for (let n = 1; n <= 8; n++) void batcher.settle(ack(n)).then(() => answered.push(n));
    // Two full batches went out synchronously; the rest waits for a free call.
    expect(many.calls.map((c) => c.ops.length)).toEqual([3, 3]);
    expect(batcher.queuedCount).toBe(2);
    await turns();
    expect(many.calls).toHaveLength(2);
    many.calls[0]!.answer(ok(3));
    await turns();
    expect(many.calls.map((c) => c.ops.map((op) => op.lease.event.sequence))).toEqual([
      [1, 2, 3],
      [4, 5, 6],
      [7, 8],
    ]);
    expect(answered).toEqual([1, 2, 3]);
    many.calls[1]!.answer(ok(3));
    many.calls[2]!.answer(ok(2));
    await turns();
    expect(answered).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(batcher.queuedCount).toBe(0);
  });

  it('a partial batch goes out on the next turn, in one call', async () => {
    const many = heldSettleMany();
    const batcher = new SettleBatcher(many.fn);
    void batcher.settle(ack(1));
    void batcher.settle(ack(2));
    expect(many.calls).toHaveLength(0);
    await turns(1);
    expect(many.calls.map((c) => c.ops.length)).toEqual([2]);
  });

  describe('linger', () => {
    it('a small batch waits while more are coming, and goes once it reaches upTo at the end of a turn', async () => {
      const many = heldSettleMany();
      let running = true;
      const batcher = new SettleBatcher(many.fn, 500, 2, null, null, { ms: 60_000, upTo: 3, when: () => running });
      void batcher.settle(ack(1));
      await turns(3);
      expect(many.calls).toHaveLength(0);
      void batcher.settle(ack(2));
      await turns(3);
      expect(many.calls).toHaveLength(0);
      void batcher.settle(ack(3));
      await turns(1);
      expect(many.calls.map((c) => c.ops.length)).toEqual([3]);
      // Nothing more is coming: the next one goes at the end of its turn.
      running = false;
      void batcher.settle(ack(4));
      await turns(1);
      expect(many.calls.map((c) => c.ops.length)).toEqual([3, 1]);
    });

    it('settles issued in one turn go together at once, whatever the linger', async () => {
      const many = heldSettleMany();
      const batcher = new SettleBatcher(many.fn, 500, 2, null, null, { ms: 60_000, upTo: 2, when: () => true });
      for (let n = 1; n <= 5; n++) void batcher.settle(ack(n));
      await turns(1);
      expect(many.calls.map((c) => c.ops.length)).toEqual([5]);
    });

    it('goes after ms at the latest, and idle() sends a lingering batch at once', async () => {
      const many = heldSettleMany();
      const batcher = new SettleBatcher(many.fn, 500, 2, null, null, { ms: 5, upTo: 100, when: () => true });
      void batcher.settle(ack(1));
      await turns(2);
      expect(many.calls).toHaveLength(0);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(many.calls.map((c) => c.ops.length)).toEqual([1]);
      many.calls[0]!.answer(ok(1));

      const slow = heldSettleMany();
      const lingering = new SettleBatcher(slow.fn, 500, 2, null, null, { ms: 60_000, upTo: 100, when: () => true });
      void lingering.settle(ack(2));
      await turns(2);
      const idle = lingering.idle();
      expect(slow.calls.map((c) => c.ops.length)).toEqual([1]);
      slow.calls[0]!.answer(ok(1));
      await idle;
    });
  });

  it('answers each op with its own error; too few results and non-RheoError throws are internal errors naming what happened', async () => {
    const failure = new RheoError('stale_lease', 'gone');
    const results: SettleResult[] = [{ ok: true }, { ok: false, error: failure }];
    const batcher = new SettleBatcher(() => Promise.resolve(results));
    const outcomes = await Promise.allSettled([batcher.settle(ack(1)), batcher.settle(ack(2)), batcher.settle(ack(3))]);
    expect(outcomes[0]).toEqual({ status: 'fulfilled', value: undefined });
    expect(outcomes[1]).toEqual({ status: 'rejected', reason: failure });
    expect(outcomes[2]).toMatchObject({ status: 'rejected', reason: { code: 'internal', message: 'settleMany returned too few results' } });

    const cause = new Error('socket closed');
    const thrower = new SettleBatcher(() => Promise.reject(cause));
    const error = (await thrower.settle(ack(1)).catch((e: unknown) => e)) as RheoError;
    expect([error.code, error.message, error.cause]).toEqual(['internal', 'settle failed: socket closed', cause]);
    const down = new RheoError('backend_unavailable', 'down');
    const rheoThrower = new SettleBatcher(() => Promise.reject(down));
    await expect(rheoThrower.settle(ack(1))).rejects.toBe(down);
  });

  it('tells its hook about every answer before the promise settles; a throwing hook rejects that op', async () => {
    const seen: string[] = [];
    const refused = new RheoError('stale_lease', 'gone');
    const hookError = new Error('hook failed');
    const batcher = new SettleBatcher(
      () => Promise.resolve([{ ok: true }, { ok: false, error: refused }, { ok: true }] as SettleResult[]),
      500,
      2,
      (op, error) => {
        const n = op.lease.event.sequence;
        seen.push(`${n} ${error ? error.code : 'ok'}`);
        if (n === 3) throw hookError;
      },
    );
    const settled = [1, 2, 3].map((n) =>
      batcher.settle(ack(n)).then(
        () => seen.push(`${n} resolved`),
        (e: unknown) => seen.push(`${n} rejected ${(e as Error).message}`),
      ),
    );
    await Promise.all(settled);
    expect(seen).toEqual(['1 ok', '2 stale_lease', '3 ok', '1 resolved', '2 rejected gone', '3 rejected hook failed']);
  });

  it('retries by its policy: after the delay, counting failures, until it succeeds', async () => {
    const timers = new ManualTimers(new ManualClock(0));
    const answers: SettleResult[][] = [];
    const sent: number[] = [];
    const down = new RheoError('backend_unavailable', 'down');
    const asked: Array<[number, string, number]> = [];
    const batcher = new SettleBatcher(
      (ops) => {
        sent.push(ops.length);
        return Promise.resolve(answers.shift() ?? ok(ops.length));
      },
      500,
      2,
      null,
      {
        timers,
        delayMs: (op, error, failures) => {
          asked.push([op.lease.event.sequence, error.code, failures]);
          return failures < 3 ? 100 * failures : null;
        },
      },
    );
    answers.push([{ ok: false, error: down }], [{ ok: false, error: down }]);
    let state = 'pending';
    void batcher.settle(ack(1)).then(() => (state = 'resolved'));
    await turns();
    expect([sent, batcher.retryingCount, timers.pendingDelays()]).toEqual([[1], 1, [100]]);
    timers.advance(100);
    await turns();
    expect([sent, batcher.retryingCount, timers.pendingDelays()]).toEqual([[1, 1], 1, [200]]);
    timers.advance(200);
    await turns();
    expect(sent).toEqual([1, 1, 1]);
    expect(state).toBe('resolved');
    expect(batcher.retryingCount).toBe(0);
    expect(asked).toEqual([
      [1, 'backend_unavailable', 1],
      [1, 'backend_unavailable', 2],
    ]);

    // The policy gives up at the third failure: the caller gets the error.
    answers.push([{ ok: false, error: down }], [{ ok: false, error: down }], [{ ok: false, error: down }]);
    const given = batcher.settle(ack(2)).catch((e: unknown) => e);
    await turns();
    timers.advance(100);
    await turns();
    timers.advance(200);
    expect(await given).toBe(down);
  });

  it('idle() waits for a call answered on a later turn of the event loop; a null rejection is internal', async () => {
    const batcher = new SettleBatcher(
      (ops) => new Promise<SettleResult[]>((resolve) => setImmediate(() => resolve(ok(ops.length)))),
    );
    const acked = batcher.settle(ack(1));
    batcher.flush();
    await batcher.idle();
    await expect(acked).resolves.toBeUndefined();
    const rejecter = new SettleBatcher(() => Promise.reject(null));
    await expect(rejecter.settle(ack(1))).rejects.toMatchObject({ code: 'internal', message: 'settle failed: null' });
  });

  it('idle() waits out a retry without starving the event loop, and resolves once it is answered', async () => {
    const timers = new ManualTimers(new ManualClock(0));
    const down = new RheoError('backend_unavailable', 'down');
    const answers: SettleResult[][] = [[{ ok: false, error: down }]];
    const batcher = new SettleBatcher((ops) => Promise.resolve(answers.shift() ?? ok(ops.length)), 500, 2, null, { timers, delayMs: () => 100 });
    void batcher.settle(ack(1));
    await turns();
    expect(batcher.retryingCount).toBe(1); // waiting for its timer, nothing in flight
    let idle = false;
    void batcher.idle().then(() => (idle = true));
    // A macrotask must still get a turn while idle() waits (it used to spin on microtasks).
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(idle).toBe(false);
    timers.advance(100);
    await turns();
    expect(idle).toBe(true);
    expect(batcher.retryingCount).toBe(0);
  });

  it('stopRetrying sends every waiting settle now and answers the next failure without retrying', async () => {
    const timers = new ManualTimers(new ManualClock(0));
    const down = new RheoError('backend_unavailable', 'down');
    let calls = 0;
    const batcher = new SettleBatcher(
      () => {
        calls++;
        return Promise.resolve([{ ok: false, error: down }] as SettleResult[]);
      },
      500,
      2,
      null,
      { timers, delayMs: () => 1000 },
    );
    const answer = batcher.settle(ack(1)).catch((e: unknown) => e);
    await turns();
    expect([calls, batcher.retryingCount]).toEqual([1, 1]);
    batcher.stopRetrying();
    expect(timers.pendingDelays()).toEqual([]); // its timer was cancelled
    await turns();
    expect(calls).toBe(2);
    expect(await answer).toBe(down);
    expect(batcher.retryingCount).toBe(0);
  });
});

interface Round {
  leases: string[];
  answer(results: Awaited<ReturnType<RenewManyFn<{ n: number }>>>): void;
  fail(error: unknown): void;
}

function tracker(random = 0): {
  tracker: InflightTracker<{ n: number }>;
  timers: ManualTimers;
  rounds: Round[];
  events: string[];
  summaries: RenewSummary[];
} {
  const timers = new ManualTimers(new ManualClock(0));
  const rounds: Round[] = [];
  const events: string[] = [];
  const summaries: RenewSummary[] = [];
  const t = new InflightTracker<{ n: number }>({
    leaseMs: 1000,
    timers,
    random: () => random,
    renewMany: (leases) =>
      new Promise((resolve, reject) => rounds.push({ leases: leases.map((l) => l.leaseId), answer: resolve, fail: reject })),
    onLost: (lease, error) => events.push(`lost ${lease.leaseId} ${error.code}`),
    onRenewError: (error, leases) => events.push(`error ${error.code} ${error.message} [${leases.map((l) => l.leaseId).join(',')}]`),
    onRenewed: (summary) => summaries.push(summary),
  });
  return { tracker: t, timers, rounds, events, summaries };
}

const renewed = (lease: Lease<{ n: number }>, expiresAt: number): { ok: true; lease: Lease<{ n: number }> } => ({
  ok: true,
  lease: { ...lease, expiresAt: new Date(expiresAt) },
});

describe('InflightTracker', () => {
  it('renews on one unref’d timer at 40-50% of the lease, jittered', () => {
    for (const [random, delay] of [
      [0, 500],
      [1, 400],
      [0.5, 450],
    ] as const) {
      const { tracker: t, timers } = tracker(random);
      t.add(fakeLease(1));
      t.add(fakeLease(2));
      expect(timers.pendingDelays({ keepAlive: false })).toEqual([delay]);
      expect(timers.pendingDelays({ keepAlive: true })).toEqual([]);
    }
  });

  it('keeps renewed leases current, drops stale ones, retries failed ones at a quarter of the interval', async () => {
    const { tracker: t, timers, rounds, events, summaries } = tracker();
    const [a, b, c, d] = [1, 2, 3, 4].map(fakeLease);
    for (const lease of [a!, b!, c!, d!]) t.add(lease);
    t.markSettling('lease-4');
    timers.advance(500);
    expect(rounds.map((r) => r.leases)).toEqual([['lease-1', 'lease-2', 'lease-3']]); // a settling lease is not renewed
    const stale = new RheoError('stale_lease', 'gone');
    const down = new RheoError('backend_unavailable', 'down');
    rounds[0]!.answer([renewed(a!, 99_000), { ok: false, error: stale }, { ok: false, error: down }]);
    await turns();
    expect(t.get('lease-1')!.expiresAt.getTime()).toBe(99_000);
    expect([t.has('lease-2'), t.has('lease-3'), t.size]).toEqual([false, true, 3]);
    expect(events).toEqual(['lost lease-2 stale_lease', 'error backend_unavailable down [lease-3]']);
    expect(summaries).toEqual([{ renewed: 1, lost: 1, failed: 1 }]);
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([125]);
    timers.advance(125);
    // Too few answers: the missing one is a failure, and the next round is soon again.
    rounds[1]!.answer([renewed(a!, 99_500)]);
    await turns();
    expect(events.at(-1)).toBe('error internal renewMany returned too few results [lease-3]');
    expect(summaries.at(-1)).toEqual({ renewed: 1, lost: 0, failed: 1 });
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([125]);
    timers.advance(125);
    rounds[2]!.answer([renewed(a!, 100_000), renewed(c!, 100_000)]);
    await turns();
    expect(summaries.at(-1)).toEqual({ renewed: 2, lost: 0, failed: 0 });
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([500]);
  });

  it('a renewMany that throws fails the whole round, wrapped as internal unless it is a RheoError', async () => {
    const { tracker: t, timers, rounds, events, summaries } = tracker();
    t.add(fakeLease(1));
    t.add(fakeLease(2));
    timers.advance(500);
    rounds[0]!.fail(new Error('socket closed'));
    await turns();
    expect(events).toEqual(['error internal renew failed: socket closed [lease-1,lease-2]']);
    expect(summaries).toEqual([{ renewed: 0, lost: 0, failed: 2 }]);
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([125]);
    timers.advance(125);
    rounds[1]!.fail(new RheoError('closed', 'rheo is closed'));
    await turns();
    expect(events.at(-1)).toBe('error closed rheo is closed [lease-1,lease-2]');
  });

  it('ignores the answer for a lease confirmed or settling meanwhile', async () => {
    const { tracker: t, timers, rounds, events, summaries } = tracker();
    const [a, b] = [1, 2].map(fakeLease);
    t.add(a!);
    t.add(b!);
    timers.advance(500);
    t.delete('lease-1');
    t.markSettling('lease-2');
    rounds[0]!.answer([{ ok: false, error: new RheoError('stale_lease', 'gone') }, { ok: false, error: new RheoError('internal', 'x') }]);
    await turns();
    expect(events).toEqual([]);
    expect(summaries).toEqual([{ renewed: 0, lost: 0, failed: 0 }]);
    expect(t.has('lease-2')).toBe(true);
  });

  it('takes back the unhanded leases, keeps the timer to run out when it holds none, and stop waits for a round on its way', async () => {
    const { tracker: t, timers, rounds } = tracker();
    for (const n of [1, 2, 3]) t.add(fakeLease(n));
    t.markHanded('lease-1');
    t.markSettling('lease-2');
    t.markHanded('missing');
    expect(t.takeUnhanded().map((l) => l.leaseId)).toEqual(['lease-3']);
    expect(t.size).toBe(2);
    expect(t.delete('lease-1')).toBe(true);
    expect(t.delete('lease-1')).toBe(false);
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([500]);
    t.delete('lease-2');
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([500]);

    t.add(fakeLease(4));
    void t.renewNow();
    expect(rounds).toHaveLength(1);
    let stopped = false;
    void t.stop().then(() => (stopped = true));
    await turns();
    expect(stopped).toBe(false);
    rounds[0]!.answer([renewed(fakeLease(4), 5000)]);
    await turns();
    expect(stopped).toBe(true);
    expect(timers.pendingDelays()).toEqual([]); // stopped: no next round
    t.add(fakeLease(5));
    expect(timers.pendingDelays()).toEqual([]);
  });

  it('a round with every lease settling asks nothing and reports nothing', async () => {
    const { tracker: t, rounds, events, summaries } = tracker();
    t.add(fakeLease(1));
    t.markSettling('lease-1');
    await t.renewNow();
    expect([rounds, events, summaries]).toEqual([[], [], []]);
  });

  it('get answers the lease as last renewed, or undefined for one not held', async () => {
    const { tracker: t, timers, rounds } = tracker();
    t.add(fakeLease(1));
    expect(t.get('missing')).toBeUndefined();
    timers.advance(500);
    rounds[0]!.answer([renewed(fakeLease(1), 9_000)]);
    await turns();
    expect(t.get('lease-1')?.expiresAt).toEqual(new Date(9_000));
  });

  it('lets its timer run out once empty: a lease added before it fires rides on it; a round with nothing held renews nothing and sets no next timer', async () => {
    const { tracker: t, timers, rounds, summaries } = tracker();
    t.add(fakeLease(1));
    expect(t.takeUnhanded()).toHaveLength(1);
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([500]);
    timers.advance(200);
    t.add(fakeLease(2)); // no timer of its own: the one set for lease-1 renews it
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([300]);
    timers.advance(300);
    expect(rounds.map((r) => r.leases)).toEqual([['lease-2']]);
    t.delete('lease-2'); // confirmed while the round is on its way
    rounds[0]!.answer([renewed(fakeLease(2), 5_000)]);
    await turns();
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([]);

    t.add(fakeLease(3));
    t.delete('lease-3');
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([500]);
    timers.advance(500);
    await turns();
    expect(rounds).toHaveLength(1); // nothing held: no round
    expect(summaries).toHaveLength(1);
    expect(timers.pendingDelays({ keepAlive: false })).toEqual([]);
  });

  it('a renewMany rejected with a value that is not an Error is internal, with that value as its cause', async () => {
    const errors: RheoError[] = [];
    const t = new InflightTracker<{ n: number }>({
      leaseMs: 1000,
      timers: new ManualTimers(new ManualClock(0)),
      renewMany: () => Promise.reject(null),
      onLost: () => undefined,
      onRenewError: (error) => errors.push(error),
      onRenewed: () => undefined,
    });
    t.add(fakeLease(1));
    await t.renewNow();
    expect(errors.map((e) => [e.code, e.message, e.cause])).toEqual([['internal', 'renew failed: null', null]]);
  });

  it('renewNow joins a round already on its way', () => {
    const { tracker: t, rounds } = tracker();
    t.add(fakeLease(1));
    const first = t.renewNow();
    expect(t.renewNow()).toBe(first);
    expect(rounds).toHaveLength(1);
  });
});
