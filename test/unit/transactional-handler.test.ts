import { describe, expect, it } from 'vitest';
import type { Backend } from '../../src/core/backend.js';
import { RheoError } from '../../src/core/errors.js';
import type { HandlerContext, HandlerOutcome } from '../../src/consumer/consumer-types.js';
import type { PartitionHandlerContext } from '../../src/consumer/partition-options.js';
import { SettledInTransaction, partitionTransactionalHandler, transactionalHandler } from '../../src/consumer/transactional-handler.js';
import type { RheoEvent } from '../../src/core/types.js';
import { fakeLease, fakeTransactionalBackend } from '../support/fake-settler.js';
import { thrown } from '../support/thrown.js';

/*
 * The transactional wrappers of both consume modes against a backend whose
 * transactions only record what was asked of them: what runs in the
 * transaction, when it commits or rolls back, and what the consumer is told
 * (test/postgres/transactional-consume and partition-transactions run them
 * against PostgreSQL).
 */

const lease = { ...fakeLease(3), attempt: 2 };

function leaseContext(signal: AbortSignal = new AbortController().signal): HandlerContext<{ n: number }> {
  return { lease, attempt: lease.attempt, signal };
}

/** What the consumer reads from a wrapped handler's answer. */
function settlement(outcome: HandlerOutcome): unknown {
  expect(outcome).toBeInstanceOf(SettledInTransaction);
  return (outcome as unknown as SettledInTransaction).settlement;
}

const noBegin = { name: 'plain', capabilities: { transactions: false } } as unknown as Backend;

