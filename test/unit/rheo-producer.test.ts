import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { Backend, FetchRequest, LeaseRef, RenewResult, SettleOp, SettleOutcome } from '../../src/core/backend.js';
import { ManualClock } from '../../src/core/clock.js';
import { RheoError } from '../../src/core/errors.js';
import type { Lease } from '../../src/core/types.js';
import type { ProducerOptions } from '../../src/producer/producer-options.js';
import { RheoProducer } from '../../src/producer/rheo-producer.js';
import type { LeaseSource } from '../../src/runtime/sources.js';
import { sleep, systemTimers } from '../../src/runtime/timers.js';
import { fakeLease } from '../support/fake-settler.js';
import { thrown } from '../support/thrown.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { turns } from '../support/turns.js';

/*
 * RheoProducer against a scripted lease source: every claim waits until the test
 * answers it, so the demand arithmetic, the poll and backoff waits, drain and
 * teardown can be driven one step at a time (the stream tests cover the same
 * producer end to end on real backends).
 */

type L = Lease<{ n: number }>;

interface PendingFetch {
  options: FetchRequest;
  resolve(leases: L[]): void;
  reject(error: unknown): void;
}

const POLL_MS = 200;
const LEASE_MS = 30_000;
const MAX_FETCH_BYTES = 1 << 20;

/** The store op a settle of `lease` becomes (the one shape every op has). */
function opOf(kind: SettleOp['kind'], lease: L, reason: string | null = null, delayMs = 0): SettleOp {
  const { stream, group, leaseId } = lease;
  return { stream, group, partition: lease.event.partition, sequence: lease.event.sequence, leaseId, kind, reason, delayMs } as SettleOp;
}

class ScriptedSource {
  readonly clock = new ManualClock(1_000_000);
  readonly timers = new ManualTimers(this.clock);
  readonly defaults = Object.freeze({ leaseMs: LEASE_MS, maxAttempts: 5, maxDemand: 8, pollMs: POLL_MS, maxFetchBytes: MAX_FETCH_BYTES });
  readonly fetches: PendingFetch[] = [];
  readonly settles: SettleOp[][] = [];
  readonly renews: Array<{ refs: LeaseRef[]; leaseMs: number }> = [];
  settleAnswer: (ops: SettleOp[]) => Promise<SettleOutcome[]> = (ops) => Promise.resolve(ops.map(() => ({ ok: true as const })));
  renewAnswer: (refs: LeaseRef[]) => Promise<RenewResult[]> = (refs) =>
    Promise.resolve(refs.map(() => ({ ok: true as const, expiresAt: new Date(this.clock.now() + LEASE_MS) })));
  readonly backend = { name: 'scripted', capabilities: { notifications: false } } as unknown as Backend;
  capabilities = { notifications: false };
  waitForAppend = (_stream: string, _ms: number, _signal: AbortSignal): Promise<boolean> => Promise.resolve(false);
  #next = 1;

  claim(_stream: string, _group: string, request: FetchRequest): Promise<L[]> {
    // A copy: the producer reuses its request object, and a test reads what each claim asked for.
    const options = { ...request };
    return new Promise<L[]>((resolve, reject) => this.fetches.push({ options, resolve, reject }));
  }

  settle(ops: SettleOp[]): Promise<SettleOutcome[]> {
    this.settles.push(ops);
    return this.settleAnswer(ops);
  }

  renew(refs: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    this.renews.push({ refs, leaseMs });
    return this.renewAnswer(refs);
  }

