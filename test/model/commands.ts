import fc from 'fast-check';

/*
 * The command language of the differential test and its random generator.
 * Commands name things indirectly (a `Pick` among the leases, events or dead
 * letters that exist when the command runs), so any generated sequence is
 * meaningful whatever came before it and shrinking keeps it meaningful.
 */

/** Counts back from the newest item: 0 is the newest; resolved modulo the list length. */
export type Pick = number;

export type StartSpec =
  | { kind: 'after'; after: number; perPartition: Array<[partition: number, after: number]> }
  /** At an event's timestamp plus `offsetMs`, or at "now" plus `offsetMs` when `event` is null. */
  | { kind: 'at'; event: Pick | null; offsetMs: number };

export interface AppendSpec {
  key: string | null;
  partition: number | null;
  /** From a small pool, so producer retries (duplicate ids) happen often. */
  id: string | null;
  type: string;
  /** An explicit timestamp this far before now (timestamps then leave append order), or the clock's now. */
  backdateMs: number | null;
  tagged: boolean;
}

export type SettleKind = 'ack' | 'nack' | 'reject' | 'release';

export interface SettleSpec {
  how: SettleKind;
  lease: Pick;
  delayMs: number;
  reason: string | null;
}

export type ReplaySpec =
  | { kind: 'fromSequence'; fromSequence: number }
  | { kind: 'from'; event: Pick; offsetMs: number }
  | { kind: 'eventIds'; events: Pick[]; unknown: boolean };

export type Command =
  | { kind: 'append'; inputs: AppendSpec[]; batch: boolean }
  | {
      kind: 'fetch';
      group: number;
      limit: number;
      leaseMs: number;
      partitions: number[] | null;
      consumer: string;
    }
  /**
   * `single`: one op through ack/nack/reject/release; `many`: ops of one kind
   * through ackMany/nackMany/...; `mixed`: settleMany. `siblings` adds every
   * other lease ever issued for the same deliveries, in issue order, so a
   * batch holds a stale and the current lease of one delivery.
   */
  | { kind: 'settle'; mode: 'single' | 'many' | 'mixed'; ops: SettleSpec[]; siblings: boolean }
  | { kind: 'renew'; leases: Pick[]; leaseMs: number; batch: boolean }
  | { kind: 'advance'; ms: number }
  /**
   * Moves the clock to a lease's expiry (or the end of its nack's delay) plus
   * `offsetMs`, never backwards: the `visibleAt <= now` edge.
   */
  | { kind: 'advanceToExpiry'; lease: Pick; offsetMs: number }
  | { kind: 'replay'; group: number; spec: ReplaySpec; partitions: number[] | null }
  | { kind: 'redrive'; group: number; events: Pick[] | null }
  | { kind: 'reset'; group: number; start: StartSpec }
  | { kind: 'createGroup'; group: number; start: StartSpec; maxAttempts: number }
  /** Pages the dead letters after the picked one (null: a cursor that names none). */
  | { kind: 'deadLetterPage'; group: number; after: Pick | null; limit: number };

export interface Scenario {
  partitions: number;
  maxAttempts: number;
  start: StartSpec;
  commands: Command[];
}

export interface Depth {
  numRuns: number;
  minCommands: number;
  maxCommands: number;
}

export const GROUPS = ['g0', 'g1', 'g2'] as const;
export const LEASE_MS = [100, 200, 1000] as const;

/** Resolves a pick against `length` items; null when there are none. */
export function resolvePick(pick: Pick, length: number): number | null {
  return length === 0 ? null : length - 1 - (pick % length);
}

const pickArb: fc.Arbitrary<Pick> = fc.oneof(
  { weight: 5, arbitrary: fc.nat(4) },
  { weight: 1, arbitrary: fc.nat(1000) },
);

/** Mostly existing groups; g0 always exists. */
const groupArb = fc.oneof({ weight: 6, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.constant(2) });

/** Partition numbers, mostly in range: `partitions` itself is the out-of-range one. */
function partitionArb(partitions: number): fc.Arbitrary<number> {
  return fc.oneof({ weight: 12, arbitrary: fc.nat(partitions - 1) }, { weight: 1, arbitrary: fc.constant(partitions) });
}

function partitionSubsetArb(partitions: number): fc.Arbitrary<number[] | null> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant(null) },
    { weight: 1, arbitrary: fc.uniqueArray(partitionArb(partitions), { minLength: 1, maxLength: partitions + 1 }) },
  );
}

function startArb(partitions: number): fc.Arbitrary<StartSpec> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.constant<StartSpec>({ kind: 'after', after: 0, perPartition: [] }) },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('after' as const),
        after: fc.nat(6),
        perPartition: fc.array(fc.tuple(partitionArb(partitions), fc.nat(6)), { maxLength: 2 }),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('at' as const),
        event: fc.option(pickArb, { nil: null }),
        offsetMs: fc.constantFrom(-1, 0, 1, 500),
      }),
    },
  );
}

const reasonArb = fc.constantFrom<string | null>(null, 'boom', 'bad input');

