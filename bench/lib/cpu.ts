import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux). */
const TICK_MS = 10;

/** The fields of /proc/<pid>/stat after the command name (which may hold spaces, in parentheses); `null` once it is gone or off Linux. */
function statFields(pid: number | string): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** utime + stime of one process in ms, from /proc; 0 once it is gone or off Linux. */
export function processCpuMs(pid: number): number {
  const fields = statFields(pid);
  return fields ? (Number(fields[11]) + Number(fields[12])) * TICK_MS : 0;
}

/**
 * CPU of every `postgres` process on this machine in ms (the server, its
 * backends and background workers), or `null` when none is visible (a
 * server elsewhere). Each process counts its own time and that of the
 * children it has reaped: a backend that exits between two readings (a
 * member's pool closing, a member exiting) takes its time out of the first
 * sum, but its postmaster's reaped-children time gets it back. Without
 * that, a span in which backends exited came out negative (-35 µs per event
 * for two competing members).
 */
export function postgresCpuMs(): number | null {
  let total = 0;
  let found = false;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    if (!stat.includes(' (postgres) ')) continue;
    found = true;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    total += (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * TICK_MS;
  }
  return found ? total : null;
}

/** cutime + cstime of one process in ms: the CPU of its children it has waited for. */
function reapedChildrenCpuMs(pid: number): number {
  const fields = statFields(pid);
  return fields ? (Number(fields[13]) + Number(fields[14])) * TICK_MS : 0;
}

/** The parent pid of a process, from /proc; `null` once it is gone or off Linux. */
export function parentPid(pid: number): number | null {
  const fields = statFields(pid);
  return fields ? Number(fields[1]) : null;
}

/**
 * CPU of one PostgreSQL server in ms: its postmaster and every process it
 * forked (backends, background workers). Unlike `postgresCpuMs` it leaves
 * out other clusters on the machine, which a shared machine runs.
 */
export function postgresServerCpuMs(postmasterPid: number): number {
  // A backend that exits (a pool closing an idle connection) takes its time
  // from the sum below, but the postmaster reaps it, which adds that time to
  // its own cutime + cstime: counted here, so the sum never goes back.
  let total = processCpuMs(postmasterPid) + reapedChildrenCpuMs(postmasterPid);
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    if (parentPid(Number(entry)) === postmasterPid) total += processCpuMs(Number(entry));
  }
  return total;
}

/** CPU spent by the given processes and by PostgreSQL between `start()` and `stop()`, per event in µs. */
export class CpuSpan {
  readonly #pids: number[];
  readonly #self: boolean;
  #processes = 0;
  #postgres: number | null = null;
  #selfStart: NodeJS.CpuUsage | null = null;

  /** `self`: count this process too (a loop that runs here). */
  constructor(pids: number[], self = false) {
    this.#pids = pids;
    this.#self = self;
  }

  start(): void {
    this.#processes = this.#pids.reduce((sum, pid) => sum + processCpuMs(pid), 0);
    this.#postgres = postgresCpuMs();
    this.#selfStart = this.#self ? process.cpuUsage() : null;
  }

  /** µs per event: of the processes (with this one when asked), and of PostgreSQL (`null` when not visible). */
  stop(events: number): { processUs: number; postgresUs: number | null } {
    let ms = this.#pids.reduce((sum, pid) => sum + processCpuMs(pid), 0) - this.#processes;
    if (this.#selfStart) {
      const used = process.cpuUsage(this.#selfStart);
      ms += (used.user + used.system) / 1000;
    }
    const pgNow = postgresCpuMs();
    const postgresMs = this.#postgres === null || pgNow === null ? null : pgNow - this.#postgres;
    return { processUs: (ms * 1000) / events, postgresUs: postgresMs === null ? null : (postgresMs * 1000) / events };
  }
}

/**
 * CPU this process used while it sat idle for `ms` (its consumers waiting
 * for appends), as a percentage of one core: user + system time over wall
 * time, GC and libuv threads included.
 */
export async function idleCpuPercent(ms: number): Promise<number> {
  const before = process.cpuUsage();
  const t0 = performance.now();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const used = process.cpuUsage(before);
  return ((used.user + used.system) / 1000 / (performance.now() - t0)) * 100;
}

/** Jiffies of all the machine's cores from /proc/stat: busy (everything but idle and iowait) and total; `null` off Linux. */
export function machineJiffies(): { busy: number; total: number } | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    const fields = line.trim().split(/\s+/).slice(1, 9).map(Number);
    const total = fields.reduce((a, b) => a + b, 0);
    return { busy: total - fields[3]! - fields[4]!, total };
  } catch {
    return null;
  }
}

/**
 * Waits, up to `maxMs`, for a second in which the whole machine is at most
 * `busyPercent` busy (every core, from /proc/stat): what an earlier case left
 * running (PostgreSQL's autovacuum and checkpoints after a drain, an AOF
 * rewrite) would otherwise run beside the next case. Resolves with the busy
 * share of the last second measured (`null` off Linux, at once).
 */
export async function quietMachine(busyPercent = 15, maxMs = 30_000): Promise<number | null> {
  const deadline = Date.now() + maxMs;
  for (;;) {
    const a = machineJiffies();
    if (a === null) return null;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const b = machineJiffies();
    if (b === null) return null;
    const busy = b.total > a.total ? ((b.busy - a.busy) / (b.total - a.total)) * 100 : 0;
    if (busy <= busyPercent || Date.now() >= deadline) return busy;
  }
}
