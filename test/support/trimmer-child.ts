import { createRheo } from '../../src/rheo.js';

/*
 * A process that uses rheo with a stream under retention and a trimmer
 * ticking every 5 ms. argv[2] = 'close' closes rheo at the end, 'leave' does
 * not: either way the process must exit on its own once its work is done,
 * because the trimmer's timer never keeps the event loop alive. Prints the
 * low watermark the trimmer reached.
 */
const mode = process.argv[2];
const rheo = createRheo({ retention: { intervalMs: 5 } });
await rheo.createStream('s', { retention: { maxEvents: 2 } });
await rheo.appendBatch('s', Array.from({ length: 10 }, (_, i) => ({ payload: i })));
const started = Date.now();
let low = 1;
while (low === 1 && Date.now() - started < 10_000) {
  await new Promise((resolve) => setTimeout(resolve, 5));
  low = (await rheo.listStreams())[0]!.watermarks[0]!.lowWatermark;
}
if (mode === 'close') await rheo.close();
process.stdout.write(`${JSON.stringify({ low })}\n`);
