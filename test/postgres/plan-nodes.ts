/** One node of `EXPLAIN (FORMAT JSON)` output, as far as the plan tests read it. */
export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  /** With ANALYZE: how many times the node ran. */
  'Actual Loops'?: number;
  Plans?: PlanNode[];
}

/** Every node of a plan, depth first. */
export function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/**
 * The log is partitioned into segments (migration 009): `events_0` (the
 * default partition) and `events_<n>` per opened segment. A plan reads the
 * log through these, never through the partitioned parent.
 */
export function isLogSegment(relation: string | undefined): boolean {
  return relation !== undefined && /^events_\d+$/.test(relation);
}

/** A segment's index named by its role: `pkey` or `id_idx` (migration 009 names them alike in every segment). */
export function isSegmentIndex(index: string | undefined, role: 'pkey' | 'id_idx'): boolean {
  return index !== undefined && new RegExp(`^events_\\d+_${role}$`).test(index);
}
