import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { RheoError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/types.js';
import type { RunResult } from '../../src/consumer/handler-run.js';
import { carryOut, releaseUnstarted, type SettleCounters } from '../../src/consumer/settle-policy.js';
import { emittedLeaseInfo } from '../../src/observability/lease-events.js';
import { fakeLease } from '../support/fake-settler.js';

/*
 * What the consumer sends after a handler run, and what it counts and emits
 * for each answer, against a settler that answers as the test says.
 */

type Kind = 'ack' | 'nack' | 'reject' | 'release';

class Settler {
  readonly calls: Array<[string, ...unknown[]]> = [];
  readonly answers: Partial<Record<Kind, unknown[]>> = {};

  /** The next `kind` calls fail with these, in order (then succeed). */
  fail(kind: Kind, ...errors: unknown[]): this {
    this.answers[kind] = errors;
    return this;
  }

  #answer(kind: Kind): Promise<void> {
    const error = this.answers[kind]?.shift();
    return error === undefined ? Promise.resolve() : Promise.reject(error);
  }

  ack(lease: Lease): Promise<void> {
    this.calls.push(['ack', lease.leaseId]);
    return this.#answer('ack');
  }
  nack(lease: Lease, reason: string, options: { delayMs: number }): Promise<void> {
    this.calls.push(['nack', lease.leaseId, reason, options.delayMs]);
    return this.#answer('nack');
  }
  reject(lease: Lease, reason: string): Promise<void> {
    this.calls.push(['reject', lease.leaseId, reason]);
    return this.#answer('reject');
  }
  release(lease: Lease): Promise<void> {
    this.calls.push(['release', lease.leaseId]);
    return this.#answer('release');
  }
  confirm(leaseId: string): void {
    this.calls.push(['confirm', leaseId]);
  }
}

function counters(): SettleCounters {
  return { acked: 0, retried: 0, deadLettered: 0, lost: 0, settleErrors: 0 };
}

/** An emitter recording every event it is given, with or without a listener for `ack`. */
function events(listenToAck = true): EventEmitter & { log: Array<[string, Record<string, unknown>]> } {
  const emitter = Object.assign(new EventEmitter(), { log: [] as Array<[string, Record<string, unknown>]> });
  const emit = emitter.emit.bind(emitter);
  emitter.emit = (event: string | symbol, payload?: Record<string, unknown>) => {
    emitter.log.push([String(event), payload!]);
    return emit(event, payload);
  };
  if (listenToAck) emitter.on('ack', () => undefined);
  return emitter;
}

const lease = fakeLease(4);
const info = emittedLeaseInfo(lease);

async function carry(result: RunResult, settler = new Settler(), listenToAck = true) {
  const c = counters();
  const e = events(listenToAck);
  await carryOut(settler as never, lease, result, c, e);
  return { calls: settler.calls, counters: c, log: e.log };
}

const error = (code: ConstructorParameters<typeof RheoError>[0], message = 'it failed') => new RheoError(code, message);

