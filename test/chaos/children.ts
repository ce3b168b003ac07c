import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** How a child ended: exactly one of `code` and `signal` is set. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * A chaos child process (worker or appender) and what the scenario did to it,
 * so that an exit can be judged: a crash is any exit other than code 0 that
 * the scenario did not cause itself with SIGKILL.
 */
export class ChaosChild {
  readonly name: string;
  readonly process: ChildProcess;
  /** Resolves when the child has exited (never rejects). */
  readonly exited: Promise<ChildExit>;
  /** Resolves when the child reports that it has started (or when it exits). */
  readonly ready: Promise<void>;
  #exit: ChildExit | null = null;
  #ready = false;
  #killedByScenario = false;
  #stderr = '';
  #stdout = '';

  /** `script`: a compiled child script (see child-bundle.ts); `args` reach it as JSON in argv[2]. */
  constructor(name: string, script: string, args: unknown) {
    this.name = name;
    this.process = spawn(process.execPath, [script, JSON.stringify(args)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    this.process.stdout?.on('data', (chunk: Buffer) => (this.#stdout = (this.#stdout + chunk.toString()).slice(-4000)));
    // The head of stderr: an uncaught error prints its name and stack first.
    this.process.stderr?.on('data', (chunk: Buffer) => (this.#stderr = (this.#stderr + chunk.toString()).slice(0, 6000)));
    this.exited = new Promise((resolve) => {
      this.process.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        resolve(this.#exit);
      });
      // A child that cannot even start is a crash too, not an exception in the runner.
      this.process.once('error', (error) => {
        this.#stderr += `spawn failed: ${error.message}`;
        this.#exit = { code: 127, signal: null };
        resolve(this.#exit);
      });
    });
    this.ready = new Promise((resolve) => {
      this.process.once('message', () => {
        this.#ready = true;
        resolve();
      });
      void this.exited.then(() => resolve());
    });
  }

  get running(): boolean {
    return this.#exit === null;
  }

  /** Running, and past its start-up. */
  get consuming(): boolean {
    return this.#ready && this.#exit === null;
  }

  get stdout(): string {
    return this.#stdout;
  }

  get stderr(): string {
    return this.#stderr;
  }

  /** Tells a started appender to begin. */
  go(): void {
    if (this.running) this.process.send('go');
  }

  /** Sends a signal as part of the scenario. SIGKILL marks the death as expected. */
  signal(signal: NodeJS.Signals): void {
    if (!this.running) return;
    if (signal === 'SIGKILL') this.#killedByScenario = true;
    this.process.kill(signal);
  }

  /** A description of the crash, or null when the exit was clean or caused by the scenario. */
  crash(): string | null {
    const exit = this.#exit;
    if (exit === null) return `${this.name} is still running`;
    if (exit.code === 0) return null;
    if (exit.signal === 'SIGKILL' && this.#killedByScenario) return null;
    const how = exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
    const trace = this.#stderr
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => /error|^at /i.test(line))
      .slice(0, 24);
    return `${this.name} exited with ${how}: ${trace.join(' | ')}`;
  }
}
