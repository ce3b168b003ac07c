import { expect } from 'vitest';
import type { AppendInput, DeadLetter, Lease, SettleRequest, SettleResult } from '../../src/core/types.js';
import type { Rheo } from '../../src/rheo.js';
import type { SettleKind } from './commands.js';
import {
  observeDeadLetter,
  observeEvent,
  observeGroup,
  observeLease,
  outcome,
  type ObservedDeadLetter,
  type ObservedEvent,
  type ObservedGroup,
  type ObservedLease,
  type Outcome,
  type RenewOutcome,
  type SettleOutcome,
} from './observable.js';
import type { ModelAppend, ModelReplay, ModelStart } from './reference-model.js';

/** One backend under test, behind the facade, sharing the run's ManualClock. */
export interface Backend {
  readonly name: string;
  readonly rheo: Rheo;
}

export interface SettleCall {
  handle: number;
  how: SettleKind;
  reason: string | null;
  delayMs: number;
}

/**
 * One backend's side of one scenario: runs the model's concrete calls through
 * the facade and reports what a caller observes. Lease ids are random per
 * backend, so leases are kept by the model's handle; generated event ids
 * differ per backend, so they are translated to the model's ids both ways.
 */
export class Subject {
  readonly name: string;
  readonly #rheo: Rheo;
  readonly #stream: string;
  readonly #leases: Lease[] = [];
  readonly #leaseIds = new Set<string>();
  readonly #toModel = new Map<string, string>();
  readonly #toBackend = new Map<string, string>();

  constructor(backend: Backend, stream: string) {
    this.name = backend.name;
    this.#rheo = backend.rheo;
    this.#stream = stream;
  }

