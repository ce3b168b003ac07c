import type { LagReport } from '../core/types.js';
import { partitionsOf } from './lag-figures.js';
import { formatAge } from './table.js';

/** Lag per partition at one instant, kept to compute how fast it changes. */
export interface LagSample {
  at: number;
  lag: Map<string, number>;
}

const BAR_WIDTH = 40;

/**
 * One frame of `rheo lag --watch`: per group and partition, a bar scaled to
 * the largest lag on screen, the lag as count and age, the low watermark
 * (first retained sequence: it rises as retention trims), and the rate since
 * the previous frame (negative: the group is catching up).
 */
export function renderLagFrame(stream: string, reports: LagReport[], previous: LagSample | null, now: number): { text: string; sample: LagSample } {
  const sample: LagSample = { at: now, lag: new Map() };
  const lines: string[] = [`rheo lag ${stream}   ${new Date(now).toISOString()}   (Ctrl-C to quit)`, ''];
  let max = 1;
  for (const report of reports) for (const [, p] of partitionsOf(report)) max = Math.max(max, p.lag);
  const seconds = previous ? (now - previous.at) / 1000 : 0;
  for (const report of reports) {
    lines.push(`group ${report.group}   total lag ${report.lag}`);
    for (const [partition, p] of partitionsOf(report)) {
      const id = `${report.group}/${partition}`;
      sample.lag.set(id, p.lag);
      const filled = p.lag === 0 ? 0 : Math.max(1, Math.round((p.lag / max) * BAR_WIDTH));
      const bar = '█'.repeat(filled) + '░'.repeat(BAR_WIDTH - filled);
      const before = previous?.lag.get(id);
      let rate = '';
      if (before !== undefined && seconds > 0) {
        const perSecond = (p.lag - before) / seconds;
        if (perSecond < 0) rate = `shrinking ${(-perSecond).toFixed(1)}/s`;
        else if (perSecond > 0) rate = `growing ${perSecond.toFixed(1)}/s`;
        else rate = 'steady';
        if (perSecond < 0 && p.lag > 0) rate += `, clear in ~${formatAge((p.lag / -perSecond) * 1000)}`;
      }
      const age = p.oldestUnsettledAt ? formatAge(now - p.oldestUnsettledAt.getTime()) : '-';
      const low = `low ${p.lowWatermark}`;
      lines.push(`  p${String(partition).padEnd(4)} ${bar} ${String(p.lag).padStart(9)}  age ${age.padEnd(7)} ${low.padEnd(14)} ${rate}`);
    }
    lines.push('');
  }
  return { text: lines.join('\n'), sample };
}
