/**
 * The one workload every scenario uses, so rheo, the raw INSERT ceiling and
 * the peers move the same bytes: a small JSON object per event/job.
 */
// A type alias (not an interface) so it is assignable to rheo's JsonValue.
export type BenchPayload = {
  n: number;
  customer: string;
  amount: number;
};

export const EVENT_TYPE = 'order.placed';

export function payload(n: number): BenchPayload {
  return { n, customer: `c-${n % 997}`, amount: (n % 100) + 0.5 };
}

/** Splits `total` into chunks of at most `size` and calls `fn` for each [start, end). */
export async function inChunks(
  total: number,
  size: number,
  fn: (start: number, end: number) => Promise<void>,
): Promise<void> {
  for (let start = 0; start < total; start += size) {
    await fn(start, Math.min(total, start + size));
  }
}

/**
 * Pause after the i-th single append in the latency scenario: 5–15 ms,
 * varied so appends do not phase-lock with anyone's poll interval.
 */
export function latencyGapMs(i: number): number {
  return 5 + ((i * 7919) % 11);
}
