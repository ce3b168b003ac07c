import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { RheoError } from '../../core/errors.js';

/** The lock's file name inside the data directory (PostgreSQL ignores files it does not know there). */
export const LOCK_FILE = 'rheo.lock';

/** Data directories this process holds, so a second backend on one of them is refused too. */
const heldHere = new Set<string>();

interface LockOwner {
  pid: number;
  host: string;
  since: string;
}

/**
 * One process per data directory. PGlite is a PostgreSQL backend with no
 * postmaster: two processes opening the same directory would each replay and
 * write the WAL and the heap files as if alone, and damage them; PGlite
 * itself does not refuse it (its `postmaster.pid` is left over after every
 * crash, so it cannot tell a live owner from a dead one). The lock is a
 * file created exclusively (`O_EXCL`) holding the owner's PID and host. A
 * lock left by a process that no longer runs on this host (SIGKILL, a power
 * cut) is stale and taken over; a lock from another host (a shared network
 * directory) is never assumed stale.
 */
export class DataDirLock {
  readonly dataDir: string;
  readonly #file: string;
  #held = true;

  private constructor(dataDir: string) {
    this.dataDir = dataDir;
    this.#file = join(dataDir, LOCK_FILE);
  }

  /** Takes the lock of `dataDir` (created if missing), or throws `backend_unavailable` naming the owner. */
  static acquire(dataDir: string): DataDirLock {
    const dir = resolve(dataDir);
    if (heldHere.has(dir)) {
      throw new RheoError('backend_unavailable', `PGlite data directory "${dir}" is already open in this process (pid ${process.pid}); a data directory has one backend at a time`);
    }
    try {
      mkdirSync(dir, { recursive: true });
    } catch (error) {
      throw new RheoError('backend_unavailable', `cannot create PGlite data directory "${dir}": ${(error as Error).message}`, { cause: error });
    }
    const lock = new DataDirLock(dir);
    // Two attempts: the second follows the removal of a stale lock.
    for (let attempt = 1; attempt <= 2; attempt++) {
      if (lock.#tryCreate()) {
        heldHere.add(dir);
        return lock;
      }
      const owner = lock.#readOwner();
      if (owner !== null && !isStale(owner)) throw inUse(dir, owner);
      lock.#removeStale(owner);
    }
    throw new RheoError('backend_unavailable', `PGlite data directory "${dir}" is locked by another process starting at the same time; retry`);
  }

  /** Removes the lock file if it is still ours. Idempotent. */
  release(): void {
    if (!this.#held) return;
    this.#held = false;
    heldHere.delete(this.dataDir);
    const owner = this.#readOwner();
    if (owner === null || (owner.pid === process.pid && owner.host === hostname())) {
      try {
        unlinkSync(this.#file);
      } catch {
        // Already gone.
      }
    }
  }

  #tryCreate(): boolean {
    let fd: number;
    try {
      fd = openSync(this.#file, 'wx', 0o644);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw new RheoError('backend_unavailable', `cannot lock PGlite data directory "${this.dataDir}": ${(error as Error).message}`, { cause: error });
    }
    try {
      const owner: LockOwner = { pid: process.pid, host: hostname(), since: new Date().toISOString() };
      writeSync(fd, `${JSON.stringify(owner)}\n`);
    } finally {
      closeSync(fd);
    }
    return true;
  }

  /** The owner recorded in the lock file; `null` for a missing, empty or unreadable one (a process killed while writing it). */
  #readOwner(): LockOwner | null {
    try {
      const parsed = JSON.parse(readFileSync(this.#file, 'utf8')) as Partial<LockOwner>;
      if (typeof parsed.pid !== 'number' || typeof parsed.host !== 'string') return null;
      return { pid: parsed.pid, host: parsed.host, since: String(parsed.since ?? '') };
    } catch {
      return null;
    }
  }

  /**
   * Removes a stale lock, unless it changed since it was read: another
   * process may have taken the stale lock over meanwhile.
   */
  #removeStale(seen: LockOwner | null): void {
    const now = this.#readOwner();
    if (seen !== null && (now === null || now.pid !== seen.pid || now.since !== seen.since)) return;
    try {
      unlinkSync(this.#file);
    } catch {
      // Removed by whoever took it over first; the next attempt finds out.
    }
  }
}

function isStale(owner: LockOwner): boolean {
  if (owner.host !== hostname()) return false;
  // Our own PID, but not in `heldHere`: a lock from an earlier process that had this PID.
  if (owner.pid === process.pid) return true;
  try {
    process.kill(owner.pid, 0);
    return false;
  } catch (error) {
    // EPERM: the process exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

function inUse(dir: string, owner: LockOwner): RheoError {
  const where = owner.host === hostname() ? `process ${owner.pid}` : `process ${owner.pid} on host "${owner.host}"`;
  return new RheoError(
    'backend_unavailable',
    `PGlite data directory "${dir}" is in use by ${where} since ${owner.since}: PGlite is one process per data directory; stop that process or use a PostgreSQL server to share the data`,
  );
}