describe('carryOut', () => {
  it('a lost run sends and reports nothing', async () => {
    expect(await carry({ kind: 'lost', error: error('stale_lease') })).toEqual({ calls: [], counters: counters(), log: [] });
  });

  it('an ack that lands counts and emits ack, and builds no event when nobody listens', async () => {
    const heard = await carry({ kind: 'ack' });
    expect(heard).toEqual({ calls: [['ack', lease.leaseId]], counters: { ...counters(), acked: 1 }, log: [['ack', info]] });
    const unheard = await carry({ kind: 'ack' }, new Settler(), false);
    expect(unheard.log).toEqual([]);
    expect(unheard.counters.acked).toBe(1);
  });

  it.each(['ambiguous', 'backend_unavailable'] as const)('an ack failing with %s is reported and left to expire: no nack', async (code) => {
    const failure = error(code);
    const { calls, counters: c, log } = await carry({ kind: 'ack' }, new Settler().fail('ack', failure));
    expect(calls).toEqual([['ack', lease.leaseId]]);
    expect(c).toEqual({ ...counters(), settleErrors: 1 });
    expect(log).toEqual([['settle-error', { ...info, op: 'ack', error: failure }]]);
  });

  it('an ack answered stale_lease is neither reported nor followed by a nack (the producer reports the loss)', async () => {
    const { calls, counters: c, log } = await carry({ kind: 'ack' }, new Settler().fail('ack', error('stale_lease')));
    expect(calls).toEqual([['ack', lease.leaseId]]);
    expect(c).toEqual(counters());
    expect(log).toEqual([]);
  });

  it('an ack that failed for certain is reported, then nacked at once so the event runs again now', async () => {
    const failure = error('internal', 'constraint broke');
    const { calls, counters: c, log } = await carry({ kind: 'ack' }, new Settler().fail('ack', failure));
    const reason = 'ack failed (internal): constraint broke';
    expect(calls).toEqual([
      ['ack', lease.leaseId],
      ['nack', lease.leaseId, reason, 0],
    ]);
    expect(c).toEqual({ ...counters(), settleErrors: 1, retried: 1 });
    expect(log).toEqual([
      ['settle-error', { ...info, op: 'ack', error: failure }],
      ['retry', { ...info, reason, delayMs: 0 }],
    ]);
  });

  it('when that nack fails too, both failures are reported and nothing is counted as retried', async () => {
    const nackFailure = error('backend_unavailable');
    const { counters: c, log } = await carry({ kind: 'ack' }, new Settler().fail('ack', error('internal')).fail('nack', nackFailure));
    expect(c).toEqual({ ...counters(), settleErrors: 2 });
    expect(log.map(([event, payload]) => [event, payload.op])).toEqual([
      ['settle-error', 'ack'],
      ['settle-error', 'nack'],
    ]);
    expect(log[1]![1].error).toBe(nackFailure);
  });

  it('a settle that rejects with something other than a RheoError becomes internal, with the cause kept', async () => {
    const cause = new TypeError('socket is gone');
    const { log } = await carry({ kind: 'reject', reason: 'bad' }, new Settler().fail('reject', cause));
    const reported = log[0]![1].error as RheoError;
    expect(reported).toBeInstanceOf(RheoError);
    expect(reported.code).toBe('internal');
    expect(reported.message).toBe('settle failed: socket is gone');
    expect(reported.cause).toBe(cause);
    const odd = await carry({ kind: 'reject', reason: 'bad' }, new Settler().fail('reject', 'a string'));
    expect((odd.log[0]![1].error as RheoError).message).toBe('settle failed: a string');
  });

  it('a nack sends its reason and delay, counts a retry and emits it; a failed one is reported', async () => {
    const ok = await carry({ kind: 'nack', reason: 'later', delayMs: 250, failure: null });
    expect(ok.calls).toEqual([['nack', lease.leaseId, 'later', 250]]);
    expect(ok.counters).toEqual({ ...counters(), retried: 1 });
    expect(ok.log).toEqual([['retry', { ...info, reason: 'later', delayMs: 250 }]]);
    const failure = error('internal');
    const failed = await carry({ kind: 'nack', reason: 'later', delayMs: 250, failure: null }, new Settler().fail('nack', failure));
    expect(failed.counters).toEqual({ ...counters(), settleErrors: 1 });
    expect(failed.log).toEqual([['settle-error', { ...info, op: 'nack', error: failure }]]);
  });

  it('a reject dead-letters with its reason; a failed one is reported; a stale one is not', async () => {
    const ok = await carry({ kind: 'reject', reason: 'poison' });
    expect(ok.calls).toEqual([['reject', lease.leaseId, 'poison']]);
    expect(ok.counters).toEqual({ ...counters(), deadLettered: 1 });
    expect(ok.log).toEqual([['dead-letter', { ...info, reason: 'poison' }]]);
    const failure = error('backend_unavailable');
    const failed = await carry({ kind: 'reject', reason: 'poison' }, new Settler().fail('reject', failure));
    expect(failed.log).toEqual([['settle-error', { ...info, op: 'reject', error: failure }]]);
    const stale = await carry({ kind: 'reject', reason: 'poison' }, new Settler().fail('reject', error('stale_lease')));
    expect(stale).toMatchObject({ counters: counters(), log: [] });
  });

  it('committed in a transaction: only confirms; counts and emits the ack or the dead letter', async () => {
    const acked = await carry({ kind: 'committed', settle: 'ack', reason: null });
    expect(acked).toEqual({ calls: [['confirm', lease.leaseId]], counters: { ...counters(), acked: 1 }, log: [['ack', info]] });
    expect((await carry({ kind: 'committed', settle: 'ack', reason: null }, new Settler(), false)).log).toEqual([]);
    const rejected = await carry({ kind: 'committed', settle: 'reject', reason: 'poison' });
    expect(rejected).toEqual({
      calls: [['confirm', lease.leaseId]],
      counters: { ...counters(), deadLettered: 1 },
      log: [['dead-letter', { ...info, reason: 'poison' }]],
    });
    expect((await carry({ kind: 'committed', settle: 'reject', reason: null })).log).toEqual([['dead-letter', { ...info, reason: '' }]]);
  });

  it('uncommitted: only confirms; a stale lease is a loss, anything else a settle error on the ack', async () => {
    const staleError = error('stale_lease');
    const lost = await carry({ kind: 'uncommitted', error: staleError });
    expect(lost).toEqual({
      calls: [['confirm', lease.leaseId]],
      counters: { ...counters(), lost: 1 },
      log: [['lease-lost', { ...info, error: staleError }]],
    });
    const failure = error('ambiguous');
    const failed = await carry({ kind: 'uncommitted', error: failure });
    expect(failed).toEqual({
      calls: [['confirm', lease.leaseId]],
      counters: { ...counters(), settleErrors: 1 },
      log: [['settle-error', { ...info, op: 'ack', error: failure }]],
    });
  });
});

describe('releaseUnstarted', () => {
  it('releases every lease; a failure is reported per lease, a stale one is not', async () => {
    const settler = new Settler().fail('release', error('backend_unavailable'), error('stale_lease'));
    const c = counters();
    const e = events();
    const leases = [fakeLease(1), fakeLease(2), fakeLease(3)];
    await releaseUnstarted(settler as never, leases, c, e);
    expect(settler.calls).toEqual(leases.map((l) => ['release', l.leaseId]));
    expect(c).toEqual({ ...counters(), settleErrors: 1 });
    expect(e.log).toEqual([['settle-error', { ...emittedLeaseInfo(leases[0]!), op: 'release', error: expect.objectContaining({ code: 'backend_unavailable' }) }]]);
  });
});
