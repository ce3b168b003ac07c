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
