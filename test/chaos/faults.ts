import { setTimeout as delay } from 'node:timers/promises';
import type { ChaosChild } from './children.js';

/** One kind of fault, struck every `everyMs` while the appenders run. */
export type Fault =
  | { kind: 'none' }
  /** SIGKILL a random worker (it settles and releases nothing) and start a replacement. */
  | { kind: 'sigkill'; everyMs: number }
  /** SIGSTOP a random worker for `pauseMs` (longer than the lease), then SIGCONT: it wakes up holding stale leases. */
  | { kind: 'sigstop'; everyMs: number; pauseMs: number }
  /**
   * Drops every connection of the workers and appenders: pg_terminate_backend
   * (pool and LISTEN connections alike), or CLIENT KILL on Redis (command and
   * subscriber connections alike).
   */
  | { kind: 'terminate'; everyMs: number }
  /**
   * pg_ctl restart -m fast or -m immediate (crash recovery) while everything
   * keeps running; on Redis (either mode) SIGKILL redis-server and start it
   * again on its files (AOF with appendfsync always).
   */
  | { kind: 'restart'; mode: 'fast' | 'immediate'; everyMs: number };

export interface FaultTarget {
  server: { restart(mode: 'fast' | 'immediate'): void | Promise<void> };
  /** Drops every connection but the runner's; `false` when there was none. */
  dropConnections(): Promise<boolean>;
  /** Workers past their start-up and not dead. */
  liveWorkers(): ChaosChild[];
  startWorker(): ChaosChild;
}

/** Strikes once; `false` when there was nothing to strike (no worker past its start-up). */
export async function injectFault(fault: Fault, target: FaultTarget): Promise<boolean> {
  switch (fault.kind) {
    case 'none':
      return false;
    case 'sigkill': {
      // Only a worker past its start-up holds leases, and one is always left serving the group.
      const live = target.liveWorkers();
      if (live.length < 2) return false;
      pick(live)?.signal('SIGKILL');
      target.startWorker();
      return true;
    }
    case 'sigstop': {
      const worker = pick(target.liveWorkers());
      if (!worker) return false;
      worker.signal('SIGSTOP');
      await delay(fault.pauseMs);
      worker.signal('SIGCONT');
      return true;
    }
    case 'terminate':
      return target.dropConnections().catch(() => false);
    case 'restart':
      await target.server.restart(fault.mode);
      return true;
  }
}

function pick<T>(items: T[]): T | undefined {
  return items[Math.floor(Math.random() * items.length)];
}