  /** `count` fresh leases, expiring `LEASE_MS` from now. */
  leases(count: number): L[] {
    return Array.from({ length: count }, () => {
      const lease = fakeLease(this.#next++);
      return { ...lease, expiresAt: new Date(this.clock.now() + LEASE_MS) };
    });
  }

  /** Answers the oldest unanswered fetch (the producer has one at a time). */
  answer(leases: L[]): void {
    const pending = this.fetches.at(-1);
    if (!pending) throw new Error('no fetch is waiting');
    pending.resolve(leases);
  }

  producer(options: Partial<ProducerOptions> = {}): RheoProducer<{ n: number }> {
    return new RheoProducer<{ n: number }>(this as unknown as LeaseSource, {
      stream: 's',
      group: 'g',
      timers: this.timers,
      random: () => 0,
      ...options,
    });
  }
}

/** A producer on a fresh scripted source whose first fetch answered `count` leases. */
async function started(count: number, options: Partial<ProducerOptions> = {}): Promise<{ source: ScriptedSource; producer: RheoProducer<{ n: number }> }> {
  const source = new ScriptedSource();
  const producer = source.producer(options);
  producer.read(0);
  source.answer(source.leases(count));
  await turns();
  return { source, producer };
}

/** Reads everything buffered, in paused mode. */
function readAll(producer: RheoProducer<{ n: number }>): L[] {
  const read: L[] = [];
  for (let lease = producer.read() as L | null; lease !== null; lease = producer.read() as L | null) read.push(lease);
  return read;
}

function invalid(fn: () => unknown): string {
  const error = thrown(fn);
  expect(error.code).toBe('invalid_argument');
  return error.message;
}

describe('RheoProducer options', () => {
  it('refuses options that are not an object, and bad names', () => {
    const source = new ScriptedSource();
    const build = (options: unknown) => () => new RheoProducer(source as unknown as LeaseSource, options as ProducerOptions);
    expect(invalid(build(null))).toBe('producer options must be an object with stream and group');
    expect(invalid(build('orders'))).toBe('producer options must be an object with stream and group');
    expect(invalid(build({ group: 'g' }))).toMatch(/stream/);
    expect(invalid(build({ stream: 's' }))).toMatch(/group/);
  });

  it('takes maxDemand, leaseMs and pollMs from the source defaults, and minDemand as a quarter of maxDemand', () => {
    const source = new ScriptedSource();
    const producer = source.producer();
    expect([producer.maxDemand, producer.minDemand, producer.leaseMs, producer.pollMs]).toEqual([8, 2, LEASE_MS, POLL_MS]);
    expect(source.producer({ maxDemand: 3 }).minDemand).toBe(1);
    expect(source.producer({ maxDemand: 100 }).minDemand).toBe(25);
    expect(producer.consumerId).toMatch(/^producer-[0-9a-f]{12}$/);
    expect(source.producer().consumerId).not.toBe(producer.consumerId);
    expect(source.producer({ consumerId: 'worker-1' }).consumerId).toBe('worker-1');
    expect(producer.timers).toBe(source.timers);
    expect(new RheoProducer(source as unknown as LeaseSource, { stream: 's', group: 'g' }).timers).toBe(systemTimers);
  });

  it('accepts every limit at its edge and refuses one past it, naming the option', () => {
    const source = new ScriptedSource();
    const ok = (options: Partial<ProducerOptions>): void => void source.producer(options);
    const refused = (options: Partial<ProducerOptions>): string => invalid(() => source.producer(options));
    ok({ maxDemand: 1, minDemand: 1 });
    ok({ maxDemand: 10_000 });
    expect(refused({ maxDemand: 0 })).toMatch(/^maxDemand/);
    expect(refused({ maxDemand: 10_001 })).toMatch(/^maxDemand/);
    ok({ leaseMs: 2 });
    ok({ leaseMs: 7 * 24 * 3600_000 });
    expect(refused({ leaseMs: 1 })).toMatch(/^leaseMs/);
    expect(refused({ leaseMs: 7 * 24 * 3600_000 + 1 })).toMatch(/^leaseMs/);
    ok({ pollMs: 1 });
    ok({ pollMs: 3600_000 });
    expect(refused({ pollMs: 0 })).toMatch(/^pollMs/);
    expect(refused({ pollMs: 3600_001 })).toMatch(/^pollMs/);
    ok({ maxDemand: 5, minDemand: 5 });
    expect(refused({ maxDemand: 5, minDemand: 6 })).toMatch(/^minDemand/);
    expect(refused({ minDemand: 0 })).toMatch(/^minDemand/);
    ok({ maxSettleBatch: 1 });
    ok({ maxSettleBatch: 10_000 });
    expect(refused({ maxSettleBatch: 0 })).toMatch(/^maxSettleBatch/);
    expect(refused({ maxSettleBatch: 10_001 })).toMatch(/^maxSettleBatch/);
    ok({ settleRetry: { maxRetries: 0, initialMs: 1, maxMs: 1 } });
    ok({ settleRetry: { maxRetries: 1000, initialMs: 3600_000, maxMs: 3600_000 } });
    expect(refused({ settleRetry: { maxRetries: -1 } })).toMatch(/^settleRetry\.maxRetries/);
    expect(refused({ settleRetry: { maxRetries: 1001 } })).toMatch(/^settleRetry\.maxRetries/);
    expect(refused({ settleRetry: { initialMs: 0 } })).toMatch(/^settleRetry\.initialMs/);
    expect(refused({ settleRetry: { initialMs: 3600_001 } })).toMatch(/^settleRetry\.initialMs/);
    expect(refused({ settleRetry: { maxMs: 0 } })).toMatch(/^settleRetry\.maxMs/);
    expect(refused({ settleRetry: { maxMs: 3600_001 } })).toMatch(/^settleRetry\.maxMs/);
    const shape = 'settleRetry must be an object { maxRetries?, initialMs?, maxMs? }';
    ok({ settleRetry: null as unknown as ProducerOptions['settleRetry'] }); // null is the default, as undefined
    expect(refused({ settleRetry: 3 as unknown as ProducerOptions['settleRetry'] })).toBe(shape);
    expect(refused({ consumerId: 7 as unknown as string })).toMatch(/^consumerId/);
  });

  it('sends the default maxSettleBatch of 500 settles per call', async () => {
    const source = new ScriptedSource();
    const producer = source.producer({ maxDemand: 1000, minDemand: 1000 });
    producer.read(0);
    const leases = source.leases(501);
    source.answer(leases);
    await turns();
    await Promise.all(leases.map((lease) => producer.ack(lease)));
    expect(source.settles.map((ops) => ops.length).sort((a, b) => b - a)).toEqual([500, 1]);
  });

  it('copies partitions, passes them normalised and the consumer id to every claim, and exposes the backend', async () => {
    const source = new ScriptedSource();
    const partitions = [3, 1];
    const producer = source.producer({ partitions, consumerId: 'w', leaseMs: 5_000 });
    partitions.push(7);
    expect(producer.partitions).toEqual([3, 1]);
    expect(producer.backend).toBe(source.backend);
    producer.read(0);
    expect(source.fetches[0]!.options).toEqual({ limit: 8, consumerId: 'w', leaseMs: 5_000, partitions: [1, 3], maxBytes: MAX_FETCH_BYTES });
    const allSource = new ScriptedSource();
    const all = allSource.producer();
    expect(all.partitions).toBeUndefined();
    all.read(0);
    expect(all.partitions).toBeUndefined();
    expect(allSource.fetches[0]!.options.partitions).toBeNull();
  });
});

describe('RheoProducer demand', () => {
  it('a short fetch waits pollMs before the next; a full one lets a confirm fetch again at once', async () => {
    const source = new ScriptedSource();
    const producer = source.producer({ maxDemand: 4, minDemand: 1 });
    producer.read(0);
    source.answer(source.leases(3)); // room was 4: caught up
    await turns();
    expect(source.fetches).toHaveLength(1);
    expect(source.timers.pendingDelays({ keepAlive: true })).toEqual([POLL_MS]);
    source.timers.advance(POLL_MS - 1);
    await turns();
    expect(source.fetches).toHaveLength(1);
    source.timers.advance(1);
    await turns();
    expect(source.fetches).toHaveLength(2);
    expect(source.fetches[1]!.options.limit).toBe(1);
    const read = readAll(producer); // read first: the next push then finds room in the buffer
    source.answer(source.leases(1)); // room was 1: full, so no wait, and no room left
    await turns();
    expect(source.timers.pendingDelays({ keepAlive: true })).toEqual([]);
    read.push(...readAll(producer));
    expect(read).toHaveLength(4);
    expect(producer.inflightCount).toBe(4);
    expect(producer.confirm(read[0]!.leaseId)).toBe(true);
    expect(producer.confirm(read[0]!.leaseId)).toBe(false);
    await turns();
    expect(source.fetches).toHaveLength(3);
    expect(source.fetches[2]!.options.limit).toBe(1);
  });

  it('a confirm that lands while the fetch loop winds down still starts the next fetch', async () => {
    const { source, producer } = await started(4, { maxDemand: 4, minDemand: 2 });
    readAll(producer);
    // The first confirm starts a loop that finds 1 free slot (< minDemand) and
    // returns; the second lands before that loop has finished, so only the
    // loop's own wind-down can notice the 2 free slots.
    producer.confirm('lease-1');
    producer.confirm('lease-2');
    await turns();
    expect(source.fetches).toHaveLength(2);
    expect(source.fetches[1]!.options.limit).toBe(2);
  });

  it('does not fetch below minDemand free slots, and fetches the whole room once it is reached', async () => {
    const { source, producer } = await started(6, { maxDemand: 6, minDemand: 3 });
    const read = readAll(producer);
    producer.confirm(read[0]!.leaseId);
    producer.confirm(read[1]!.leaseId);
    await turns();
    expect(source.fetches).toHaveLength(1);
    producer.confirm(read[2]!.leaseId);
    await turns();
    expect(source.fetches).toHaveLength(2);
    expect(source.fetches[1]!.options.limit).toBe(3);
  });

  it('stops asking once the buffer is full and nothing reads: a confirm then does not fetch', async () => {
    const { source, producer } = await started(2, { maxDemand: 2, minDemand: 1 });
    expect(producer.readableLength).toBe(2);
    producer.confirm('lease-1');
    await turns();
    expect(source.fetches).toHaveLength(1);
    readAll(producer); // Node asks for more once the buffer drains
    await turns();
    expect(source.fetches).toHaveLength(2);
  });

  it('an append notification cuts the poll short; a notification wait that fails counts as none', async () => {
    const source = new ScriptedSource();
    const waits: Array<{ ms: number; resolve(woken: boolean): void; reject(error: Error): void }> = [];
    source.capabilities = { notifications: true };
    source.waitForAppend = (_stream: string, ms: number) => new Promise<boolean>((resolve, reject) => waits.push({ ms, resolve, reject }));
    const producer = source.producer();
    producer.read(0);
    // Listening before the fetch, for twice the longest idle wait (maxPollMs, 5 × pollMs by default).
    expect(waits.map((w) => w.ms)).toEqual([2 * 5 * POLL_MS]);
    source.answer([]);
    await turns();
    expect(source.fetches).toHaveLength(1);
    waits[0]!.resolve(true); // an append: fetch again without waiting out the poll
    await turns();
    expect(source.fetches).toHaveLength(2);
    source.answer([]);
    await turns();
    waits[1]!.reject(new Error('LISTEN connection lost'));
    await turns();
    expect(source.fetches).toHaveLength(2); // still waiting for the poll
    source.timers.advance(POLL_MS);
    await turns();
    expect(source.fetches).toHaveLength(3);
    source.answer([]);
    await producer.close();
  });

  it('an empty fetch emits no fetched event and waits pollMs', async () => {
    const source = new ScriptedSource();
    const producer = source.producer();
    const fetched: unknown[] = [];
    producer.on('fetched', (info) => fetched.push(info));
    producer.read(0);
    source.answer([]);
    await turns();
    expect(fetched).toEqual([]);
    expect(source.fetches).toHaveLength(1);
    source.timers.advance(POLL_MS);
    await turns();
    expect(source.fetches).toHaveLength(2);
    source.answer(source.leases(2));
    await turns();
    expect(fetched).toEqual([{ count: 2, inflight: 2 }]);
  });
});

describe('RheoProducer fetch failures', () => {
  it('wraps a failure that is not a RheoError as internal, and backs off from min(pollMs, 100)', async () => {
    const failures: Array<{ error: RheoError; backoffMs: number }> = [];
    const source = new ScriptedSource();
    const producer = source.producer({ pollMs: 50 });
    producer.on('fetch-error', (info) => failures.push(info));
    producer.read(0);
    const cause = new Error('socket hang up');
    source.fetches[0]!.reject(cause);
    await turns();
    expect(failures[0]!.error).toMatchObject({ name: 'RheoError', code: 'internal', message: 'fetch failed: socket hang up', cause });
    expect(failures[0]!.backoffMs).toBe(50);
    expect(source.timers.pendingDelays({ keepAlive: true })).toEqual([50]);
    source.timers.advance(50);
    await turns();
    source.fetches[1]!.reject(null);
    await turns();
    expect(failures[1]!.error.message).toBe('fetch failed: null');
    expect(failures[1]!.backoffMs).toBe(100);

    const slow = new ScriptedSource();
    const other = slow.producer({ pollMs: 500 });
    other.on('fetch-error', (info) => failures.push(info));
    other.read(0);
    slow.fetches[0]!.reject('refused');
    await turns();
    expect(failures[2]).toMatchObject({ backoffMs: 100, error: { message: 'fetch failed: refused' } });
    await producer.close();
    await other.close();
  });

  it('leases of a fetch on its way when a drain begins are still delivered, then the stream ends', async () => {
    const source = new ScriptedSource();
    const producer = source.producer();
    producer.read(0);
    let drained: boolean | null = null;
    void producer.drain().then((result) => (drained = result));
    const leases = source.leases(2);
    source.answer(leases);
    await turns();
    expect(readAll(producer)).toEqual(leases);
    expect(source.settles).toEqual([]); // nothing released
    const ended = new Promise<void>((resolve) => producer.once('end', () => resolve()));
    producer.read();
    await ended;
    expect(drained).toBeNull(); // both leases are still held
    producer.confirm(leases[0]!.leaseId);
    producer.confirm(leases[1]!.leaseId);
    await turns();
    expect(drained).toBe(true);
  });

  it('a fetch that fails after a drain began is not reported', async () => {
    const source = new ScriptedSource();
    const producer = source.producer();
    const failures: unknown[] = [];
    producer.on('fetch-error', (info) => failures.push(info));
    producer.read(0);
    const drained = producer.drain();
    source.fetches[0]!.reject(new Error('boom'));
    await expect(drained).resolves.toBe(true);
    await turns();
    expect(failures).toEqual([]);
    expect(source.fetches).toHaveLength(1);
  });

  it('closed destroys the producer with the error when someone listens for it, quietly otherwise', async () => {
    const closed = new RheoError('closed', 'rheo is closed');
    const source = new ScriptedSource();
    const heard = source.producer();
    const errors: Error[] = [];
    heard.on('error', (error) => errors.push(error));
    heard.read(0);
    source.fetches[0]!.reject(closed);
    await turns();
    expect(heard.destroyed).toBe(true);
    expect(errors).toEqual([closed]);

    const quiet = source.producer();
    quiet.read(0);
    source.fetches[1]!.reject(closed);
    await turns();
    expect(quiet.destroyed).toBe(true);
    expect(quiet.errored).toBeNull();
    expect(source.fetches).toHaveLength(2);
  });

  it('closed after a fetch-error listener began a drain ends the stream instead of destroying it', async () => {
    const source = new ScriptedSource();
    const producer = source.producer();
    const errors: Error[] = [];
    producer.on('error', (error) => errors.push(error));
    producer.on('fetch-error', () => void producer.drain());
    producer.on('data', () => undefined);
    const ended = new Promise<void>((resolve) => producer.once('end', () => resolve()));
    await turns();
    source.fetches[0]!.reject(new RheoError('closed', 'rheo is closed'));
    await ended;
    expect(errors).toEqual([]);
    expect(producer.errored).toBeNull();
  });
});

describe('RheoProducer drain', () => {
  it('resolves true at once when nothing is held, and once the last held lease is confirmed', async () => {
    const idle = new ScriptedSource().producer();
    await expect(idle.drain()).resolves.toBe(true);

    const { producer } = await started(2);
    const read = readAll(producer);
    let result: boolean | null = null;
    void producer.drain().then((drained) => (result = drained));
    producer.confirm(read[0]!.leaseId);
    await turns();
    expect(result).toBeNull();
    producer.confirm(read[1]!.leaseId);
    await turns();
    expect(result).toBe(true);
  });

  it('resolves false when timeoutMs passes first', async () => {
    const { source, producer } = await started(1);
    readAll(producer);
    let result: boolean | null = null;
    void producer.drain(1_000).then((drained) => (result = drained));
    source.timers.advance(999);
    await turns();
    expect(result).toBeNull();
    source.timers.advance(1);
    await turns();
    expect(result).toBe(false);
  });
});

describe('RheoProducer teardown', () => {
  it('destroy stops renewal and releases only what was never read; nothing to release makes no call', async () => {
    const source = new ScriptedSource();
    const producer = source.producer({ maxDemand: 4 });
    const released: unknown[] = [];
    producer.on('released', (info) => released.push(info));
    producer.read(0);
    const leases = source.leases(3);
    source.answer(leases);
    await turns();
    producer.read(); // one handed downstream, two still buffered
    producer.destroy();
    await new Promise((resolve) => producer.once('close', resolve));
    expect(source.settles).toEqual([[opOf('release', leases[1]!), opOf('release', leases[2]!)]]);
    expect(released).toEqual([{ leases: leases.slice(1), error: null }]);
    source.timers.advance(LEASE_MS);
    await turns();
    expect(source.renews).toEqual([]);

    const empty = new ScriptedSource();
    const quiet = empty.producer();
    quiet.on('released', (info) => released.push(info));
    quiet.destroy();
    await turns();
    expect(empty.settles).toEqual([]);
    expect(released).toHaveLength(1);
  });

  it('Symbol.asyncDispose closes the producer', async () => {
    const producer = new ScriptedSource().producer();
    await producer[Symbol.asyncDispose]();
    expect(producer.closed).toBe(true);
  });

  it('leases that arrive after destroy are released; an empty answer releases nothing', async () => {
    const source = new ScriptedSource();
    const producer = source.producer();
    producer.read(0);
    producer.destroy();
    await turns();
    expect(producer.closed).toBe(false); // teardown waits for the fetch on its way
    const leases = source.leases(2);
    source.answer(leases);
    await turns();
    expect(producer.closed).toBe(true);
    expect(source.settles).toEqual([leases.map((lease) => opOf('release', lease))]);

    const other = new ScriptedSource();
    const none = other.producer();
    none.read(0);
    none.destroy();
    other.answer([]);
    await turns();
    expect(none.closed).toBe(true);
    expect(other.settles).toEqual([]);
  });

  it('destroy during a poll wait fetches no more', async () => {
    const { source, producer } = await started(1);
    expect(source.timers.pendingDelays({ keepAlive: true })).toEqual([POLL_MS]);
    producer.destroy();
    await turns();
    source.timers.advance(POLL_MS);
    await turns();
    expect(source.fetches).toHaveLength(1);
    expect(producer.closed).toBe(true);
  });

  it('a failed release is reported on released: the first failed result, or the call failure as internal', async () => {
    const source = new ScriptedSource();
    const stale = new RheoError('stale_lease', 'gone');
    source.settleAnswer = (ops) => Promise.resolve(ops.map((_, i) => (i === 0 ? { ok: true as const } : { ok: false as const, error: stale })));
    const producer = source.producer();
    const released: Array<{ error: RheoError | null }> = [];
    producer.on('released', (info) => released.push(info));
    producer.read(0);
    source.answer(source.leases(2));
    await turns();
    await producer.close();
    expect(released[0]!.error).toBe(stale);

    const down = new ScriptedSource();
    const cause = new Error('connection reset');
    down.settleAnswer = () => Promise.reject(cause);
    const other = down.producer();
    other.on('released', (info) => released.push(info));
    other.read(0);
    down.answer(down.leases(1));
    await turns();
    await other.close();
    expect(released[1]!.error).toMatchObject({ code: 'internal', message: 'release failed: connection reset', cause });
  });

  it('a teardown that throws fails the stream with that error', async () => {
    const source = new ScriptedSource();
    const producer = source.producer();
    const broken = new Error('released listener broke');
    producer.on('released', () => {
      throw broken;
    });
    const errors: Error[] = [];
    producer.on('error', (error) => errors.push(error));
    producer.read(0);
    source.answer(source.leases(1));
    await turns();
    producer.destroy();
    await turns();
    expect(errors).toEqual([broken]);
    expect(producer.errored).toBe(broken);
  });
});

describe('RheoProducer renewal and settle retries', () => {
  it('renews with its leaseMs, and stops renewing for good once rheo is closed', async () => {
    const source = new ScriptedSource();
    const producer = source.producer({ leaseMs: 10_000, pollMs: 3600_000 });
    const renewErrors: unknown[] = [];
    producer.on('renew-error', (info) => renewErrors.push(info));
    producer.read(0);
    source.answer(source.leases(1));
    await turns();
    readAll(producer);
    source.timers.advance(5_000);
    await turns();
    expect(source.renews.map((r) => r.leaseMs)).toEqual([10_000]);
    source.renewAnswer = () => Promise.reject(new RheoError('closed', 'rheo is closed'));
    source.timers.advance(5_000);
    await turns();
    expect(renewErrors).toHaveLength(1);
    source.timers.advance(60_000);
    await turns();
    expect(source.renews).toHaveLength(2);
    await producer.close();
  });

  it('retries backend_unavailable only while the lease as last renewed outlives the backoff', async () => {
    const unavailable = new RheoError('backend_unavailable', 'down');
    const source = new ScriptedSource();
    const producer = source.producer({ leaseMs: 1_000, settleRetry: { initialMs: 100, maxMs: 100 } });
    producer.read(0);
    const [lease] = source.leases(1); // expires LEASE_MS (30 s) from now, as fetched
    source.answer([{ ...lease!, expiresAt: new Date(source.clock.now() + 1_000) }]);
    await turns();
    const held = readAll(producer)[0]!;
    source.timers.advance(500); // renewed: now expires LEASE_MS from here
    await turns();
    expect(source.renews).toHaveLength(1);
    source.clock.set(held.expiresAt.getTime()); // the fetched expiry has passed; the renewed one has not
    let calls = 0;
    source.settleAnswer = (ops) => Promise.resolve(ops.map(() => (++calls === 1 ? { ok: false as const, error: unavailable } : { ok: true as const })));
    const ack = producer.ack(held);
    await turns();
    expect(source.timers.pendingDelays({ keepAlive: true })).toEqual([100]);
    source.timers.advance(100);
    await expect(ack).resolves.toBeUndefined();
    expect(calls).toBe(2);

    // No retry when the backoff would end exactly at expiry.
    const edge = new ScriptedSource();
    const other = edge.producer({ settleRetry: { initialMs: 100, maxMs: 100 } });
    other.read(0);
    edge.answer(edge.leases(1));
    await turns();
    const lease2 = readAll(other)[0]!;
    edge.clock.set(lease2.expiresAt.getTime() - 100);
    edge.settleAnswer = (ops) => Promise.resolve(ops.map(() => ({ ok: false as const, error: unavailable })));
    await expect(other.ack(lease2)).rejects.toBe(unavailable);
    expect(edge.settles).toHaveLength(1);
  });
});

describe('systemTimers and sleep', () => {
  it('a cancelled timer never fires; keepAlive: false does not hold the process open', async () => {
    const fired: string[] = [];
    const cancelled = systemTimers.schedule(1, () => fired.push('cancelled'));
    cancelled.cancel();
    const timeouts = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timeouts();
    const housekeeping = systemTimers.schedule(60_000, () => fired.push('housekeeping'), { keepAlive: false });
    expect(timeouts()).toBe(before); // unref'd: does not count
    const held = systemTimers.schedule(60_000, () => fired.push('held'));
    expect(timeouts()).toBe(before + 1);
    housekeeping.cancel();
    held.cancel();
    await new Promise<void>((resolve) => systemTimers.schedule(5, resolve)); // fires after the 1 ms one would have
    expect(fired).toEqual([]);
  });

  it('sleep removes its abort listener when it ends', async () => {
    const stop = new AbortController();
    await sleep(systemTimers, 1, stop.signal);
    expect(getEventListeners(stop.signal, 'abort')).toEqual([]);
  });
});

describe('RheoProducer validates at its own boundary', () => {
  it('sends each settle as the store op, and refuses a bad one: nothing sent, the lease confirmed', async () => {
    const { source, producer } = await started(3);
    const [a, b, c] = readAll(producer);
    await Promise.all([producer.nack(a!, 'later', { delayMs: 250 }), producer.reject(b!, 'bad')]);
    expect(source.settles).toEqual([[opOf('nack', a!, 'later', 250), opOf('reject', b!, 'bad')]]);
    expect(producer.inflightCount).toBe(1);
    await expect(producer.nack(c!, 'x', { delayMs: -1 })).rejects.toMatchObject({ code: 'invalid_argument', message: expect.stringMatching(/delayMs/) });
    await turns();
    expect(source.settles).toHaveLength(1);
    expect(producer.holds(c!.leaseId)).toBe(false); // no longer renewed, its slot free
    await expect(producer.ack(null as unknown as L)).rejects.toMatchObject({ code: 'invalid_argument' });
    expect(source.settles).toHaveLength(1);
    await producer.close();
  });

  it('refuses bad partitions when it is built, not at every claim', () => {
    const source = new ScriptedSource();
    expect(invalid(() => source.producer({ partitions: [] }))).toMatch(/partitions/);
    expect(invalid(() => source.producer({ partitions: [-1] as number[] }))).toMatch(/partitions/);
    expect(source.fetches).toEqual([]);
  });
});
