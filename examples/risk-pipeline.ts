/**
 * The risk pipeline of the Broadway notes, end to end: one producer
 * (maxDemand 50, on_failure :reject as its default) feeds eight processors;
 * a router puts each scored trade on the warehouse batcher (batches of 100,
 * two at a time) and each alert on the audit batcher (batches of 10). A
 * processor that throws dead-letters its lease by the producer's policy; the
 * warehouse answers `{ retry }` for rows it cannot take yet, and those come
 * back with attempt 2. The run ends with every event acked or dead-lettered,
 * and prints the frontiers and the lag.
 *
 * maxDemand 50 against a batch size of 100 is the notes' "two knobs" at work:
 * the producer never holds 100 leases, so warehouse batches close on their
 * 100 ms timer, never full.
 */
import { pipeline } from 'node:stream/promises';
import { createBatchSink, createBatcherRouter, createMapTransform, type Rheo } from '../src/index.js';
import { uniqueName, type Example, type Log } from './example-kit.js';

type Trade = { trade: number; desk: string; notional: number };
type Score = { trade: number; risk: number; alert: boolean };

export interface RiskPipelineResult {
  events: number;
  warehoused: number;
  audited: number;
  deadLettered: Array<{ trade: number; reason: string | null }>;
  retried: number;
  largestWarehouseBatch: number;
  frontiers: Record<number, number>;
  lag: number;
}

/** The risk model: alerts above a threshold; a malformed trade (negative notional) cannot be scored. */
export function scoreTrade(trade: Trade): Score {
  if (trade.notional < 0) throw new Error(`trade ${trade.trade}: negative notional cannot be scored`);
  const risk = Math.round((trade.notional / 1_000) * (trade.desk === 'fx' ? 1.5 : 1));
  return { trade: trade.trade, risk, alert: risk > 90 };
}

export async function run(rheo: Rheo, log: Log): Promise<RiskPipelineResult> {
  const stream = uniqueName('market-events');
  await rheo.createStream(stream, { partitions: 4 });
  await rheo.createGroup(stream, 'risk');
  const total = 240;
  await rheo.appendBatch(
    stream,
    Array.from({ length: total }, (_, i) => {
      const trade = i + 1;
      const notional = trade % 40 === 0 ? -1 : ((trade * 7919) % 100) * 1_000;
      return { type: 'trade', key: `book-${trade % 16}`, payload: { trade, desk: trade % 2 ? 'fx' : 'rates', notional } };
    }),
  );
  log(`appended ${total} trades to ${stream} (4 partitions)`);

  const producer = rheo.producer<Trade>({ stream, group: 'risk', maxDemand: 50, onFailure: 'reject' });
  const warehouse: Score[] = [];
  const audit: Score[] = [];
  const warehouseBatches: number[] = [];
  let settled = 0;
  let retried = 0;
  const settledOne = (): void => {
    if (++settled === total) void producer.drain();
  };
  producer.on('ack', settledOne);
  producer.on('dead-letter', settledOne);
  producer.on('retry', () => void retried++);

  const processors = createMapTransform<Trade, Score>({
    producer,
    concurrency: 8,
    map: async (lease) => {
      await new Promise<void>((resolve) => setImmediate(resolve)); // the model's I/O
      return scoreTrade(lease.event.payload);
    },
  });
  const warehouseBatcher = createBatchSink<Trade>({
    producer,
    batchSize: 100,
    batchTimeoutMs: 100,
    concurrency: 2,
    handler: (leases, { values }) => {
      warehouseBatches.push(leases.length);
      // Every seventh trade's row is locked on its first delivery: retry it, keep the rest.
      return leases.map((lease, i) => {
        if (lease.event.payload.trade % 7 === 0 && lease.attempt === 1) return { retry: 'warehouse row locked' };
        warehouse.push(values![i] as Score);
        return 'ack';
      });
    },
  });
  const auditBatcher = createBatchSink<Trade>({
    producer,
    batchSize: 10,
    batchTimeoutMs: 100,
    handler: (_leases, { values }) => void audit.push(...(values as Score[])),
  });
  const router = createBatcherRouter<Trade>({
    producer,
    batchers: { warehouse: warehouseBatcher, audit: auditBatcher },
    // The processors' score decides the batcher, as handle_message's put_batcher does.
    route: (lease) => (scoreTrade(lease.event.payload).alert ? 'audit' : 'warehouse'),
  });
  await pipeline(producer, processors, router);

  const dead = await rheo.deadLetters<Trade>(stream, 'risk', { limit: 100 });
  const lag = await rheo.lag(stream, 'risk');
  const frontiers = Object.fromEntries(Object.entries(lag.partitions).map(([p, info]) => [Number(p), info.frontier]));
  log(`warehoused ${warehouse.length} rows in batches of at most ${Math.max(...warehouseBatches)}; audited ${audit.length} alerts`);
  log(`retried ${retried} locked rows (attempt 2 acked); dead-lettered ${dead.length} unscorable trades by the producer's onFailure 'reject'`);
  log(`frontiers ${JSON.stringify(frontiers)}, lag ${lag.lag}`);
  return {
    events: total,
    warehoused: warehouse.length,
    audited: audit.length,
    deadLettered: dead.map((d) => ({ trade: d.event.payload.trade, reason: d.reason })).sort((a, b) => a.trade - b.trade),
    retried,
    largestWarehouseBatch: Math.max(...warehouseBatches),
    frontiers,
    lag: lag.lag,
  };
}

export const example: Example<RiskPipelineResult> = {
  name: 'risk-pipeline',
  description: 'the notes\' risk pipeline: 8 processors, failures by policy, a warehouse and an audit batcher, frontiers and lag',
  run,
};
