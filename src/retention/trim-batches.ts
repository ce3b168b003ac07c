import type { Backend, TrimReport, TrimRequest } from '../core/backend.js';
import { RheoError } from '../core/errors.js';

/** Events per backend `trim` call: one short transaction each on PostgreSQL. */
export const DEFAULT_TRIM_BATCH = 10_000;

export function emptyTrimReport(): TrimReport {
  return { deleted: 0, partitions: {}, forced: [] };
}

/**
 * Calls `backend.trim` in bounded batches until a batch deletes fewer than
 * `request.limit` events or `maxBatches` ran, and sums the reports: per
 * partition the deleted counts add up and the last low watermark wins; forced
 * losses add up per (group, partition).
 */
export async function trimInBatches(
  backend: Backend,
  stream: string,
  request: TrimRequest,
  maxBatches = Number.POSITIVE_INFINITY,
): Promise<TrimReport> {
  const trim = backend.trim?.bind(backend);
  if (!backend.capabilities.retention || !trim) throw new RheoError('unsupported', `trim needs the "retention" capability, which the ${backend.name} backend does not have`);
  const total = emptyTrimReport();
  const forced = new Map<string, { group: string; partition: number; unsettled: number }>();
  for (let batch = 0; batch < maxBatches; batch++) {
    const report = await trim(stream, request);
    total.deleted += report.deleted;
    for (const [p, r] of Object.entries(report.partitions)) {
      const prev = total.partitions[Number(p)];
      total.partitions[Number(p)] = { deleted: (prev?.deleted ?? 0) + r.deleted, lowWatermark: r.lowWatermark };
    }
    for (const f of report.forced) {
      const key = `${f.partition}\u0000${f.group}`;
      const prev = forced.get(key);
      if (prev) prev.unsettled += f.unsettled;
      else forced.set(key, { ...f });
    }
    if (report.deleted < request.limit) break;
  }
  total.forced = [...forced.values()].sort((a, b) => (a.group < b.group ? -1 : a.group > b.group ? 1 : a.partition - b.partition));
  return total;
}