describe('transactionalHandler (competing consumers)', () => {
  it('refuses a backend without beginTransaction, naming it', () => {
    const error = thrown(() => transactionalHandler(noBegin, () => 'ack'));
    expect(error.code).toBe('unsupported');
    expect(error.message).toBe('the plain backend has no beginTransaction()');
  });

  it('an ack settles in the transaction and commits with the writes; the handler gets the client and the outer context', async () => {
    const { backend, log } = fakeTransactionalBackend();
    const outer = leaseContext();
    let seen: HandlerContext<{ n: number }> | null = null;
    const wrapped = transactionalHandler<{ n: number }>(backend, async (event, context) => {
      seen = context;
      await context.client!.query('insert', [event.sequence]);
    });
    const outcome = await wrapped(lease.event, outer);
    expect(settlement(outcome)).toEqual({ kind: 'committed', settle: 'ack', reason: null });
    expect(log.calls).toEqual(['begin 1', 'settle 1 ack', 'commit 1']);
    expect(log.ops).toEqual([expect.objectContaining({ kind: 'ack', partition: 0, sequence: 3, leaseId: lease.leaseId })]);
    expect(seen!.lease).toBe(lease);
    expect(seen!.attempt).toBe(2);
    expect(seen!.signal).toBe(outer.signal);
    expect(await seen!.client!.query('x')).toEqual({ tx: 1 });
  });

  it('a reject settles as a reject with its reason in the transaction', async () => {
    const { backend, log } = fakeTransactionalBackend();
    const outcome = await transactionalHandler(backend, () => ({ reject: 'poison' }))(lease.event, leaseContext());
    expect(settlement(outcome)).toEqual({ kind: 'committed', settle: 'reject', reason: 'poison' });
    expect(log.calls).toEqual(['begin 1', 'settle 1 reject', 'commit 1']);
    expect(log.ops).toEqual([expect.objectContaining({ kind: 'reject', reason: 'poison' })]);
  });

  it('a throw rolls back and throws on; a retry or an invalid outcome rolls back and is returned as it was', async () => {
    const boom = new Error('boom');
    const threw = fakeTransactionalBackend();
    await expect(
      transactionalHandler(threw.backend, () => {
        throw boom;
      })(lease.event, leaseContext()),
    ).rejects.toBe(boom);
    expect(threw.log.calls).toEqual(['begin 1', 'rollback 1']);

    for (const outcome of [{ retry: 'later', delayMs: 5 }, 42]) {
      const { backend, log } = fakeTransactionalBackend();
      expect(await transactionalHandler(backend, () => outcome as HandlerOutcome)(lease.event, leaseContext())).toBe(outcome);
      expect(log.calls).toEqual(['begin 1', 'rollback 1']);
    }
  });

  it('a run already cut short (its signal aborted) rolls back even an ack', async () => {
    const { backend, log } = fakeTransactionalBackend();
    const controller = new AbortController();
    const outcome = await transactionalHandler(backend, () => {
      controller.abort();
      return 'ack' as const;
    })(lease.event, leaseContext(controller.signal));
    expect(outcome).toBe('ack');
    expect(log.calls).toEqual(['begin 1', 'rollback 1']);
  });

  it('a settle refused, failing or answering nothing rolls back and reports the lease uncommitted', async () => {
    const stale = new RheoError('stale_lease', 'gone');
    const refused = fakeTransactionalBackend({ settle: () => Promise.resolve([{ ok: false, error: stale }]) });
    expect(settlement(await transactionalHandler(refused.backend, () => 'ack')(lease.event, leaseContext()))).toEqual({ kind: 'uncommitted', error: stale });
    expect(refused.log.calls).toEqual(['begin 1', 'settle 1 ack', 'rollback 1']);

    const unavailable = new RheoError('backend_unavailable', 'connection lost');
    const failed = fakeTransactionalBackend({ settle: () => Promise.reject(unavailable) });
    expect(settlement(await transactionalHandler(failed.backend, () => 'ack')(lease.event, leaseContext()))).toEqual({ kind: 'uncommitted', error: unavailable });
    expect(failed.log.calls).toEqual(['begin 1', 'settle 1 ack', 'rollback 1']);

    const silent = fakeTransactionalBackend({ settle: () => Promise.resolve([]) });
    const answer = settlement(await transactionalHandler(silent.backend, () => 'ack')(lease.event, leaseContext())) as { error: RheoError };
    expect(answer.error).toMatchObject({ code: 'internal', message: 'settle returned no result' });
    expect(silent.log.calls).toEqual(['begin 1', 'settle 1 ack', 'rollback 1']);
  });

  it('a failed COMMIT is uncommitted with its error; one that is not a RheoError becomes internal with the cause', async () => {
    const ambiguous = new RheoError('ambiguous', 'reply lost');
    const lost = fakeTransactionalBackend({ commit: () => Promise.reject(ambiguous) });
    expect(settlement(await transactionalHandler(lost.backend, () => 'ack')(lease.event, leaseContext()))).toEqual({ kind: 'uncommitted', error: ambiguous });
    expect(lost.log.calls).toEqual(['begin 1', 'settle 1 ack', 'commit 1']);

    const cause = new TypeError('socket closed');
    const odd = fakeTransactionalBackend({ commit: () => Promise.reject(cause) });
    const { error } = settlement(await transactionalHandler(odd.backend, () => 'ack')(lease.event, leaseContext())) as { error: RheoError };
    expect(error).toBeInstanceOf(RheoError);
    expect(error).toMatchObject({ code: 'internal', message: 'transaction failed: socket closed' });
    expect(error.cause).toBe(cause);
    const text = fakeTransactionalBackend({ commit: () => Promise.reject('down') });
    expect((settlement(await transactionalHandler(text.backend, () => 'ack')(lease.event, leaseContext())) as { error: RheoError }).error.message).toBe(
      'transaction failed: down',
    );
    const nothing = fakeTransactionalBackend({ commit: () => Promise.reject(null) });
    expect((settlement(await transactionalHandler(nothing.backend, () => 'ack')(lease.event, leaseContext())) as { error: RheoError }).error.message).toBe(
      'transaction failed: null',
    );
  });
});

