import { expect } from 'vitest';

/** Lets promise callbacks and immediates run: `n` turns of the event loop. */
export async function turns(n = 10): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** Whether `promise` has settled (resolved or rejected) after a few turns of the event loop. */
export async function isSettled(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await turns();
  return settled;
}

/**
 * Advances `timers` to just before `ms` and then to it, checking that
 * `calls` (a loop's claims or reads) gains one entry exactly at `ms`.
 */
export async function nextCallAt(timers: { advance(ms: number): void }, calls: readonly unknown[], ms: number, what: string): Promise<void> {
  const before = calls.length;
  timers.advance(ms - 1);
  await turns();
  expect(calls, `no ${what} before ${ms} ms`).toHaveLength(before);
  timers.advance(1);
  await turns();
  expect(calls, `a ${what} at ${ms} ms`).toHaveLength(before + 1);
}
