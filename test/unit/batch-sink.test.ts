import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import type { SettleOutcome } from '../../src/core/backend.js';
import { RheoError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/types.js';
import { attachTelemetry, type RheoTelemetry } from '../../src/observability/telemetry.js';
import { createBatchSink, type BatchContext, type BatchErrorInfo, type BatchOutcome } from '../../src/sinks/batch-sink.js';
import type { SettleErrorInfo, SinkLeaseLostInfo } from '../../src/runtime/lease-outcome.js';
import { FakeSettler, fakeLease, fakeTransactionalBackend, type FakeTransactionOptions } from '../support/fake-settler.js';
import { until } from '../streams/support/wait.js';

type L = Lease<{ n: number }>;

const leases = (n: number): L[] => Array.from({ length: n }, (_, i) => fakeLease(i + 1));

/** A producer as `transaction: true` needs it: a backend that can begin transactions, and `confirm`. */
function transactional(options: FakeTransactionOptions = {}): { producer: FakeSettler; log: ReturnType<typeof fakeTransactionalBackend>['log'] } {
  const producer = new FakeSettler();
  const { backend, log } = fakeTransactionalBackend(options);
  producer.backend = backend;
  return { producer, log };
}

/** Runs `batch` through a transactional batch sink (one batch of all of them) and collects its events. */
async function runTransactional(
  producer: FakeSettler,
  batch: L[],
  handler: (leases: L[], context: BatchContext) => BatchOutcome | Promise<BatchOutcome>,
): Promise<{ errors: unknown[]; settleErrors: SettleErrorInfo<unknown>[]; lost: SinkLeaseLostInfo<unknown>[] }> {
  const sink = createBatchSink<{ n: number }>({ producer: producer.settler, transaction: true, batchSize: batch.length, handler });
  const errors: unknown[] = [];
  const settleErrors: SettleErrorInfo<unknown>[] = [];
  const lost: SinkLeaseLostInfo<unknown>[] = [];
  sink.on('batch-error', (info) => errors.push(info.error));
  sink.on('settle-error', (info) => settleErrors.push(info));
  sink.on('lease-lost', (info) => lost.push(info));
  await pipeline(Readable.from(batch), sink);
  return { errors, settleErrors, lost };
}

const rolledBack = (why: string): { kind: 'nack'; reason: string; delayMs: number } => ({
  kind: 'nack',
  reason: `rolled back with its batch: ${why}`,
  delayMs: 0,
});

describe('batch sink with transaction: true', () => {
  it('settles acks and rejects inside the transaction, commits, and confirms every lease', async () => {
    const { producer, log } = transactional();
    const contexts: BatchContext[] = [];
    const { errors } = await runTransactional(producer, leases(3), (_batch, context) => {
      contexts.push(context);
      return ['ack', { reject: 'poison' }, 'ack'];
    });
    expect(log.calls).toEqual(['begin 1', 'settle 1 ack,reject,ack', 'commit 1']);
    expect(log.ops.map((op) => [op.kind, op.sequence, 'reason' in op ? op.reason : null])).toEqual([
      ['ack', 1, null],
      ['reject', 2, 'poison'],
      ['ack', 3, null],
    ]);
    expect(await contexts[0]!.client!.query('select 1')).toEqual({ tx: 1 });
    expect(producer.confirmed).toEqual(['lease-1', 'lease-2', 'lease-3']);
    expect(producer.settles).toEqual([]); // nothing settled outside the transaction
    expect(errors).toEqual([]);
  });

  it('a retry in the batch rolls everything back: the retried lease keeps its nack, the others are nacked saying why', async () => {
    const { producer, log } = transactional();
    await runTransactional(producer, leases(3), () => ['ack', { retry: 'later', delayMs: 500 }, { reject: 'poison' }]);
    expect(log.calls).toEqual(['begin 1', 'rollback 1']);
    const why = 'another lease of the batch was retried';
    expect(producer.settles).toEqual([
      { sequence: 1, ...rolledBack(why) },
      { kind: 'nack', sequence: 2, reason: 'later', delayMs: 500 },
      { sequence: 3, ...rolledBack(why) },
    ]);
    expect(producer.confirmed).toEqual([]);
  });

  it('a throw rolls back before the nacks and reports batch-error; the context carries no client without a transaction', async () => {
    const { producer, log } = transactional();
    const failure = new Error('warehouse down');
    const { errors } = await runTransactional(producer, leases(2), () => {
      throw failure;
    });
    expect(log.calls).toEqual(['begin 1', 'rollback 1']);
    expect(errors).toEqual([failure]);
    expect(producer.settles).toEqual([
      { kind: 'nack', sequence: 1, reason: 'warehouse down', delayMs: 0 },
      { kind: 'nack', sequence: 2, reason: 'warehouse down', delayMs: 0 },
    ]);

    const plain = new FakeSettler();
    const contexts: BatchContext[] = [];
    await pipeline(
      Readable.from(leases(1)),
      createBatchSink({ producer: plain.settler, batchSize: 1, handler: (_batch, context) => void contexts.push(context) }),
    );
    expect('client' in contexts[0]!).toBe(false);
    expect(contexts[0]!.reason).toBe('size');
  });

  it('a settle call that throws rolls back and nacks every lease with its message', async () => {
    const { producer, log } = transactional({ settle: () => Promise.reject(new Error('connection reset')) });
    await runTransactional(producer, leases(2), () => 'ack');
    expect(log.calls).toEqual(['begin 1', 'settle 1 ack,ack', 'rollback 1']);
    const nack = rolledBack('its settle failed: connection reset');
    expect(producer.settles).toEqual([
      { sequence: 1, ...nack },
      { sequence: 2, ...nack },
    ]);
    expect(producer.confirmed).toEqual([]);
  });

  it('a malformed lease in a transactional batch rolls the transaction back instead of leaving it open', async () => {
    const { producer, log } = transactional();
    const batch = [fakeLease(1), { ...fakeLease(2), leaseId: 7 as unknown as string }];
    await runTransactional(producer, batch, () => 'ack');
    // No settle was sent in the transaction, and it ended: its connection is given back.
    expect(log.calls).toEqual(['begin 1', 'rollback 1']);
    expect(producer.settles[0]).toMatchObject({ sequence: 1, kind: 'nack', reason: expect.stringContaining('its settle failed') });
    expect(producer.confirmed).toEqual([]);
  });

  it('a stale lease rolls the batch back: it is confirmed and reported lost, the others are nacked', async () => {
    const stale = new RheoError('stale_lease', 'lease lease-2 is no longer held');
    const { producer, log } = transactional({
      settle: (ops) => Promise.resolve(ops.map((op): SettleOutcome => (op.sequence === 2 ? { ok: false, error: stale } : { ok: true }))),
    });
    const { lost, settleErrors } = await runTransactional(producer, leases(3), () => 'ack');
    expect(log.calls).toEqual(['begin 1', 'settle 1 ack,ack,ack', 'rollback 1']);
    expect(lost.map((l) => [l.lease.event.sequence, l.error])).toEqual([[2, stale]]);
    expect(producer.confirmed).toEqual(['lease-2']);
    const nack = rolledBack('lease lease-2 is no longer held');
    expect(producer.settles).toEqual([
      { sequence: 1, ...nack },
      { sequence: 3, ...nack },
    ]);
    expect(settleErrors).toEqual([]);
  });

  it('another refusal rolls back every lease with its message, none reported lost', async () => {
    const refused = new RheoError('internal', 'constraint violated');
    const { producer } = transactional({
      settle: (ops) => Promise.resolve(ops.map((op): SettleOutcome => (op.sequence === 1 ? { ok: false, error: refused } : { ok: true }))),
    });
    const { lost } = await runTransactional(producer, leases(2), () => 'ack');
    expect(lost).toEqual([]);
    expect(producer.confirmed).toEqual([]);
    const nack = rolledBack('constraint violated');
    expect(producer.settles).toEqual([
      { sequence: 1, ...nack },
      { sequence: 2, ...nack },
    ]);
  });

  it('too few answers from the settle roll back with "the settle returned no result"', async () => {
    const { producer, log } = transactional({ settle: () => Promise.resolve([{ ok: true }]) });
    await runTransactional(producer, leases(2), () => 'ack');
    expect(log.calls).toEqual(['begin 1', 'settle 1 ack,ack', 'rollback 1']);
    const nack = rolledBack('the settle returned no result');
    expect(producer.settles).toEqual([
      { sequence: 1, ...nack },
      { sequence: 2, ...nack },
    ]);
  });

  it('a failed commit confirms every lease and reports settle-error with its op, sending nothing more', async () => {
    const ambiguous = new RheoError('ambiguous', 'connection lost during COMMIT');
    const { producer, log } = transactional({ commit: () => Promise.reject(ambiguous) });
    const { settleErrors } = await runTransactional(producer, leases(2), () => ['ack', { reject: 'bad' }]);
    expect(log.calls).toEqual(['begin 1', 'settle 1 ack,reject', 'commit 1']);
    expect(settleErrors.map((e) => [e.lease.event.sequence, e.op, e.error])).toEqual([
      [1, 'ack', ambiguous],
      [2, 'reject', ambiguous],
    ]);
    expect(producer.confirmed).toEqual(['lease-1', 'lease-2']);
    expect(producer.settles).toEqual([]);
  });

  it('a commit that fails with a plain error is reported as an internal RheoError naming it', async () => {
    const cause = new Error('socket closed');
    const { producer } = transactional({ commit: () => Promise.reject(cause) });
    const { settleErrors } = await runTransactional(producer, leases(1), () => 'ack');
    expect(settleErrors).toHaveLength(1);
    const error = settleErrors[0]!.error;
    expect(error).toBeInstanceOf(RheoError);
    expect([error.code, error.message, error.cause]).toEqual(['internal', 'commit failed: socket closed', cause]);
  });

  it('a batch whose handler finishes after the sink was destroyed rolls back and releases its leases', async () => {
    const { producer, log } = transactional();
    let finish!: () => void;
    const gate = new Promise<void>((resolve) => (finish = resolve));
    const sink = createBatchSink<{ n: number }>({ producer: producer.settler, transaction: true, batchSize: 2, handler: () => gate });
    sink.on('error', () => {});
    for (const lease of leases(2)) sink.write(lease);
    await until(() => sink.activeCount === 1, 'the batch runs');
    sink.destroy();
    finish();
    await until(() => producer.settles.length === 2, 'both leases are released');
    expect(log.calls).toEqual(['begin 1', 'rollback 1']);
    expect(producer.settles).toEqual([
      { kind: 'release', sequence: 1 },
      { kind: 'release', sequence: 2 },
    ]);
    expect(producer.confirmed).toEqual([]);
  });

  it('refuses what cannot run a transaction, naming why', () => {
    const handler = (): void => {};
    const plain = new FakeSettler();
    expect(() => createBatchSink({ producer: plain.settler, handler, transaction: 'yes' as never })).toThrow(
      expect.objectContaining({ code: 'invalid_argument', message: expect.stringContaining('transaction must be a boolean, got string') }),
    );
    expect(() => createBatchSink({ producer: plain.settler, handler, transaction: true })).toThrow(
      expect.objectContaining({ code: 'invalid_argument', message: expect.stringContaining('needs a RheoProducer') }),
    );
    const noConfirm = { backend: transactional().producer.backend };
    expect(() => createBatchSink({ producer: noConfirm as never, handler, transaction: true })).toThrow(
      expect.objectContaining({ code: 'invalid_argument', message: expect.stringContaining('needs a RheoProducer') }),
    );
    const incapable = new FakeSettler();
    incapable.backend = { name: 'plain', capabilities: { transactions: false } } as never;
    expect(() => createBatchSink({ producer: incapable.settler, handler, transaction: true })).toThrow(
      expect.objectContaining({
        code: 'unsupported',
        message: 'createBatchSink({ transaction: true }) needs the "transactions" capability, which the plain backend does not have',
      }),
    );
    const noBegin = new FakeSettler();
    noBegin.backend = { name: 'odd', capabilities: { transactions: true } } as never;
    expect(() => createBatchSink({ producer: noBegin.settler, handler, transaction: true })).toThrow(
      expect.objectContaining({ code: 'unsupported', message: 'the odd backend has no beginTransaction()' }),
    );
    // false (and absent) mean no transaction: a producer without a backend is fine.
    expect(() => createBatchSink({ producer: plain.settler, handler, transaction: false })).not.toThrow();
  });
});

describe('batch sink', () => {
  it('refuses out-of-range tuning with messages naming the option', () => {
    const producer = new FakeSettler();
    const handler = (): void => {};
    expect(() => createBatchSink({ producer: producer.settler, handler, batchSize: 0 })).toThrow(/batchSize/);
    expect(() => createBatchSink({ producer: producer.settler, handler, batchTimeoutMs: 0 })).toThrow(/batchTimeoutMs/);
    expect(() => createBatchSink({ producer: producer.settler, handler, concurrency: 0 })).toThrow(/concurrency/);
    expect(() => createBatchSink({ handler } as never)).toThrow(/createBatchSink expects \{ producer, handler/);
    const sink = createBatchSink({ producer: producer.settler, handler });
    expect([sink.batchSize, sink.batchTimeoutMs]).toEqual([100, 1000]);
  });

  it('takes its handler as `handler` only: the removed older name `handleBatch` is no handler', () => {
    const producer = new FakeSettler();
    expect(() => createBatchSink({ producer: producer.settler, handleBatch: () => {} } as never)).toThrow(
      expect.objectContaining({ code: 'invalid_argument', message: expect.stringMatching(/^createBatchSink options: unknown option "handleBatch" \(known: producer, handler,/) }),
    );
  });

  it('an outcome list of the wrong length, or an outcome that is no list, nacks the batch and names what came back', async () => {
    for (const [outcome, got] of [
      [['ack'], 'an array of 1'],
      // As long as the batch: only an array may be read lease by lease.
      ['ok', 'string'],
    ] as const) {
      const producer = new FakeSettler();
      const errors: BatchErrorInfo<unknown>[] = [];
      const sink = createBatchSink({ producer: producer.settler, batchSize: 2, handler: () => outcome as never });
      sink.on('batch-error', (info) => errors.push(info));
      await pipeline(Readable.from(leases(2)), sink);
      const message = `a batch handler must return nothing, 'ack' or one outcome per lease (2), got ${got}`;
      expect(errors.map((e) => [(e.error as Error).message, e.leases.length])).toEqual([[message, 2]]);
      expect(errors[0]!.error).toBeInstanceOf(TypeError);
      expect(producer.settles).toEqual([
        { kind: 'nack', sequence: 1, reason: message, delayMs: 0 },
        { kind: 'nack', sequence: 2, reason: message, delayMs: 0 },
      ]);
    }
  });

  it("'ack' and per-lease invalid outcomes settle lease by lease", async () => {
    const producer = new FakeSettler();
    let batch = 0;
    const sink = createBatchSink({
      producer: producer.settler,
      batchSize: 2,
      handler: () => (++batch === 1 ? 'ack' : [{ retyr: 'x' } as never, undefined]),
    });
    await pipeline(Readable.from(leases(4)), sink);
    expect(producer.settles.map((s) => [s.sequence, s.kind])).toEqual([
      [1, 'ack'],
      [2, 'ack'],
      [3, 'nack'],
      [4, 'ack'],
    ]);
    expect(producer.settles[2]!.reason).toMatch(/^invalid handler outcome: handler returned an object with keys \["retyr"\]/);
  });

  it('skips leases lost while their batch was open, and a batch with none left never reaches the handler', async () => {
    const producer = new FakeSettler();
    const batches: number[][] = [];
    const sink = createBatchSink<{ n: number }>({
      producer: producer.settler,
      batchSize: 2,
      handler: (batch) => void batches.push(batch.map((l) => l.event.sequence)),
    });
    const [a, b, c, d] = leases(4);
    sink.write(a);
    producer.lose(a!, new RheoError('stale_lease', 'gone'));
    sink.write(b);
    producer.lose(c!, new RheoError('stale_lease', 'gone'));
    producer.lose(d!, new RheoError('stale_lease', 'gone'));
    sink.write(c);
    sink.write(d);
    // The sink stops listening by the time it finishes (not only once it is destroyed after).
    const listening = await new Promise<number>((resolve) => sink.end(() => resolve(producer.listenerCount('lease-lost'))));
    expect(listening).toBe(0);
    expect(batches).toEqual([[2]]);
    expect(producer.settles).toEqual([{ kind: 'ack', sequence: 2 }]);
  });

  it('a lost id is forgotten once it was skipped', async () => {
    const producer = new FakeSettler();
    const batches: number[][] = [];
    const sink = createBatchSink<{ n: number }>({
      producer: producer.settler,
      batchSize: 1,
      handler: (batch) => void batches.push(batch.map((l) => l.event.sequence)),
    });
    const [a] = leases(1);
    producer.lose(a!, new RheoError('stale_lease', 'gone'));
    sink.write(a);
    sink.write(a);
    await new Promise<void>((resolve) => sink.end(resolve));
    expect(batches).toEqual([[1]]);
  });

  it('destroying the sink aborts the signal with its reason; a handler that throws then releases instead of nacking', async () => {
    const producer = new FakeSettler();
    const signals: AbortSignal[] = [];
    let fail!: (error: Error) => void;
    const sink = createBatchSink({
      producer: producer.settler,
      batchSize: 1,
      handler: (_batch, { signal }) => {
        signals.push(signal);
        return new Promise<void>((_resolve, reject) => (fail = reject));
      },
    });
    const errors: unknown[] = [];
    sink.on('batch-error', (info) => errors.push(info.error));
    sink.on('error', () => {});
    const [a, b] = leases(2);
    sink.write(a);
    sink.write(b);
    await until(() => sink.activeCount === 1 && sink.queuedCount === 1, 'one batch runs, one waits');
    expect(producer.listenerCount('lease-lost')).toBe(1);
    const reason = new Error('stop');
    sink.destroy(reason);
    expect(signals[0]!.aborted).toBe(true);
    expect(signals[0]!.reason).toBe(reason);
    expect(producer.listenerCount('lease-lost')).toBe(0);
    fail(new Error('aborted'));
    await until(() => producer.settles.length === 2, 'both leases are released');
    expect(producer.settles).toEqual([
      { kind: 'release', sequence: 2 },
      { kind: 'release', sequence: 1 },
    ]);
    expect(errors).toEqual([]);
    expect(signals).toHaveLength(1); // the waiting batch never started
  });

  it('destroy without an error aborts with "batch sink destroyed" and releases the open batch', async () => {
    const producer = new FakeSettler();
    let signal: AbortSignal | null = null;
    const sink = createBatchSink({
      producer: producer.settler,
      batchSize: 2,
      handler: (_batch, context) => {
        signal = context.signal;
        return new Promise<void>(() => {}); // never settles
      },
    });
    const [a, b, c, d] = leases(4);
    for (const lease of [a, b, c, d]) sink.write(lease);
    await until(() => sink.activeCount === 1 && sink.queuedCount === 1, 'one batch runs, one waits');
    sink.write(fakeLease(5));
    await until(() => sink.openBatchLength === 1, 'one lease waits in the open batch');
    sink.destroy();
    expect(signal!.aborted).toBe(true);
    expect((signal!.reason as Error).message).toBe('batch sink destroyed');
    await until(() => producer.settles.length === 3, 'the open and the waiting batch are released');
    expect(producer.settles).toEqual([
      { kind: 'release', sequence: 5 },
      { kind: 'release', sequence: 3 },
      { kind: 'release', sequence: 4 },
    ]);
    expect(sink.openBatchLength).toBe(0);
    expect(sink.queuedCount).toBe(0);
  });

  it('end waits for every batch and its settles; the next batch starts when one finishes, never above concurrency', async () => {
    const producer = new FakeSettler();
    const gates: Array<() => void> = [];
    const sink = createBatchSink({
      producer: producer.settler,
      batchSize: 1,
      concurrency: 2,
      handler: () => new Promise<void>((resolve) => gates.push(resolve)),
    });
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    producer.answer = () => answered;
    for (const lease of leases(3)) sink.write(lease);
    let ended = false;
    sink.end(() => (ended = true));
    await until(() => gates.length === 2, 'two batches run');
    expect([sink.activeCount, sink.queuedCount]).toEqual([2, 1]);
    gates[0]!();
    await until(() => gates.length === 3, 'the third batch starts');
    expect(sink.activeCount).toBe(2);
    gates[1]!();
    gates[2]!();
    await until(() => producer.settles.length === 3, 'three acks sent');
    for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => setImmediate(resolve));
    expect(ended).toBe(false); // the acks are not answered yet
    answer();
    await until(() => ended, 'the sink finishes');
    expect(sink.activeCount).toBe(0);
  });

  it('a failed settle is a settle-error (a non-RheoError is wrapped as internal), a stale one lease-lost', async () => {
    const producer = new FakeSettler();
    const cause = new Error('socket hang up');
    const stale = new RheoError('stale_lease', 'gone');
    producer.answer = (s) => (s.sequence === 1 ? Promise.reject(cause) : s.sequence === 2 ? Promise.reject(stale) : Promise.resolve());
    const sink = createBatchSink({ producer: producer.settler, batchSize: 3, handler: () => {} });
    const settleErrors: SettleErrorInfo<unknown>[] = [];
    const lost: SinkLeaseLostInfo<unknown>[] = [];
    sink.on('settle-error', (info) => settleErrors.push(info));
    sink.on('lease-lost', (info) => lost.push(info));
    await pipeline(Readable.from(leases(3)), sink);
    expect(settleErrors.map((e) => [e.lease.event.sequence, e.op, e.error.code, e.error.message, e.error.cause])).toEqual([
      [1, 'ack', 'internal', 'settle failed: socket hang up', cause],
    ]);
    expect(lost.map((l) => [l.lease.event.sequence, l.error])).toEqual([[2, stale]]);
  });

  it('a batch that closes while the sink is idle starts at once, without waiting for the end of the stream', async () => {
    const producer = new FakeSettler();
    const handled: number[] = [];
    const sink = createBatchSink<{ n: number }>({
      producer: producer.settler,
      batchSize: 1,
      handler: (batch) => void handled.push(batch[0]!.event.sequence),
    });
    sink.write(fakeLease(1));
    await until(() => handled.length === 1, 'the first batch is handled');
    sink.write(fakeLease(2));
    await until(() => handled.length === 2, 'the second batch is handled');
    sink.write(fakeLease(3));
    sink.write(fakeLease(4));
    await until(() => handled.length === 4, 'two batches closed together are handled');
    expect(handled).toEqual([1, 2, 3, 4]);
    await new Promise<void>((resolve) => sink.end(resolve));
  });

  it('destroy still closes the sink when a settle-error listener throws while it releases', async () => {
    const producer = new FakeSettler();
    producer.answer = () => Promise.reject(new RheoError('backend_unavailable', 'down'));
    const sink = createBatchSink({ producer: producer.settler, batchSize: 5, handler: () => {} });
    sink.on('settle-error', () => {
      throw new Error('listener bug');
    });
    sink.on('error', () => {});
    sink.write(fakeLease(1));
    await until(() => sink.openBatchLength === 1, 'the lease waits in the open batch');
    const closed = new Promise<void>((resolve) => sink.once('close', () => resolve()));
    sink.destroy();
    await closed;
    expect(producer.settles).toEqual([{ kind: 'release', sequence: 1 }]);
  });

  it('reports each batch to telemetry: run around the handler, handled with the failure', async () => {
    const producer = new FakeSettler();
    const calls: string[] = [];
    const telemetry = {
      processBatch: (batch: L[]) => ({
        run: <R>(fn: () => R): R => {
          calls.push(`run ${batch.length}`);
          return fn();
        },
        handled: (failure?: unknown) => calls.push(failure === undefined ? 'handled' : `failed ${(failure as Error).message}`),
      }),
    } as unknown as RheoTelemetry;
    attachTelemetry(producer, telemetry);
    let batch = 0;
    const sink = createBatchSink({
      producer: producer.settler,
      batchSize: 2,
      handler: () => {
        calls.push('handler');
        if (++batch === 2) throw new Error('boom');
      },
    });
    sink.on('batch-error', () => {});
    await pipeline(Readable.from(leases(4)), sink);
    expect(calls).toEqual(['run 2', 'handler', 'handled', 'run 2', 'handler', 'failed boom']);
  });
});
