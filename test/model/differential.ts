import { expect } from 'vitest';
import type { ManualClock } from '../../src/core/clock.js';
import type { JsonObject } from '../../src/core/types.js';
import { GROUPS, resolvePick, type Command, type Scenario, type StartSpec } from './commands.js';
import type { ObservedEvent } from './observable.js';
import { ReferenceModel, type ModelAppend, type ModelReplay, type ModelStart } from './reference-model.js';
import { Subject, type Backend, type SettleCall } from './subject.js';

/**
 * Runs one scenario against the reference model and every backend at once,
 * in lockstep on one ManualClock. Each command is made concrete once (picks
 * resolved against the model's state), applied to the model, then to every
 * backend, and every result must equal the model's. After every step, every
 * existing group is observed in full (frontier, lag and oldest unsettled per
 * partition, inflight, dead letters in order, stored delivery state) and
 * must equal the model too. At the end the log must be exactly what was
 * appended.
 *
 * Fetch order is compared exactly, rotation included: every backend starts
 * the round-robin of a group's n-th fetch at partition `n % partitions.length`
 * of the requested list (memory keeps the counter per group, PostgreSQL per
 * backend instance and group), and the model does the same. A backend that
 * rotates differently would have to let the model learn its start partition.
 */
export async function runScenario(scenario: Scenario, backends: Backend[], clock: ManualClock, stream: string): Promise<void> {
  const run = new DifferentialRun(scenario, backends, clock, stream);
  await run.start();
  for (let i = 0; i < scenario.commands.length; i++) await run.step(i, scenario.commands[i]!);
  await run.finish();
}

class DifferentialRun {
  readonly #scenario: Scenario;
  readonly #clock: ManualClock;
  readonly #model: ReferenceModel;
  readonly #subjects: Subject[];
  /** By handle: when the lease expires, or when the delay of its nack ends (for advanceToExpiry). */
  readonly #expiries: number[] = [];
  #payloads = 0;
  #where = 'setup';

  constructor(scenario: Scenario, backends: Backend[], clock: ManualClock, stream: string) {
    this.#scenario = scenario;
    this.#clock = clock;
    this.#model = new ReferenceModel(stream, scenario.partitions);
    this.#subjects = backends.map((b) => new Subject(b, stream));
  }