function appendSpecArb(partitions: number): fc.Arbitrary<AppendSpec> {
  return fc.record({
    key: fc.option(fc.constantFrom('k1', 'k2', 'k3', 'order-7', 'ключ', '🦀', ''), { nil: null, freq: 2 }),
    partition: fc.option(partitionArb(partitions), { nil: null, freq: 2 }),
    id: fc.option(fc.constantFrom('id-a', 'id-b', 'id-c', 'id-d', 'id-e', 'id-f'), { nil: null, freq: 3 }),
    type: fc.constantFrom('created', 'paid'),
    backdateMs: fc.option(fc.constantFrom(1, 40, 300), { nil: null, freq: 4 }),
    tagged: fc.boolean(),
  });
}

function commandArb(partitions: number): fc.Arbitrary<Command> {
  const settleSpec = fc.record({
    how: fc.constantFrom<SettleKind>('ack', 'ack', 'ack', 'nack', 'reject', 'release'),
    lease: pickArb,
    delayMs: fc.constantFrom(0, 0, 50, 150),
    reason: reasonArb,
  });
  return fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('append' as const),
        inputs: fc.array(appendSpecArb(partitions), { minLength: 1, maxLength: 4 }),
        batch: fc.boolean(),
      }),
    },
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('fetch' as const),
        group: groupArb,
        limit: fc.integer({ min: 1, max: 6 }),
        leaseMs: fc.constantFrom(...LEASE_MS),
        partitions: partitionSubsetArb(partitions),
        consumer: fc.constantFrom('w1', 'w2'),
      }),
    },
    {
      weight: 8,
      arbitrary: fc.oneof(
        fc.record({
          kind: fc.constant('settle' as const),
          mode: fc.constant('single' as const),
          ops: fc.tuple(settleSpec),
          siblings: fc.constant(false),
        }),
        settleSpec.chain(({ how, delayMs, reason }) =>
          fc.record({
            kind: fc.constant('settle' as const),
            mode: fc.constant('many' as const),
            ops: fc.array(
              pickArb.map((lease) => ({ how, lease, delayMs, reason })),
              { minLength: 1, maxLength: 5 },
            ),
            siblings: fc.boolean(),
          }),
        ),
        fc.record({
          kind: fc.constant('settle' as const),
          mode: fc.constant('mixed' as const),
          ops: fc.array(settleSpec, { minLength: 1, maxLength: 5 }),
          siblings: fc.boolean(),
        }),
      ),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('renew' as const),
        leases: fc.array(pickArb, { minLength: 1, maxLength: 4 }),
        leaseMs: fc.constantFrom(...LEASE_MS),
        batch: fc.boolean(),
      }),
    },
    {
      weight: 4,
      arbitrary: fc.record({ kind: fc.constant('advance' as const), ms: fc.constantFrom(0, 1, 10, 49, 50, 100, 150, 199, 200, 1000, 1500) }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('advanceToExpiry' as const),
        lease: pickArb,
        offsetMs: fc.constantFrom(-1, 0, 0, 1),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('replay' as const),
        group: groupArb,
        spec: fc.oneof(
          fc.record({ kind: fc.constant('fromSequence' as const), fromSequence: fc.integer({ min: 1, max: 8 }) }),
          fc.record({ kind: fc.constant('from' as const), event: pickArb, offsetMs: fc.constantFrom(-1, 0, 1) }),
          fc.record({
            kind: fc.constant('eventIds' as const),
            events: fc.array(pickArb, { minLength: 1, maxLength: 4 }),
            unknown: fc.constant(false),
          }),
          fc.record({
            kind: fc.constant('eventIds' as const),
            events: fc.array(pickArb, { maxLength: 2 }),
            unknown: fc.constant(true),
          }),
        ),
        partitions: partitionSubsetArb(partitions),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('redrive' as const),
        group: groupArb,
        events: fc.option(fc.array(pickArb, { minLength: 1, maxLength: 3 }), { nil: null }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant('reset' as const), group: groupArb, start: startArb(partitions) }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('createGroup' as const),
        group: fc.integer({ min: 0, max: GROUPS.length - 1 }),
        start: startArb(partitions),
        maxAttempts: fc.integer({ min: 1, max: 4 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('deadLetterPage' as const),
        group: groupArb,
        after: fc.option(pickArb, { nil: null, freq: 6 }),
        limit: fc.integer({ min: 1, max: 3 }),
      }),
    },
  );
}

/** A random scenario: partition count, the first group, and a command sequence of the given depth. */
export function scenarioArb(depth: Depth): fc.Arbitrary<Scenario> {
  return fc.integer({ min: 1, max: 5 }).chain((partitions) =>
    fc.record({
      partitions: fc.constant(partitions),
      maxAttempts: fc.integer({ min: 1, max: 4 }),
      start: startArb(partitions),
      commands: fc.array(commandArb(partitions), {
        minLength: depth.minCommands,
        maxLength: depth.maxCommands,
        size: 'max',
      }),
    }),
  );
}