describe('partitionTransactionalHandler (partition ownership)', () => {
  const target = { stream: 's', group: 'g' };
  const event: RheoEvent<{ n: number }> = { ...lease.event, partition: 2, sequence: 9 };

  function partitionContext(signal: AbortSignal = new AbortController().signal): PartitionHandlerContext {
    return { attempt: 3, partition: 2, generation: 7, memberId: 'm', signal };
  }

  const ok = () => Promise.resolve([{ ok: true as const }]);

  it('refuses a backend without beginTransaction, naming it', () => {
    const error = thrown(() => partitionTransactionalHandler(noBegin, target, () => 'ack'));
    expect(error.code).toBe('unsupported');
    expect(error.message).toBe('the plain backend has no beginTransaction()');
  });

  it("an ack commits the partition's offset up to the event, fenced by the generation, with the writes", async () => {
    const { backend, log } = fakeTransactionalBackend({ offsets: ok });
    const outer = partitionContext();
    let seen: PartitionHandlerContext | null = null;
    const outcome = await partitionTransactionalHandler<{ n: number }>(backend, target, (_e, context) => {
      seen = context;
    })(event, outer);
    expect(settlement(outcome)).toEqual({ kind: 'committed', settle: 'ack', reason: null });
    expect(log.calls).toEqual(['begin 1', 'offsets 1 9', 'commit 1']);
    expect(log.offsets).toEqual([{ stream: 's', group: 'g', partition: 2, memberId: 'm', generation: 7, upTo: 9, deadLetters: [], once: true }]);
    expect(seen).toMatchObject({ attempt: 3, partition: 2, generation: 7, memberId: 'm' });
    expect(seen!.signal).toBe(outer.signal);
    expect(await seen!.client!.query('x')).toEqual({ tx: 1 });
  });

  it('a reject commits the offset with the dead letter of the event, its attempt and reason', async () => {
    const { backend, log } = fakeTransactionalBackend({ offsets: ok });
    const outcome = await partitionTransactionalHandler(backend, target, () => ({ reject: 'poison' }))(event, partitionContext());
    expect(settlement(outcome)).toEqual({ kind: 'committed', settle: 'reject', reason: 'poison' });
    expect(log.offsets[0]!.deadLetters).toEqual([{ sequence: 9, attempt: 3, reason: 'poison' }]);
  });

  it('a throw rolls back and throws on; a retry or an aborted run rolls back and returns the outcome', async () => {
    const boom = new Error('boom');
    const threw = fakeTransactionalBackend({ offsets: ok });
    await expect(
      partitionTransactionalHandler(threw.backend, target, () => {
        throw boom;
      })(event, partitionContext()),
    ).rejects.toBe(boom);
    expect(threw.log.calls).toEqual(['begin 1', 'rollback 1']);

    const retry = fakeTransactionalBackend({ offsets: ok });
    const later = { retry: 'later' };
    expect(await partitionTransactionalHandler(retry.backend, target, () => later)(event, partitionContext())).toBe(later);
    expect(retry.log.calls).toEqual(['begin 1', 'rollback 1']);

    const aborted = fakeTransactionalBackend({ offsets: ok });
    expect(await partitionTransactionalHandler(aborted.backend, target, () => 'ack')(event, partitionContext(AbortSignal.abort()))).toBe('ack');
    expect(aborted.log.calls).toEqual(['begin 1', 'rollback 1']);
  });

  it('a BEGIN that fails is uncommitted, and the handler never runs', async () => {
    const down = new RheoError('backend_unavailable', 'no connection');
    const { backend } = fakeTransactionalBackend({ beginError: down });
    let ran = false;
    const outcome = await partitionTransactionalHandler(backend, target, () => void (ran = true))(event, partitionContext());
    expect(settlement(outcome)).toEqual({ kind: 'uncommitted', error: down });
    expect(ran).toBe(false);
  });

  it('a backend whose transactions cannot commit an offset rolls back and says so', async () => {
    const { backend, log } = fakeTransactionalBackend();
    const { error } = settlement(await partitionTransactionalHandler(backend, target, () => 'ack')(event, partitionContext())) as { error: RheoError };
    expect(error).toMatchObject({ code: 'unsupported', message: 'the fake-tx backend cannot commit a partition offset in a transaction' });
    expect(log.calls).toEqual(['begin 1', 'rollback 1']);
  });

  it("a commit refused as stale_generation rolls back the writes; one that answers nothing is internal", async () => {
    const stale = new RheoError('stale_generation', 'moved on');
    const refused = fakeTransactionalBackend({ offsets: () => Promise.resolve([{ ok: false, error: stale }]) });
    expect(settlement(await partitionTransactionalHandler(refused.backend, target, () => 'ack')(event, partitionContext()))).toEqual({
      kind: 'uncommitted',
      error: stale,
    });
    expect(refused.log.calls).toEqual(['begin 1', 'offsets 1 9', 'rollback 1']);

    const silent = fakeTransactionalBackend({ offsets: () => Promise.resolve([]) });
    const { error } = settlement(await partitionTransactionalHandler(silent.backend, target, () => 'ack')(event, partitionContext())) as { error: RheoError };
    expect(error).toMatchObject({ code: 'internal', message: 'commit returned no result' });
  });

  it('a once commit refused as already_exists (an earlier run whose COMMIT answer was lost committed) rolls back and counts as committed', async () => {
    const done = new RheoError('already_exists', 'already committed up to 9');
    const { backend, log } = fakeTransactionalBackend({ offsets: () => Promise.resolve([{ ok: false, error: done }]) });
    const outcome = await partitionTransactionalHandler(backend, target, () => 'ack')(event, partitionContext());
    expect(settlement(outcome)).toEqual({ kind: 'committed', settle: 'ack', reason: null });
    expect(log.calls).toEqual(['begin 1', 'offsets 1 9', 'rollback 1']);
  });
});
