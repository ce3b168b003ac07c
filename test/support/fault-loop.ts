import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CHILD = fileURLToPath(new URL('./fault-loop-child.ts', import.meta.url));

/** One finished call of the child, as it reported it. */
export interface CallReport {
  op: string;
  ok: boolean;
  code?: string | null;
  name?: string;
}

export interface FaultLoopExit {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  poolErrors: number | null;
}

/**
 * Drives test/support/fault-loop-child.ts: a separate process, so that an
 * uncaught `'error'` from a dead connection shows as the child's crash rather
 * than taking the test runner down. Progress is observed through the calls the
 * child reports, never through timers.
 */
export class FaultLoop {
  readonly calls: CallReport[] = [];
  readonly #child: ChildProcess;
  readonly #exited: Promise<FaultLoopExit>;
  #stderr = '';
  #poolErrors: number | null = null;
  #exit: FaultLoopExit | null = null;
  #waiters: Array<() => void> = [];

  constructor(args: { url: string; schema: string; applicationName: string; mode: 'owned' | 'borrowed'; ops: string[] }) {
    this.#child = spawn(
      process.execPath,
      ['--import', 'tsx', CHILD, args.url, args.schema, args.applicationName, args.mode, args.ops.join(',')],
      { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] },
    );
    this.#child.stderr?.on('data', (chunk: Buffer) => (this.#stderr += chunk.toString()));
    this.#child.on('message', (message: { type: string; poolErrors?: number } & CallReport) => {
      if (message.type === 'call') this.calls.push({ op: message.op, ok: message.ok, code: message.code, name: message.name });
      if (message.type === 'done') this.#poolErrors = message.poolErrors ?? null;
      this.#notify();
    });
    this.#exited = new Promise((resolve) => {
      this.#child.on('exit', (exitCode, signal) => {
        this.#exit = { exitCode, signal, stderr: this.#stderr, poolErrors: this.#poolErrors };
        this.#notify();
        resolve(this.#exit);
      });
    });
  }

  /** Resolves once `predicate` holds for the reported calls; rejects if the child exits first. */
  async until(predicate: (calls: CallReport[]) => boolean): Promise<void> {
    while (!predicate(this.calls)) {
      if (this.#exit) {
        throw new Error(`the child exited (code ${this.#exit.exitCode}, signal ${this.#exit.signal}): ${this.#exit.stderr}`);
      }
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  /** Waits for `count` more calls to finish after this point. */
  moreCalls(count = 1): Promise<void> {
    const target = this.calls.length + count;
    return this.until((calls) => calls.length >= target);
  }

  /** Asks the child to close rheo and exit; resolves with how it exited. */
  stop(): Promise<FaultLoopExit> {
    if (this.#exit === null && this.#child.connected) this.#child.send('stop');
    return this.#exited;
  }

  /** Ends the child at once (cleanup after a failed test). */
  kill(): void {
    if (this.#exit === null) this.#child.kill('SIGKILL');
  }

  #notify(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }
}
