import { describe, expect, it } from 'vitest';
import type { Backend, FetchRequest, SettleOp, SettleOutcome } from '../../src/core/backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/logger.js';
import type { Lease } from '../../src/core/types.js';
import { createConsumer } from '../../src/consumer/consumer.js';
import type { LeaseSource } from '../../src/runtime/sources.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { turns } from '../support/turns.js';

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
});
