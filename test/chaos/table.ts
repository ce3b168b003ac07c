import type { ScenarioResult } from './scenario.js';

const COLUMNS: Array<[string, (r: ScenarioResult) => string]> = [
  ['scenario', (r) => r.name],
  ['events', (r) => String(r.events)],
  ['lost', (r) => String(r.lost)],
  ['duplicates', (r) => String(r.duplicates)],
  ['stale settles accepted', (r) => String(r.staleAccepted)],
  ['stale settles refused', (r) => String(r.staleRefused)],
  ['leases reclaimed', (r) => String(r.reclaims)],
  ['sequence gaps', (r) => String(r.gaps + r.logErrors)],
  ['process crashes', (r) => String(r.crashes.length)],
  ['faults', (r) => String(r.faults)],
  ['append retries', (r) => String(r.appendRetries)],
  ['events/s', (r) => String(Math.round(r.eventsPerSecond))],
  ['result', (r) => (r.passed ? 'pass' : r.drained ? 'FAIL' : 'FAIL (stalled)')],
];

/** The results as one Markdown table (it reads as well in a terminal as in docs/guarantees.md). */
export function formatTable(results: ScenarioResult[]): string {
  return markdownTable(COLUMNS, results);
}

/** Rows as a Markdown table with these columns: the first left-aligned, the rest right-aligned. */
export function markdownTable<R>(columns: Array<[string, (r: R) => string]>, results: R[]): string {
  const rows = [columns.map(([title]) => title), ...results.map((r) => columns.map(([, cell]) => cell(r)))];
  const widths = columns.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const line = (row: string[]): string =>
    `| ${row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i === 0 ? `${'-'.repeat(w + 1)}-` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(rows[0]!), rule, ...rows.slice(1).map(line)].join('\n');
}

/** What went wrong, scenario by scenario: crashes and examples of each failure. */
export function formatFailures(results: ScenarioResult[]): string {
  const lines: string[] = [];
  for (const r of results) {
    if (r.passed) continue;
    lines.push(`${r.name}:${r.drained ? '' : ' the group stopped draining (lag did not shrink)'}`);
    for (const crash of r.crashes) lines.push(`  crash: ${crash}`);
    for (const text of r.examples) lines.push(`  ${text}`);
  }
  return lines.join('\n');
}
