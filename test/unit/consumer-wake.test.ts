import { describe, expect, it } from 'vitest';
import type { Backend, FetchRequest, SettleOp, SettleOutcome } from '../../src/core/backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import type { Lease } from '../../src/core/types.js';
import { createConsumer } from '../../src/consumer/consumer.js';
import type { HandlerOutcome } from '../../src/consumer/consumer-types.js';
import type { LeaseSource } from '../../src/runtime/sources.js';
import { resolveMaxPollMs } from '../../src/runtime/append-wait.js';
import { RheoError } from '../../src/core/errors.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { fakeLease } from '../support/fake-settler.js';
import { nextCallAt, turns } from '../support/turns.js';

/*
 * The competing consumer's wake path against a scripted source: claims wait
 * until the test answers them and appends are notified by hand, while the
 * poll timer (manual) never fires, so any claim after an empty one was woken
 * by a notification.
 */

type L = Lease<{ n: number }>;

class NotifyingSource {
  readonly clock = new ManualClock(1_000_000);
  readonly timers = new ManualTimers(this.clock);
  readonly defaults = Object.freeze({ leaseMs: 30_000, maxAttempts: 5, maxDemand: 8, pollMs: 200, maxFetchBytes: 1 << 20 });
  readonly logger = silentLogger;
  readonly backend = { name: 'scripted', capabilities: { notifications: true } } as unknown as Backend;
  readonly capabilities = { notifications: true };
  readonly claims: Array<{ request: FetchRequest; resolve(leases: L[]): void }> = [];
  #waiters: Array<(appended: boolean) => void> = [];
  waits = 0;

  claim(_stream: string, _group: string, request: FetchRequest): Promise<L[]> {
    return new Promise<L[]>((resolve) => this.claims.push({ request, resolve }));
  }

  settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    return Promise.resolve(ops.map(() => ({ ok: true as const })));
  }

  renew(): Promise<never[]> {
    return Promise.resolve([]);
  }

  waitForAppend(_stream: string, _timeoutMs: number, signal: AbortSignal): Promise<boolean> {
    this.waits++;
    return new Promise<boolean>((resolve) => {
      if (signal.aborted) return resolve(false);
      const wake = (appended: boolean): void => {
        signal.removeEventListener('abort', onAbort);
        resolve(appended);
      };
      const onAbort = (): void => {
        this.#waiters = this.#waiters.filter((w) => w !== wake);
        resolve(false);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(wake);
    });
  }

  /** An append was committed: every waiter hears it. */
  notify(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake(true);
  }

  get pendingWaits(): number {
    return this.#waiters.length;
  }
}