  async start(): Promise<void> {
    for (const s of this.#subjects) this.#same(s, 'createStream', await s.createStream(this.#scenario.partitions), { ok: undefined });
    const start = this.#start(this.#scenario.start);
    const expected = this.#model.createGroup(GROUPS[0], start, this.#scenario.maxAttempts);
    for (const s of this.#subjects) {
      this.#same(s, 'createGroup', await s.createGroup(GROUPS[0], start, this.#scenario.maxAttempts), expected);
    }
    await this.#observe();
  }

  async step(index: number, command: Command): Promise<void> {
    this.#where = `step ${index} ${JSON.stringify(command)}`;
    const touched = this.#touched(command);
    await this.#apply(command);
    await this.#observe(touched);
  }

  async finish(): Promise<void> {
    this.#where = 'final log check';
    const expected: ObservedEvent[][] = Array.from({ length: this.#scenario.partitions }, () => []);
    for (const e of this.#model.events) expected[e.partition]!.push(e);
    for (const list of expected) list.sort((a, b) => a.sequence - b.sequence);
    for (const s of this.#subjects) this.#same(s, 'log', await s.log(this.#scenario.partitions), expected);
    await this.#observe();
  }

  /**
   * The groups whose observable state a command can change: every group for
   * an append (high watermarks), none for clock moves and renewals (expiry
   * shows only in claims), else the command's own group or its leases'
   * groups. Observing just those keeps PostgreSQL round trips down; the
   * final check observes every group, so a change leaking into another
   * group is still caught.
   */
  #touched(command: Command): readonly string[] {
    switch (command.kind) {
      case 'append':
        return GROUPS;
      case 'advance':
      case 'advanceToExpiry':
      case 'renew':
        return [];
      case 'settle':
        return [...new Set(this.#settleCalls(command).map((c) => this.#model.deliveryOf(c.handle).split('/')[0]!))];
      default:
        return [GROUPS[command.group]!];
    }
  }

  async #apply(command: Command): Promise<void> {
    const now = this.#clock.now();
    const model = this.#model;
    switch (command.kind) {
      case 'append': {
        const inputs: ModelAppend[] = command.inputs.map((a) => ({
          id: a.id,
          type: a.type,
          key: a.key,
          partition: a.partition,
          payload: { n: ++this.#payloads },
          metadata: a.tagged ? { source: 'model' } : ({} as JsonObject),
          timestamp: now - (a.backdateMs ?? 0),
        }));
        const expected = model.append(inputs);
        for (const s of this.#subjects) this.#same(s, 'append', await s.append(inputs, command.batch, expected), expected);
        return;
      }
      case 'fetch': {
        const group = GROUPS[command.group]!;
        const request = { limit: command.limit, leaseMs: command.leaseMs, consumerId: command.consumer, partitions: command.partitions };
        const first = model.leaseCount;
        const result = model.fetch(group, request, now);
        const expected = 'ok' in result ? { ok: result.ok.map((l) => l.lease) } : result;
        if ('ok' in result) for (const l of result.ok) this.#expiries[l.handle] = l.lease.expiresAt;
        for (const s of this.#subjects) this.#same(s, 'fetch', await s.fetch(group, request, first), expected);
        return;
      }
      case 'settle': {
        const calls = this.#settleCalls(command);
        if (calls.length === 0) return;
        const expected = model.settle(
          calls.map((c) => ({ handle: c.handle, kind: c.how, reason: c.reason, delayMs: c.delayMs })),
          now,
        );
        // A nack's delay ends at the instant its delivery turns claimable again:
        // advanceToExpiry on that lease then lands on the `visibleAt <= now` edge.
        calls.forEach((c, i) => {
          if (expected[i] === 'ok' && c.how === 'nack') this.#expiries[c.handle] = now + c.delayMs;
        });
        for (const s of this.#subjects) this.#same(s, 'settle', await s.settle(command.mode, calls), expected);
        return;
      }
      case 'renew': {
        const handles = this.#handles(command.leases);
        if (handles.length === 0) return;
        const expected = model.renew(handles, command.leaseMs, now);
        expected.forEach((r, i) => {
          if (typeof r === 'number') this.#expiries[handles[i]!] = r;
        });
        for (const s of this.#subjects) this.#same(s, 'renew', await s.renew(handles, command.leaseMs, command.batch), expected);
        return;
      }
      case 'advance':
        this.#clock.advance(command.ms);
        return;
      case 'advanceToExpiry': {
        const [handle] = this.#handles([command.lease]);
        if (handle === undefined) return;
        const target = this.#expiries[handle]! + command.offsetMs;
        if (target > now) this.#clock.advance(target - now);
        return;
      }
      case 'replay': {
        const group = GROUPS[command.group]!;
        const spec = this.#replaySpec(command.spec);
        if (!spec) return;
        const expected = model.replay(group, spec, command.partitions, now);
        for (const s of this.#subjects) this.#same(s, 'replay', await s.replay(group, spec, command.partitions), expected);
        return;
      }
      case 'redrive': {
        const group = GROUPS[command.group]!;
        const ids = command.events === null ? null : this.#eventIds(command.events);
        if (ids !== null && ids.length === 0) return;
        const expected = model.redrive(group, ids, now);
        for (const s of this.#subjects) this.#same(s, 'redrive', await s.redrive(group, ids), expected);
        return;
      }
      case 'reset': {
        const group = GROUPS[command.group]!;
        const start = this.#start(command.start);
        const expected = model.resetGroup(group, start);
        for (const s of this.#subjects) this.#same(s, 'resetGroup', await s.resetGroup(group, start), expected);
        return;
      }
      case 'createGroup': {
        const group = GROUPS[command.group]!;
        const start = this.#start(command.start);
        const expected = model.createGroup(group, start, command.maxAttempts);
        for (const s of this.#subjects) this.#same(s, 'createGroup', await s.createGroup(group, start, command.maxAttempts), expected);
        return;
      }
      case 'deadLetterPage': {
        const group = GROUPS[command.group]!;
        const observed = model.observe(group);
        if ('error' in observed) return;
        const all = observed.ok.deadLetters;
        const afterIndex = command.after === null ? null : resolvePick(command.after, all.length);
        const expected =
          command.after !== null && afterIndex !== null
            ? { ok: all.slice(afterIndex + 1, afterIndex + 1 + command.limit) }
            : { error: 'cursor_not_found' as const };
        for (const s of this.#subjects) {
          this.#same(s, 'deadLetters page', await s.deadLetterPage(group, afterIndex, command.limit), expected);
        }
        return;
      }
    }
  }

  async #observe(groups: readonly string[] = GROUPS): Promise<void> {
    for (const group of groups) {
      const expected = this.#model.observe(group);
      if ('error' in expected) continue;
      for (const s of this.#subjects) this.#same(s, `state of ${group}`, await s.observe(group), expected);
    }
  }

  #same(s: Subject, what: string, actual: unknown, expected: unknown): void {
    expect(actual, `${s.name} disagrees with the model on ${what} at ${this.#where}`).toEqual(expected);
  }

  #handles(picks: number[]): number[] {
    return picks.flatMap((p) => {
      const h = resolvePick(p, this.#model.leaseCount);
      return h === null ? [] : [h];
    });
  }

  #settleCalls(command: Extract<Command, { kind: 'settle' }>): SettleCall[] {
    const calls: SettleCall[] = [];
    for (const op of command.ops) {
      const [handle] = this.#handles([op.lease]);
      if (handle === undefined) continue;
      const handles = command.siblings ? this.#siblings(handle) : [handle];
      for (const h of handles) calls.push({ handle: h, how: op.how, reason: op.reason, delayMs: op.delayMs });
    }
    return calls;
  }

  /** Every lease ever issued for the same delivery as `handle`, oldest first. */
  #siblings(handle: number): number[] {
    const delivery = this.#model.deliveryOf(handle);
    const out: number[] = [];
    for (let h = 0; h < this.#model.leaseCount; h++) if (this.#model.deliveryOf(h) === delivery) out.push(h);
    return out;
  }

  #eventIds(picks: number[]): string[] {
    const events = this.#model.events;
    const ids = picks.flatMap((p) => {
      const i = resolvePick(p, events.length);
      return i === null ? [] : [events[i]!.id];
    });
    return [...new Set(ids)];
  }

  #eventTime(pick: number): number | null {
    const events = this.#model.events;
    const i = resolvePick(pick, events.length);
    return i === null ? null : events[i]!.timestamp;
  }

  #replaySpec(spec: Extract<Command, { kind: 'replay' }>['spec']): ModelReplay | null {
    if (spec.kind === 'fromSequence') return spec;
    if (spec.kind === 'from') {
      const at = this.#eventTime(spec.event);
      return at === null ? null : { kind: 'from', from: at + spec.offsetMs };
    }
    const ids = this.#eventIds(spec.events);
    if (spec.unknown) ids.push('no-such-event');
    return ids.length === 0 ? null : { kind: 'eventIds', eventIds: ids };
  }

  #start(spec: StartSpec): ModelStart {
    if (spec.kind === 'at') {
      const base = spec.event === null ? this.#clock.now() : (this.#eventTime(spec.event) ?? this.#clock.now());
      return { kind: 'at', at: base + spec.offsetMs };
    }
    if (spec.perPartition.length === 0) return { kind: 'after', after: spec.after, perPartition: {} };
    // The facade's per-partition form starts every partition it does not name at 0.
    return { kind: 'after', after: 0, perPartition: Object.fromEntries(spec.perPartition) };
  }
}
