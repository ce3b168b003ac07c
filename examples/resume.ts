/**
 * A durable store keeps the log and each group's place in it across runs.
 * Every run first handles what an earlier run appended but did not get to,
 * then appends six events of its own and handles only three, leaving three
 * for the next run. Run the demo twice on one PGlite directory (or one
 * PostgreSQL schema, or one Redis prefix) to see the second run continue
 * where the first stopped; on the memory backend every run is the first.
 */
import { isRheoError, type Rheo } from '../src/index.js';
import type { Example, Log } from './example-kit.js';

export interface ResumeResult {
  /** Which run of the demo on this store this was (1 for the first). */
  run: number;
  /** Events earlier runs left unhandled, handled by this one: `run/n`. */
  resumed: string[];
  /** Events this run left for the next one. */
  left: number;
}

const STREAM = 'demo-journal';
const GROUP = 'reader';

export async function run(rheo: Rheo, log: Log): Promise<ResumeResult> {
  try {
    await rheo.createStream(STREAM);
    await rheo.createGroup(STREAM, GROUP);
  } catch (error) {
    // Created by an earlier run: that is the point.
    if (!isRheoError(error, 'already_exists')) throw error;
  }
  const earlier = await rheo.query(STREAM, { where: { payload: { n: 1 } }, limit: 1000 });
  const runNumber = earlier.events.length + 1;

  const resumed: string[] = [];
  for (let leases = await rheo.fetch<{ run: number; n: number }>(STREAM, GROUP, { limit: 100 }); leases.length > 0; leases = await rheo.fetch(STREAM, GROUP, { limit: 100 })) {
    for (const lease of leases) resumed.push(`${lease.event.payload.run}/${lease.event.payload.n}`);
    await rheo.ackMany(leases);
  }
  log(
    resumed.length > 0
      ? `run ${runNumber} on ${rheo.backend.name}: picked up ${resumed.length} event(s) an earlier run left: ${resumed.join(', ')}`
      : `run ${runNumber} on ${rheo.backend.name}: nothing left by an earlier run${rheo.capabilities.durable ? '' : ' (memory: every run starts empty)'}`,
  );

  await rheo.appendBatch(STREAM, Array.from({ length: 6 }, (_, i) => ({ type: 'entry', payload: { run: runNumber, n: i + 1 } })));
  const handled = await rheo.fetch<{ run: number; n: number }>(STREAM, GROUP, { limit: 3 });
  await rheo.ackMany(handled);
  const lag = (await rheo.lag(STREAM, GROUP)).lag;
  log(`appended ${runNumber}/1..6, handled ${handled.map((l) => `${l.event.payload.run}/${l.event.payload.n}`).join(', ')}; ${lag} left for the next run`);
  return { run: runNumber, resumed, left: lag };
}

export const example: Example<ResumeResult> = {
  name: 'resume',
  description: 'the log and the group survive the process: run the demo twice on one durable store',
  run,
};
