import { median, now, sleep, waitUntil } from './stats.js';
import { latencyGapMs } from './workload.js';

/**
 * One system in an interleaved latency run: an idle consumer or worker that
 * is already waiting, and how to send it one event or job. `send(at)` sends
 * one stamped with `at`; the system's handler pushes `now() - at` onto
 * `latencies`.
 */
export interface LatencySubject {
  readonly name: string;
  readonly latencies: number[];
  send(at: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Idle append → handler start of several systems, measured in turns: one
 * event to the first, its handler started, a gap of 5–15 ms, one to the next,
 * and so on, the first of each round moving on by one. Measured one system
 * after the other, this 2-vCPU machine's speed drifted between the cases by
 * more than the difference measured (a raw `XREADGROUP BLOCK` wake varied
 * 0.11–0.4 ms between hours); in turns every system sees the same moments.
 * Returns each subject's p50 in ms, in the order given.
 */
export async function interleavedLatency(subjects: readonly LatencySubject[], samples: number): Promise<number[]> {
  for (let i = 0; i < samples; i++) {
    for (let k = 0; k < subjects.length; k++) {
      const subject = subjects[(i + k) % subjects.length]!;
      const before = subject.latencies.length;
      await subject.send(now());
      await waitUntil(`${subject.name} wake`, () => subject.latencies.length > before, 10_000, 1);
      await sleep(latencyGapMs(i * subjects.length + k));
    }
  }
  return subjects.map((s) => median(s.latencies));
}