  createStream(partitions: number): Promise<Outcome<void>> {
    return outcome(() => this.#rheo.createStream(this.#stream, { partitions }));
  }

  createGroup(group: string, start: ModelStart, maxAttempts: number): Promise<Outcome<void>> {
    return outcome(() => this.#rheo.createGroup(this.#stream, group, { ...startOptions(start), maxAttempts }));
  }

  resetGroup(group: string, start: ModelStart): Promise<Outcome<void>> {
    return outcome(() => this.#rheo.resetGroup(this.#stream, group, { confirm: true, ...startOptions(start) }));
  }

  /**
   * Appends, then learns the backend's generated ids from `expected` (the
   * model's answer for the same inputs) before translating.
   */
  async append(inputs: ModelAppend[], batch: boolean, expected: Outcome<ObservedEvent[]>): Promise<Outcome<ObservedEvent[]>> {
    const real: AppendInput[] = inputs.map((i) => ({
      payload: i.payload,
      type: i.type,
      metadata: i.metadata,
      ...(i.key === null ? {} : { key: i.key }),
      ...(i.partition === null ? {} : { partition: i.partition }),
      ...(i.id === null ? {} : { id: i.id }),
      timestamp: new Date(i.timestamp),
    }));
    const result = await outcome(() =>
      batch || real.length !== 1 ? this.#rheo.appendBatch(this.#stream, real) : this.#rheo.append(this.#stream, real[0]!).then((e) => [e]),
    );
    if ('error' in result) return result;
    if ('ok' in expected && expected.ok.length === result.ok.length) {
      result.ok.forEach((e, i) => {
        const modelId = expected.ok[i]!.id;
        if (inputs[i]!.id === null && !this.#toModel.has(e.id) && !this.#toBackend.has(modelId)) {
          this.#toModel.set(e.id, modelId);
          this.#toBackend.set(modelId, e.id);
        }
      });
    }
    return { ok: result.ok.map((e) => observeEvent(e, this.#toModel)) };
  }

  /** Fetches; the leases are kept under handles `firstHandle, firstHandle + 1, ...`. */
  async fetch(
    group: string,
    request: { limit: number; leaseMs: number; consumerId: string; partitions: number[] | null },
    firstHandle: number,
  ): Promise<Outcome<ObservedLease[]>> {
    const result = await outcome(() =>
      this.#rheo.fetch(this.#stream, group, {
        limit: request.limit,
        leaseMs: request.leaseMs,
        consumerId: request.consumerId,
        ...(request.partitions === null ? {} : { partitions: request.partitions }),
      }),
    );
    if ('error' in result) return result;
    result.ok.forEach((lease, i) => {
      expect(this.#leaseIds.has(lease.leaseId), `${this.name}: a claim reused lease id ${lease.leaseId}`).toBe(false);
      this.#leaseIds.add(lease.leaseId);
      this.#leases[firstHandle + i] = lease;
    });
    return { ok: result.ok.map((l) => observeLease(l, this.#toModel)) };
  }

  async renew(handles: number[], leaseMs: number, batch: boolean): Promise<RenewOutcome[]> {
    if (!batch) {
      const out: RenewOutcome[] = [];
      for (const h of handles) {
        const r = await outcome(() => this.#rheo.renew(this.#lease(h), { leaseMs }));
        out.push('ok' in r ? r.ok.expiresAt.getTime() : r.error);
      }
      return out;
    }
    const results = await this.#rheo.renewMany(handles.map((h) => this.#lease(h)), { leaseMs });
    return results.map((r) => (r.ok ? r.lease.expiresAt.getTime() : r.error.code));
  }

  async settle(mode: 'single' | 'many' | 'mixed', calls: SettleCall[]): Promise<SettleOutcome[]> {
    if (mode === 'single') {
      const out: SettleOutcome[] = [];
      for (const c of calls) {
        const lease = this.#lease(c.handle);
        const r = await outcome(() => {
          switch (c.how) {
            case 'ack':
              return this.#rheo.ack(lease);
            case 'nack':
              return this.#rheo.nack(lease, c.reason, { delayMs: c.delayMs });
            case 'reject':
              return this.#rheo.reject(lease, c.reason);
            case 'release':
              return this.#rheo.release(lease);
          }
        });
        out.push('ok' in r ? 'ok' : r.error);
      }
      return out;
    }
    let results: SettleResult[];
    if (mode === 'mixed') {
      results = await this.#rheo.settleMany(calls.map((c) => settleRequest(c, this.#lease(c.handle))));
    } else {
      const leases = calls.map((c) => this.#lease(c.handle));
      const { how, reason, delayMs } = calls[0]!;
      results =
        how === 'ack'
          ? await this.#rheo.ackMany(leases)
          : how === 'nack'
            ? await this.#rheo.nackMany(leases, reason, { delayMs })
            : how === 'reject'
              ? await this.#rheo.rejectMany(leases, reason)
              : await this.#rheo.releaseMany(leases);
    }
    return results.map((r) => (r.ok ? 'ok' : r.error.code));
  }

  replay(group: string, spec: ModelReplay, partitions: number[] | null): Promise<Outcome<void>> {
    const real =
      spec.kind === 'fromSequence'
        ? { fromSequence: spec.fromSequence }
        : spec.kind === 'from'
          ? { from: new Date(spec.from) }
          : { eventIds: spec.eventIds.map((id) => this.#toBackend.get(id) ?? id) };
    return outcome(() => this.#rheo.replay(this.#stream, group, real, partitions === null ? {} : { partitions }));
  }

  redrive(group: string, eventIds: string[] | null): Promise<Outcome<number>> {
    return outcome(() =>
      this.#rheo.redrive(
        this.#stream,
        group,
        eventIds === null ? {} : { eventIds: eventIds.map((id) => this.#toBackend.get(id) ?? id) },
      ),
    );
  }

  /**
   * Pages the dead letters after the `afterIndex`-th one of this backend's own
   * listing (dead-letter ids are per backend), or after a cursor naming none.
   */
  async deadLetterPage(group: string, afterIndex: number | null, limit: number): Promise<Outcome<ObservedDeadLetter[]>> {
    let after = '999999999';
    if (afterIndex !== null) {
      const all = await this.#rheo.deadLetters(this.#stream, group, { limit: 10_000 });
      after = all[afterIndex]?.id ?? after;
    }
    const page = await outcome(() => this.#rheo.deadLetters(this.#stream, group, { limit, after }));
    return 'ok' in page ? { ok: page.ok.map((d) => observeDeadLetter(d, this.#toModel)) } : page;
  }

  /** Everything a caller can see of the group: groupInfo, lag, dead letters, stored delivery state. */
  async observe(group: string): Promise<Outcome<ObservedGroup>> {
    const info = await outcome(() => this.#rheo.groupInfo(this.#stream, group));
    if ('error' in info) return info;
    const lag = await this.#rheo.lag(this.#stream, group);
    expect(lag, `${this.name}: lag() and groupInfo().lag disagree`).toEqual(info.ok.lag);
    const dead = await this.#rheo.deadLetters(this.#stream, group, { limit: 10_000 });
    assertIncreasingIds(this.name, dead);
    const stats = await this.#rheo.backend.storageStats(this.#stream, group);
    expect(stats.deadLetters, `${this.name}: storageStats counts the dead letters listed`).toBe(dead.length);
    return { ok: observeGroup(info.ok, dead, stats.deliveries, this.#toModel) };
  }

  /** The whole log, partition by partition (consuming must never change it). */
  async log(partitions: number): Promise<ObservedEvent[][]> {
    const out: ObservedEvent[][] = [];
    for (let p = 0; p < partitions; p++) {
      const events = await this.#rheo.read(this.#stream, { partition: p, limit: 10_000 });
      out.push(events.map((e) => observeEvent(e, this.#toModel)));
    }
    return out;
  }

  #lease(handle: number): Lease {
    const lease = this.#leases[handle];
    if (!lease) throw new Error(`${this.name}: no lease under handle ${handle}; an earlier fetch disagreed`);
    return lease;
  }
}

function startOptions(start: ModelStart): { startAfter?: number | Record<number, number>; startAt?: Date } {
  if (start.kind === 'at') return { startAt: new Date(start.at) };
  if (Object.keys(start.perPartition).length === 0) return { startAfter: start.after };
  // A per-partition map names only its partitions; the others start at 0.
  return { startAfter: start.perPartition };
}

function settleRequest(c: SettleCall, lease: Lease): SettleRequest {
  switch (c.how) {
    case 'ack':
      return { kind: 'ack', lease };
    case 'nack':
      return { kind: 'nack', lease, reason: c.reason, delayMs: c.delayMs };
    case 'reject':
      return { kind: 'reject', lease, reason: c.reason };
    case 'release':
      return { kind: 'release', lease };
  }
}

function assertIncreasingIds(name: string, dead: DeadLetter[]): void {
  for (let i = 0; i < dead.length; i++) {
    expect(dead[i]!.id, `${name}: dead-letter ids are strings of digits`).toMatch(/^[0-9]+$/);
    if (i > 0) expect(BigInt(dead[i]!.id) > BigInt(dead[i - 1]!.id), `${name}: dead letters listed in id order`).toBe(true);
  }
}
