import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { pgliteBackend } from '../../src/backends/pglite/pglite-backend.js';
import type { Lease } from '../../src/core/types.js';
import { createRheo } from '../../src/rheo.js';
import { ChaosChild } from './children.js';
import type { PgliteChildArgs } from './pglite-child.js';
import { readRecords } from './records.js';
import { markdownTable } from './table.js';

export interface PgliteDurabilitySpec {
  name: string;
  /** How many children are started and SIGKILLed, one after the other, on the same data directory. */
  kills: number;
  /** A running child is killed this long after its first confirmed round, uniformly at random in [min, max]. */
  minRunMs: number;
  maxRunMs: number;
  /** Every `startupKillEvery`-th child is killed during its start (PGlite's recovery, the lock take-over, migrate) instead. */
  startupKillEvery: number;
}

export interface PgliteDurabilityResult {
  name: string;
  kills: number;
  /** Appends the children saw confirmed, and events in the log at the end. */
  appended: number;
  stored: number;
  /** Acks the children saw confirmed. */
  acked: number;
  /** Confirmed appends missing from the log, or stored at another position. */
  lost: string[];
  /** Events delivered again after an ack of theirs was confirmed. */
  redelivered: string[];
  /** Events in the log that no ack covers and the group never delivered again: the frontier passed them unsettled. */
  skipped: string[];
  /** Lag left after the final drain. */
  lag: number;
  crashes: string[];
  seconds: number;
  passed: boolean;
}

/** The scenario of `npm run chaos` (scale 1) and, shortened, of `npm test`. */
export function pgliteDurabilityScenario(scale = 1): PgliteDurabilitySpec {
  return { name: 'pglite: SIGKILL the process, reopen', kills: Math.max(3, Math.round(12 * scale)), minRunMs: 0, maxRunMs: 1500, startupKillEvery: 4 };
}

/**
 * One PGlite data directory, a chain of children (pglite-child.ts) each
 * SIGKILLed at a random point, then this process reopens the directory and
 * checks what survived against what the children saw confirmed. The
 * checking backend's clock runs an hour ahead, so every lease a dead child
 * held has expired and its event is delivered again by the final drain.
 */
export async function runPgliteDurability(
  spec: PgliteDurabilitySpec,
  options: { workDir: string; child: string; random?: () => number },
): Promise<PgliteDurabilityResult> {
  const random = options.random ?? Math.random;
  const started = Date.now();
  const args: PgliteChildArgs = {
    dataDir: join(options.workDir, 'pglite-data'),
    records: join(options.workDir, 'pglite-records.jsonl'),
    stream: 'chaos',
    group: 'g',
  };
  const crashes: string[] = [];
  for (let i = 1; i <= spec.kills; i++) {
    const child = new ChaosChild(`pglite child ${i}`, options.child, args);
    if (i % spec.startupKillEvery === 0) {
      await delay(Math.round(random() * 1000));
    } else {
      await child.ready;
      await delay(spec.minRunMs + Math.round(random() * (spec.maxRunMs - spec.minRunMs)));
    }
    child.signal('SIGKILL');
    await child.exited;
    const crash = child.crash();
    if (crash) crashes.push(crash);
  }

  const records = readRecords(args.records);
  const appended = new Map<string, { p: number; s: number }>();
  const ackSent = new Set<string>();
  const acked = new Set<string>();
  const redelivered = new Set<string>();
  for (const r of records) {
    if (r.k === 'appended') appended.set(r.id, { p: r.p, s: r.s });
    else if (r.k === 'claim' && acked.has(r.id)) redelivered.add(r.id);
    else if (r.k === 'settle' && r.op === 'ack') {
      if (r.code === 'sent') ackSent.add(r.id);
      else if (r.ok) acked.add(r.id);
    }
  }

  const backend = pgliteBackend({ dataDir: args.dataDir, clock: { now: () => Date.now() + 3_600_000 } });
  const rheo = createRheo({ backend, retention: { enabled: false } });
  try {
    await rheo.migrate();
    const stored = new Map<string, { p: number; s: number }>();
    for (let p = 0; p < 3; p++) {
      for (let after = 0; ; ) {
        const page = await rheo.read(args.stream, { partition: p, after, limit: 10_000 });
        for (const e of page) stored.set(e.id, { p: e.partition, s: e.sequence });
        if (page.length < 10_000) break;
        after = page[page.length - 1]!.sequence;
      }
    }
    const lost = [...appended].filter(([id, at]) => stored.get(id)?.p !== at.p || stored.get(id)?.s !== at.s).map(([id]) => id);
    const drained = new Set<string>();
    for (;;) {
      const leases: Lease[] = await rheo.fetch(args.stream, args.group, { limit: 500 });
      if (leases.length === 0) break;
      for (const lease of leases) {
        if (acked.has(lease.event.id)) redelivered.add(lease.event.id);
        drained.add(lease.event.id);
      }
      await rheo.ackMany(leases);
    }
    const skipped = [...stored.keys()].filter((id) => !acked.has(id) && !ackSent.has(id) && !drained.has(id));
    const lag = (await rheo.lag(args.stream, args.group)).lag;
    const result = {
      name: spec.name,
      kills: spec.kills,
      appended: appended.size,
      stored: stored.size,
      acked: acked.size,
      lost,
      redelivered: [...redelivered],
      skipped,
      lag,
      crashes,
      seconds: (Date.now() - started) / 1000,
    };
    return { ...result, passed: lost.length === 0 && redelivered.size === 0 && skipped.length === 0 && lag === 0 && crashes.length === 0 && appended.size > 0 };
  } finally {
    await rheo.close();
  }
}

/** The results as one Markdown table. */
export function formatPgliteTable(results: PgliteDurabilityResult[]): string {
  return markdownTable<PgliteDurabilityResult>(
    [
      ['scenario', (r) => r.name],
      ['kills', (r) => String(r.kills)],
      ['appends confirmed', (r) => String(r.appended)],
      ['events stored', (r) => String(r.stored)],
      ['acks confirmed', (r) => String(r.acked)],
      ['appends lost', (r) => String(r.lost.length)],
      ['acked, delivered again', (r) => String(r.redelivered.length)],
      ['skipped unsettled', (r) => String(r.skipped.length)],
      ['lag after drain', (r) => String(r.lag)],
      ['process crashes', (r) => String(r.crashes.length)],
      ['result', (r) => (r.passed ? 'pass' : 'FAIL')],
    ],
    results,
  );
}

/** What went wrong, with examples. */
export function formatPgliteFailures(results: PgliteDurabilityResult[]): string {
  const lines: string[] = [];
  for (const r of results) {
    if (r.passed) continue;
    lines.push(`${r.name}:${r.appended === 0 ? ' no child confirmed any append' : ''}`);
    for (const crash of r.crashes) lines.push(`  crash: ${crash}`);
    if (r.lost.length) lines.push(`  lost appends: ${r.lost.slice(0, 5).join(', ')}`);
    if (r.redelivered.length) lines.push(`  acked, delivered again: ${r.redelivered.slice(0, 5).join(', ')}`);
    if (r.skipped.length) lines.push(`  skipped unsettled: ${r.skipped.slice(0, 5).join(', ')}`);
    if (r.lag) lines.push(`  lag after drain: ${r.lag}`);
  }
  return lines.join('\n');
}
