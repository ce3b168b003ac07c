/**
 * The sticky partition assignor every backend runs inside its atomic
 * heartbeat step (docs/design.md#two-ways-to-consume-a-group). Pure and deterministic: the same input gives
 * the same output on every backend and in every process.
 *
 * - Balanced: member counts differ by at most one.
 * - Sticky: each member keeps as many of its previous partitions as its
 *   quota allows. From a balanced assignment, a join moves only the
 *   partitions the newcomer needs, and a leave moves only the leaver's.
 *
 * The `base + 1` quotas go to the members holding the most partitions now
 * (ties by member id), so nobody gives a partition up only to receive another.
 */
export function assignPartitions(
  partitions: number,
  members: readonly string[],
  previous: ReadonlyArray<string | null>,
): Array<string | null> {
  const live = [...new Set(members)].sort(compareIds);
  const out: Array<string | null> = Array.from({ length: partitions }, () => null);
  if (live.length === 0 || partitions === 0) return out;

  const held = new Map<string, number[]>(live.map((m) => [m, []]));
  for (let p = 0; p < partitions; p++) {
    const owner = previous[p];
    if (owner != null) held.get(owner)?.push(p);
  }
  const base = Math.floor(partitions / live.length);
  const extra = partitions % live.length;
  const byHolding = [...live].sort((a, b) => held.get(b)!.length - held.get(a)!.length || compareIds(a, b));
  const quota = new Map<string, number>(byHolding.map((m, i) => [m, base + (i < extra ? 1 : 0)]));

  const free: number[] = [];
  const taken = new Array<boolean>(partitions).fill(false);
  for (const m of live) {
    const keep = held.get(m)!.slice(0, quota.get(m));
    for (const p of keep) {
      out[p] = m;
      taken[p] = true;
    }
  }
  for (let p = 0; p < partitions; p++) if (!taken[p]) free.push(p);
  let next = 0;
  for (const m of live) {
    let count = Math.min(held.get(m)!.length, quota.get(m)!);
    while (count < quota.get(m)! && next < free.length) {
      out[free[next++]!] = m;
      count++;
    }
  }
  return out;
}

/** Code-unit order, the same in every JavaScript engine and locale. */
function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
