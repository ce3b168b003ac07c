import { pipeline } from 'node:stream/promises';

import type { Rheo } from '../../src/index.js';
import type { PostgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { createLeaseSink } from '../../src/sinks/lease-sink.js';
import type { BenchContext } from '../lib/context.js';
import { caughtUp, consume, fill, openRheo, type BackendKind } from '../lib/rheo-setup.js';
import { now, rate, waitUntil } from '../lib/stats.js';

export const CONSUME = '2 consume';

/** maxDemand / concurrency pairs measured end to end. */
export const CONSUME_SETTINGS = [
  { maxDemand: 10, concurrency: 1 },
  { maxDemand: 100, concurrency: 10 },
  { maxDemand: 500, concurrency: 50 },
] as const;

export const FETCH_LOOP_LIMITS = [100, 500] as const;

/**
 * At maxDemand 10 / concurrency 1 every event costs its own round trips, so
 * on PostgreSQL that setting drains a twentieth of the events to keep
 * `npm run bench` under 10 minutes; its rate is still events/s.
 */
function eventsFor(kind: BackendKind, s: { concurrency: number }, events: number): number {
  return kind === 'postgres' && s.concurrency === 1 ? Math.max(100, Math.floor(events / 20)) : events;
}

function sizeNote(kind: BackendKind, s: { concurrency: number }): string {
  return kind === 'postgres' && s.concurrency === 1 ? ', 1/20 of the events' : '';
}

export function producerCase(kind: BackendKind, s: { maxDemand: number; concurrency: number }): string {
  return `rheo ${kind} RheoProducer→lease sink (maxDemand ${s.maxDemand}, concurrency ${s.concurrency}${sizeNote(kind, s)})`;
}

/**
 * The stream sizes every `rheo.consume` case drains: one partition, and eight,
 * where competing consumers claim fairly across partitions (a regression
 * there once cost a fifth of the rate unnoticed, since other cases use one).
 */
export const CONSUME_PARTITIONS = [1, 8] as const;

export function consumeCase(kind: BackendKind, s: { maxDemand: number; concurrency: number }, partitions = 1): string {
  const spread = partitions === 1 ? '' : `, ${partitions} partitions`;
  return `rheo ${kind} rheo.consume (maxDemand ${s.maxDemand}, concurrency ${s.concurrency}${spread}${sizeNote(kind, s)})`;
}

/** The setting the effect cases (a handler that writes a row per event) run at. */
export const EFFECT_SETTING = { maxDemand: 100, concurrency: 10 } as const;

export function effectCase(transaction: boolean): string {
  return transaction
    ? `rheo postgres rheo.consume transaction: true, row insert committed with the ack (maxDemand ${EFFECT_SETTING.maxDemand}, concurrency ${EFFECT_SETTING.concurrency})`
    : `rheo postgres rheo.consume, row insert in its own commit then ack (maxDemand ${EFFECT_SETTING.maxDemand}, concurrency ${EFFECT_SETTING.concurrency})`;
}

export function fetchLoopCase(kind: BackendKind, limit: number): string {
  return `rheo ${kind} fetch(${limit})+ackMany loop`;
}

/**
 * Scenario 2: N small events pre-appended, then drained until the frontier
 * reaches the high watermark (lag 0, so every ack is durable). The clock runs
 * from starting the consumer to lag 0. Every case drains with a fresh group
 * over one pre-filled stream (consuming never changes the log, so each group
 * sees exactly the same N events), which saves re-appending per case. Three ways in: the streams adapter
 * (RheoProducer piped into a no-op lease sink), the one-call `rheo.consume`,
 * and a bare `fetch` + `ackMany` loop (the facade without the adapter).
 */
export async function consumeScenario(ctx: BenchContext): Promise<void> {
  const events = ctx.size(20_000, 2_000);
  await consumeRuns(ctx, 'memory', undefined, events);
  if (!ctx.pg) return ctx.skip(`${CONSUME} (PostgreSQL)`, 'no database');
  const url = await ctx.pg.createDatabase('rheo_bench_consume');
  try {
    await consumeRuns(ctx, 'postgres', url, events);
  } finally {
    await ctx.pg.dropDatabase('rheo_bench_consume');
  }
}

async function consumeRuns(ctx: BenchContext, kind: BackendKind, url: string | undefined, events: number): Promise<void> {
  const rheo = await openRheo(kind, { url });
  let seq = 0;
  // One stream per event count and partition count; a fresh group per drain (its backlog is exactly `count`).
  const streams = new Map<string, string>();
  const fresh = async (count: number, partitions = 1): Promise<{ stream: string; group: string }> => {
    let stream = streams.get(`${count}/${partitions}`);
    if (!stream) {
      stream = partitions === 1 ? `consume-${kind}-${count}` : `consume-${kind}-${count}-p${partitions}`;
      await rheo.createStream(stream, { partitions });
      await fill(rheo, stream, count, 1000, 0, partitions);
      streams.set(`${count}/${partitions}`, stream);
    }
    const group = `g${seq++}`;
    await rheo.createGroup(stream, group);
    return { stream, group };
  };
  try {
    for (let run = 0; run < ctx.runs; run++) {
      for (const s of CONSUME_SETTINGS) {
        const n = eventsFor(kind, s, events);
        ctx.record(CONSUME, producerCase(kind, s), 'events/s', await drainWithProducer(rheo, await fresh(n), n, s));
        for (const partitions of CONSUME_PARTITIONS) {
          ctx.record(CONSUME, consumeCase(kind, s, partitions), 'events/s', await drainWithConsume(rheo, await fresh(n, partitions), n, s));
        }
      }
      for (const limit of FETCH_LOOP_LIMITS) {
        ctx.record(CONSUME, fetchLoopCase(kind, limit), 'events/s', await drainWithFetchLoop(rheo, await fresh(events), events, limit));
      }
      if (kind === 'postgres') {
        // What exactly-once effects cost: the same handler write, with and
        // without the transaction that commits it together with the ack.
        for (const transaction of [false, true]) {
          ctx.record(CONSUME, effectCase(transaction), 'events/s', await drainWithEffects(rheo, await fresh(events), events, transaction));
        }
      }
    }
  } finally {
    await rheo.close();
  }
}

interface Target {
  stream: string;
  group: string;
}

export async function drainWithProducer(
  rheo: Rheo,
  { stream, group }: Target,
  events: number,
  s: { maxDemand: number; concurrency: number },
): Promise<number> {
  let handled = 0;
  const t0 = now();
  const producer = rheo.producer({ stream, group, maxDemand: s.maxDemand });
  const sink = createLeaseSink({
    producer,
    concurrency: s.concurrency,
    handler: () => {
      handled++;
    },
  });
  const done = pipeline(producer, sink);
  await waitUntil('producer handlers', () => handled >= events, 120_000, 1);
  await waitUntil('producer frontier', () => caughtUp(rheo, stream, group), 60_000, 1);
  const elapsed = now() - t0;
  await producer.drain(10_000);
  await done.catch(() => undefined);
  return rate(events, elapsed);
}

/**
 * `consumers` independent `rheo.consume` calls on the same group in this
 * process (default 1), each with the given setting, until the frontier
 * reaches the high watermark.
 */
export async function drainWithConsume(
  rheo: Rheo,
  { stream, group }: Target,
  events: number,
  s: { maxDemand: number; concurrency: number },
  consumers = 1,
): Promise<number> {
  let handled = 0;
  const t0 = now();
  const running = Array.from({ length: consumers }, () =>
    consume(rheo, {
      stream,
      group,
      concurrency: s.concurrency,
      maxDemand: s.maxDemand,
      handler: () => {
        handled++;
      },
    }),
  );
  await waitUntil('consume handlers', () => handled >= events, 120_000, 1);
  await waitUntil('consume frontier', () => caughtUp(rheo, stream, group), 60_000, 1);
  const elapsed = now() - t0;
  await Promise.all(running.map((c) => c.stop()));
  return rate(events, elapsed);
}

/**
 * `rheo.consume` whose handler inserts one row per event into a user table:
 * with `transaction: true` the insert commits with the ack in one
 * transaction; without, the insert autocommits on the pool and the ack
 * commits apart (at-least-once: a crash between them repeats the insert).
 */
export async function drainWithEffects(rheo: Rheo, { stream, group }: Target, events: number, transaction: boolean): Promise<number> {
  const pool = (rheo.backend as PostgresBackend).pool;
  await pool.query('CREATE TABLE IF NOT EXISTS bench_effects (event_id text NOT NULL)');
  let handled = 0;
  const t0 = now();
  const consumer = consume(rheo, {
    stream,
    group,
    concurrency: EFFECT_SETTING.concurrency,
    maxDemand: EFFECT_SETTING.maxDemand,
    transaction,
    handler: async (event, { client }) => {
      await (client ?? pool).query('INSERT INTO bench_effects (event_id) VALUES ($1)', [event.id]);
      handled++;
    },
  });
  await waitUntil('effect handlers', () => handled >= events, 300_000, 1);
  await waitUntil('effect frontier', () => caughtUp(rheo, stream, group), 60_000, 1);
  const elapsed = now() - t0;
  await consumer.stop();
  return rate(events, elapsed);
}

export async function drainWithFetchLoop(rheo: Rheo, { stream, group }: Target, events: number, limit: number): Promise<number> {
  let done = 0;
  let empty = 0;
  const t0 = now();
  while (done < events) {
    const leases = await rheo.fetch(stream, group, { limit });
    if (leases.length === 0) {
      if (++empty > 100) throw new Error(`fetch loop on ${stream}/${group}: no leases after ${done} of ${events}`);
      continue;
    }
    await rheo.ackMany(leases);
    done += leases.length;
  }
  const elapsed = now() - t0;
  if (!(await caughtUp(rheo, stream, group))) throw new Error(`fetch loop on ${stream} did not reach lag 0`);
  return rate(events, elapsed);
}
