import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs';

/**
 * What the chaos children write down, one JSON object per line. A line is
 * written with a synchronous write(2) before the call it describes returns to
 * its caller: once write(2) returns the kernel holds the bytes, so a process
 * killed with SIGKILL an instant later cannot lose them (only a machine crash
 * could, which these scenarios do not simulate, hence no fsync).
 */
export type ChaosRecord =
  /** An append the backend acknowledged: the event is stored at partition:sequence. */
  | { k: 'appended'; id: string; p: number; s: number }
  /** A lease a fetch returned; `t` is the database clock at the claim (Lease.leasedAt). */
  | { k: 'claim'; id: string; lease: string; attempt: number; t: number }
  /** A handler run that finished, written just before the handler returns. */
  | { k: 'handled'; id: string; lease: string; attempt: number }
  /** One settle op and its answer; `t` is the wall clock when it was sent (the same machine clock as the database's). */
  | { k: 'settle'; op: string; id: string; lease: string; ok: boolean; code: string | null; t: number };

/** Appends records to a file with one synchronous write each. */
export class RecordWriter {
  readonly #fd: number;

  constructor(path: string) {
    this.#fd = openSync(path, 'a');
  }

  write(record: ChaosRecord): void {
    writeSync(this.#fd, `${JSON.stringify(record)}\n`);
  }

  writeAll(records: ChaosRecord[]): void {
    if (records.length === 0) return;
    writeSync(this.#fd, records.map((r) => `${JSON.stringify(r)}\n`).join(''));
  }

  close(): void {
    closeSync(this.#fd);
  }
}

/**
 * Every complete record of a file. Only the last line can be incomplete (its
 * writer died in the middle of writing it), so an unparsable last line is
 * skipped, and an unparsable line anywhere else throws.
 */
export function readRecords(path: string): ChaosRecord[] {
  if (!existsSync(path)) return [];
  const lines = readFileSync(path, 'utf8').split('\n');
  const records: ChaosRecord[] = [];
  lines.forEach((line, i) => {
    if (line === '') return;
    try {
      records.push(JSON.parse(line) as ChaosRecord);
    } catch (error) {
      if (i < lines.length - 1 && lines.slice(i + 1).some((l) => l !== '')) throw error;
    }
  });
  return records;
}
