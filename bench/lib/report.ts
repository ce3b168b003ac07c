import type { MetricSummary } from './context.js';
import { formatNumber } from './stats.js';

/** A target from issues 6, 11 and 12, judged on medians of the same run. */
export interface TargetCheck {
  target: string;
  measured: string;
  met: boolean | null;
}

export interface Environment {
  date: string;
  command: string;
  quick: boolean;
  runs: number;
  node: string;
  postgres: string;
  cpus: number;
  cpuModel: string;
  platform: string;
  loadAverage: string;
  peers: Record<string, string>;
  commit: string;
}

export function textTable(rows: MetricSummary[]): string {
  const header = ['scenario', 'case', 'median', 'min', 'max', 'unit', 'n'];
  const body = rows.map((m) => [
    m.scenario,
    m.name,
    formatNumber(m.median),
    formatNumber(m.min),
    formatNumber(m.max),
    m.unit,
    String(m.samples.length),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => r[i]!.length)));
  const right = new Set([2, 3, 4, 6]);
  const line = (cells: string[]): string =>
    cells.map((c, i) => (right.has(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

export function markdownSummary(
  env: Environment,
  rows: MetricSummary[],
  targets: TargetCheck[],
  skipped: Array<{ scenario: string; reason: string }>,
  notes: string[],
): string {
  const out: string[] = [];
  out.push('# rheo benchmark results', '');
  out.push(
    `Run ${env.date} on rheo ${env.commit} with \`${env.command}\`${env.quick ? ' (quick smoke run: sizes reduced, not representative)' : ''}: ` +
      `${env.cpus} × ${env.cpuModel}, ${env.platform}, Node ${env.node}, ${env.postgres} (default durability: fsync on), ` +
      `${Object.entries(env.peers)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}. Load average at start: ${env.loadAverage}. Each case ran ${env.runs}×; median (min–max).`,
  );
  out.push('');
  out.push('## Targets (issues 6, 11, 12)', '');
  out.push('| target | measured | met |', '|---|---|---|');
  for (const t of targets) out.push(`| ${t.target} | ${t.measured} | ${t.met === null ? 'n/a' : t.met ? 'yes' : '**no**'} |`);
  out.push('');
  let scenario = '';
  for (const m of rows) {
    if (m.scenario !== scenario) {
      scenario = m.scenario;
      out.push('', `## ${scenario}`, '', '| case | median | min | max | unit |', '|---|---:|---:|---:|---|');
    }
    out.push(`| ${m.name} | ${formatNumber(m.median)} | ${formatNumber(m.min)} | ${formatNumber(m.max)} | ${m.unit} |`);
  }
  if (skipped.length > 0) {
    out.push('', '## Skipped', '');
    for (const s of skipped) out.push(`- ${s.scenario}: ${s.reason}`);
  }
  if (notes.length > 0) {
    out.push('', '## Notes', '');
    for (const n of notes) out.push(`- ${n}`);
  }
  out.push('');
  return out.join('\n');
}

export interface Bar {
  label: string;
  value: number;
  min: number;
  max: number;
  /** rheo bars and peer bars get different colours. */
  kind: 'rheo' | 'peer' | 'ceiling';
}

export interface BarGroup {
  title: string;
  bars: Bar[];
}

const COLOURS = { rheo: '#2f6db5', peer: '#c2703d', ceiling: '#8a8a8a' } as const;

function escapeXml(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

/**
 * A self-contained horizontal bar chart (median bars, min–max whiskers), one
 * linear scale per group so each group reads on its own.
 */
export function svgChart(title: string, subtitle: string, groups: BarGroup[]): string {
  const width = 900;
  const labelWidth = 330;
  const valueWidth = 90;
  const plotWidth = width - labelWidth - valueWidth - 20;
  const barHeight = 20;
  const barGap = 8;
  const groupGap = 34;
  let y = 64;
  const parts: string[] = [];
  for (const group of groups) {
    const scaleMax = Math.max(1, ...group.bars.map((b) => b.max));
    parts.push(
      `<text x="10" y="${y}" font-size="14" font-weight="bold">${escapeXml(group.title)}</text>`,
    );
    y += 12;
    for (const bar of group.bars) {
      const w = (bar.value / scaleMax) * plotWidth;
      const x0 = labelWidth;
      const cy = y + barHeight / 2;
      parts.push(
        `<text x="${labelWidth - 8}" y="${cy + 4}" font-size="12" text-anchor="end">${escapeXml(bar.label)}</text>`,
        `<rect x="${x0}" y="${y}" width="${w.toFixed(1)}" height="${barHeight}" fill="${COLOURS[bar.kind]}"/>`,
        `<line x1="${(x0 + (bar.min / scaleMax) * plotWidth).toFixed(1)}" x2="${(x0 + (bar.max / scaleMax) * plotWidth).toFixed(1)}" y1="${cy}" y2="${cy}" stroke="#222" stroke-width="1.5"/>`,
        // The label goes past the whisker so the two never overlap.
        `<text x="${(x0 + Math.max(w, (bar.max / scaleMax) * plotWidth) + 6).toFixed(1)}" y="${cy + 4}" font-size="12">${escapeXml(formatNumber(bar.value))}/s</text>`,
      );
      y += barHeight + barGap;
    }
    y += groupGap - barGap;
  }
  const height = y + 10;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="24" font-size="18" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="10" y="44" font-size="12" fill="#444">${escapeXml(subtitle)}</text>`,
    ...parts,
    `</svg>`,
    '',
  ].join('\n');
}
