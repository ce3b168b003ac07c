import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

import type { Lease } from '../../src/index.js';
import type { BenchContext } from '../lib/context.js';
import { fill, openRheo } from '../lib/rheo-setup.js';
import { now, rate } from '../lib/stats.js';
import { drainWithProducer } from './consume.js';

export const STREAMS = '6 streams overhead';

export const STREAMS_SETTING = { maxDemand: 500, concurrency: 50 } as const;

export const STREAMS_CASES = {
  bare: 'bare object-mode Readable → Writable (same objects)',
  rheo: `rheo memory RheoProducer→lease sink (maxDemand ${STREAMS_SETTING.maxDemand}, concurrency ${STREAMS_SETTING.concurrency})`,
  ratio: 'rheo memory ÷ bare streams',
} as const;

/**
 * Scenario 6: the ceiling for the adapter. The memory backend through
 * `stream.pipeline` (claim, lease, hand over, settle, frontier) against a bare
 * object-mode `Readable` → `Writable` pipeline that moves the same lease
 * objects with nothing else to do, at the same highWaterMark.
 */
export async function streamsScenario(ctx: BenchContext): Promise<void> {
  const events = ctx.size(50_000, 5_000);
  for (let run = 0; run < ctx.runs; run++) {
    const rheo = await openRheo('memory');
    try {
      const stream = `streams-${run}`;
      await rheo.createStream(stream);
      await rheo.createGroup(stream, 'g');
      await fill(rheo, stream, events, 5000);
      // The same objects the adapter moves: leases of these events, claimed by another group.
      await rheo.createGroup(stream, 'objects');
      const objects: Lease[] = [];
      while (objects.length < events) objects.push(...(await rheo.fetch(stream, 'objects', { limit: 5000 })));

      // The bare pipeline finishes in milliseconds, so JIT warm-up and GC
      // timing swing it widely: warm up once, then take the best of three.
      await barePipeline(objects, STREAMS_SETTING.maxDemand);
      let bare = 0;
      for (let i = 0; i < 3; i++) bare = Math.max(bare, await barePipeline(objects, STREAMS_SETTING.maxDemand));
      const adapter = await drainWithProducer(rheo, { stream, group: 'g' }, events, STREAMS_SETTING);
      ctx.record(STREAMS, STREAMS_CASES.bare, 'events/s', bare);
      ctx.record(STREAMS, STREAMS_CASES.rheo, 'events/s', adapter);
      ctx.record(STREAMS, STREAMS_CASES.ratio, 'x', adapter / bare);
    } finally {
      await rheo.close();
    }
  }
}

async function barePipeline(objects: Lease[], highWaterMark: number): Promise<number> {
  let i = 0;
  let seen = 0;
  const source = new Readable({
    objectMode: true,
    highWaterMark,
    read() {
      while (i < objects.length) {
        if (!this.push(objects[i++])) return;
      }
      this.push(null);
    },
  });
  const sink = new Writable({
    objectMode: true,
    highWaterMark,
    write(_lease: Lease, _encoding, callback) {
      seen++;
      callback();
    },
  });
  const t0 = now();
  await pipeline(source, sink);
  if (seen !== objects.length) throw new Error(`bare pipeline moved ${seen} of ${objects.length}`);
  return rate(objects.length, now() - t0);
}
