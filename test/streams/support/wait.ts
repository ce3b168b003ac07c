import type { EventEmitter } from 'node:events';
import type { Readable } from 'node:stream';

const GUARD_MS = 10_000;

/**
 * Waits for a condition by yielding to the event loop (setImmediate), never
 * by sleeping; the wall-clock guard only turns a hang into a clear failure.
 */
export async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + GUARD_MS;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/** The next emission of `event` (whose first argument satisfies `predicate`). */
export function nextEvent<A>(emitter: EventEmitter, event: string, predicate: (arg: A) => boolean = () => true): Promise<A> {
  return new Promise<A>((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, listener);
      reject(new Error(`timed out waiting for "${event}"`));
    }, GUARD_MS);
    timer.unref();
    const listener = (arg: A): void => {
      if (!predicate(arg)) return;
      clearTimeout(timer);
      emitter.off(event, listener);
      resolve(arg);
    };
    emitter.on(event, listener);
  });
}

/** Reads one chunk in paused mode (never attaches a `data` listener, which would switch to flowing). */
export async function readOne<C>(readable: Readable): Promise<C> {
  for (;;) {
    const chunk = readable.read() as C | null;
    if (chunk !== null) return chunk;
    await nextEvent(readable, 'readable');
  }
}
