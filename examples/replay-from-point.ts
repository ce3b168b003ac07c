/**
 * A group that starts at a point of the log, and a replay from a point: the
 * group `audit` is created with `startAfter: 6`, so it reads sequences 7 to
 * 10 only; a replay `fromSequence: 8` then reopens 8 to 10, which come back
 * with attempt 1 while 7 stays settled.
 */
import type { Rheo } from '../src/index.js';
import { uniqueName, type Example, type Log } from './example-kit.js';

export interface ReplayFromPointResult {
  firstRead: number[];
  frontierAfterFirst: number;
  replayed: Array<[sequence: number, attempt: number]>;
  frontierAfterReplay: number;
  lag: number;
}

export async function run(rheo: Rheo, log: Log): Promise<ReplayFromPointResult> {
  const stream = uniqueName('ledger');
  await rheo.createStream(stream);
  await rheo.appendBatch(stream, Array.from({ length: 10 }, (_, i) => ({ payload: { entry: i + 1 } })));
  await rheo.createGroup(stream, 'audit', { startAfter: 6 });
  log(`appended 10 entries to ${stream}; group audit starts after sequence 6`);

  const first = await rheo.fetch(stream, 'audit', { limit: 100 });
  await rheo.ackMany(first);
  const firstRead = first.map((l) => l.event.sequence);
  const frontierAfterFirst = (await rheo.lag(stream, 'audit')).partitions[0]!.frontier;
  log(`first read: ${JSON.stringify(firstRead)}, frontier ${frontierAfterFirst}`);

  await rheo.replay(stream, 'audit', { fromSequence: 8 });
  const frontierAfterReplay = (await rheo.lag(stream, 'audit')).partitions[0]!.frontier;
  const again = await rheo.fetch(stream, 'audit', { limit: 100 });
  const replayed = again.map((l): [number, number] => [l.event.sequence, l.attempt]);
  log(`replay from 8: frontier back to ${frontierAfterReplay}; redelivered (sequence, attempt) ${JSON.stringify(replayed)}`);
  await rheo.ackMany(again);
  const lag = (await rheo.lag(stream, 'audit')).lag;
  log(`acked again: lag ${lag}`);
  return { firstRead, frontierAfterFirst, replayed, frontierAfterReplay, lag };
}

export const example: Example<ReplayFromPointResult> = {
  name: 'replay-from-point',
  description: 'a group created with startAfter reads from a point; a replay from a sequence redelivers from there',
  run,
};