describe('consumer wake path', () => {
  it('listens before it claims: an append notified while an empty claim is on its way wakes it, with no poll timer', async () => {
    const source = new NotifyingSource();
    const consumer = createConsumer<{ n: number }>(source as unknown as LeaseSource, {
      stream: 's',
      group: 'g',
      timers: source.timers,
      handler: () => 'ack',
    });
    await turns();
    expect(source.claims).toHaveLength(1);
    // Registered before the claim went out, and only one.
    expect(source.waits).toBe(1);
    // The append commits (and is notified) after the claim's snapshot, before its empty answer arrives.
    source.notify();
    source.claims[0]!.resolve([]);
    await turns();
    expect(source.claims).toHaveLength(2);
    // Caught up and idle: no claim until a notification, which alone wakes it.
    source.claims[1]!.resolve([]);
    await turns();
    expect(source.claims).toHaveLength(2);
    expect(source.pendingWaits).toBe(1);
    source.notify();
    await turns();
    expect(source.claims).toHaveLength(3);
    // Stopping ends the wait that is out: nothing is left listening.
    const stopped = consumer.stop();
    source.claims[2]!.resolve([]);
    await stopped;
    expect(source.pendingWaits).toBe(0);
  });

  /** The next claim comes exactly `ms` from now. */
  function pollsAt(source: NotifyingSource, ms: number): Promise<void> {
    return nextCallAt(source.timers, source.claims, ms, 'claim');
  }

  /** Answers the last claim (empty unless given leases) and lets the loop react. */
  async function answer(source: NotifyingSource, leases: L[] = []): Promise<void> {
    source.claims[source.claims.length - 1]!.resolve(leases);
    await turns();
  }

  /** Claims come at each of `waits` (ms after the one before), each answered empty. */
  async function emptyPolls(source: NotifyingSource, waits: number[]): Promise<void> {
    for (const ms of waits) {
      await pollsAt(source, ms);
      await answer(source);
    }
  }

  /** A consumer (pollMs 100) whose first claim came back empty. */
  async function idleConsumer(source: NotifyingSource, maxPollMs: number, handler: () => HandlerOutcome = () => 'ack') {
    const consumer = createConsumer<{ n: number }>(source as unknown as LeaseSource, {
      stream: 's', group: 'g', timers: source.timers, pollMs: 100, maxPollMs, handler,
    });
    await turns();
    await answer(source);
    return { stop: async (): Promise<void> => {
      const stopped = consumer.stop();
      await answer(source);
      await stopped;
    } };
  }

  it('backs idle polls off while notifications come, up to maxPollMs; a notification starts them at pollMs again', async () => {
    const source = new NotifyingSource();
    const consumer = await idleConsumer(source, 500);
    await emptyPolls(source, [100, 200, 400, 500, 500]);
    source.notify();
    await turns();
    expect(source.claims).toHaveLength(7);
    await answer(source);
    await emptyPolls(source, [100]);
    await pollsAt(source, 200);
    await consumer.stop();
  });

  it('keeps polling at pollMs once a poll found work no notification announced, until a notification comes', async () => {
    const source = new NotifyingSource();
    const consumer = await idleConsumer(source, 800);
    await emptyPolls(source, [100]);
    await pollsAt(source, 200);
    // Found by the poll, unannounced (an appender that does not notify, say).
    await answer(source, [fakeLease(1)]);
    await emptyPolls(source, [100, 100, 100, 100]);
    // One wait registered with the store all along: the polls' timers ended, it stayed out.
    expect(source.waits).toBe(1);
    expect(source.pendingWaits).toBe(1);
    // A notification restores the backoff.
    source.notify();
    await turns();
    await answer(source);
    await emptyPolls(source, [100]);
    await pollsAt(source, 200);
    await consumer.stop();
  });

  it('never waits past its own delayed retry, however far the polls backed off', async () => {
    const source = new NotifyingSource();
    let calls = 0;
    const consumer = await idleConsumer(source, 10_000, () => (++calls === 1 ? { retry: 'later', delayMs: 1_000 } : 'ack'));
    await emptyPolls(source, [100, 200, 400]);
    source.notify();
    await turns();
    await answer(source, [fakeLease(1)]);
    await turns();
    expect(calls).toBe(1);
    // After the short claim: 100, then 200, 400 (= 700 ms in), then the retry's due time at 1,000, not 800 later.
    await emptyPolls(source, [100, 200, 400]);
    await pollsAt(source, 300);
    await consumer.stop();
  });

  it('polls at pollMs alone without notifications', async () => {
    const source = new NotifyingSource();
    (source as { capabilities: { notifications: boolean } }).capabilities = { notifications: false };
    const consumer = await idleConsumer(source, 800);
    await emptyPolls(source, [100, 100, 100, 100]);
    expect(source.waits).toBe(0);
    await pollsAt(source, 100);
    await consumer.stop();
  });

  it('maxPollMs defaults to five polls and may not be below pollMs', () => {
    expect(resolveMaxPollMs(undefined, 200)).toBe(1_000);
    expect(resolveMaxPollMs(undefined, 3_000_000)).toBe(3_600_000);
    expect(resolveMaxPollMs(200, 200)).toBe(200);
    for (const bad of [199, 1.5, '1000', -1]) {
      expect(() => resolveMaxPollMs(bad, 200)).toThrow(RheoError);
      try {
        resolveMaxPollMs(bad, 200);
      } catch (error) {
        expect((error as RheoError).code).toBe('invalid_argument');
        expect((error as RheoError).message).toContain('maxPollMs');
      }
    }
  });
});

