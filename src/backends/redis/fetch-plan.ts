/** What PEEK saw in one partition: sizes of its next claimable deliveries in claim order. */
export interface PartitionPeek {
  partition: number;
  sizes: number[];
  /** The list was cut (by the limit or the byte budget): the partition has more. */
  more: boolean;
}

/** One partition's part of a fetch, for the CLAIM script. */
export interface FetchShare {
  partition: number;
  /** How many deliveries to claim. */
  claims: number;
  /** Their planned total size plus a share of the unplanned budget: CLAIM stops before passing it. */
  bytes: number;
  /** Holds the fetch's first claim, which is taken even when larger than the budget. */
  first: boolean;
  /** The walk came back to this partition and claimed nothing: dead-letter the spent deliveries it passes. */
  extraTurn: boolean;
}

export interface FetchPlan {
  shares: FetchShare[];
}

/**
 * The memory backend's fetch walk (memory-backend.ts `fetch`), over sizes
 * instead of deliveries: round-robin over `peeks` (already in rotation
 * order), one claim per partition per round, until `limit`, or until a
 * claim other than the first would take the total past `maxBytes`, or until
 * every partition is exhausted. Spent deliveries never count against the
 * limit or the budget, so they do not appear here; CLAIM dead-letters those
 * it passes before its last claim, and on an extra turn those after it.
 */
export function planFetch(peeks: PartitionPeek[], limit: number, maxBytes: number): FetchPlan {
  const shares: FetchShare[] = peeks.map((p) => ({ partition: p.partition, claims: 0, bytes: 0, first: false, extraTurn: false }));
  const exhausted = new Set<number>();
  let total = 0;
  let bytes = 0;
  let stopped = false;
  while (total < limit && exhausted.size < peeks.length && !stopped) {
    for (let k = 0; k < peeks.length && total < limit && !stopped; k++) {
      if (exhausted.has(k)) continue;
      const peek = peeks[k]!;
      const share = shares[k]!;
      const size = peek.sizes[share.claims];
      if (size === undefined) {
        share.extraTurn = true;
        // A cut list means the next delivery exists but is over the budget.
        if (peek.more) stopped = true;
        else exhausted.add(k);
        continue;
      }
      if (bytes + size > maxBytes && total > 0) {
        share.extraTurn = true;
        stopped = true;
        continue;
      }
      if (total === 0) share.first = true;
      bytes += size;
      share.bytes += size;
      share.claims++;
      total++;
    }
  }
  // Concurrent fetches may have claimed some of the planned deliveries by the
  // time CLAIM runs, and the ones it takes instead may be larger: each share
  // may use an equal part of the unplanned budget, so the total still stays
  // within maxBytes.
  const used = shares.filter((s) => s.claims > 0);
  const slack = Math.max(0, maxBytes - bytes);
  for (const share of used) share.bytes += Math.floor(slack / used.length);
  return { shares };
}

/**
 * The same walk when the byte budget cannot stop it: how many claims each
 * partition (in rotation order) gets, one per round while it has more, until
 * `limit`. `known[k]` is how many partition k is known to have
 * (`Infinity`: at least as many as the walk could ask).
 */
export function planCounts(known: number[], limit: number): number[] {
  const counts = known.map(() => 0);
  let total = 0;
  for (let progressed = true; progressed && total < limit; ) {
    progressed = false;
    for (let k = 0; k < known.length && total < limit; k++) {
      if (counts[k]! >= known[k]!) continue;
      counts[k]!++;
      total++;
      progressed = true;
    }
  }
  return counts;
}
