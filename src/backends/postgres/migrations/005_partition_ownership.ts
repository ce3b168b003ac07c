/**
 * Migration 5: partition ownership (docs/design.md#two-ways-to-consume-a-group). Members with sessions,
 * and per group and partition who owns it now (`owner`, fenced by
 * `generation`) and who the assignor wants to have it (`target`; while they
 * differ and the owner lives, the partition is being revoked since
 * `revoked_at`). The assignment itself is computed in TypeScript by
 * core/assignor.ts inside the heartbeat's transaction, which first locks the
 * group's `group_ownership` row, so heartbeats of one group serialise and
 * every backend runs the same assignor.
 *
 * No foreign keys to `groups`, like `deliveries`: deleting a group deletes
 * these rows explicitly, and the per-row FK check would cost every commit.
 */
export const migration005 = {
  version: 5,
  name: 'partition_ownership',
  sql: `
CREATE TABLE :schema.group_ownership (
  group_id    integer PRIMARY KEY,
  -- Bumped on every rebalance of the group (informational; fencing is per partition).
  generation  bigint NOT NULL DEFAULT 0
);

CREATE TABLE :schema.group_members (
  group_id    integer NOT NULL,
  member_id   text NOT NULL,
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (group_id, member_id)
);

-- Offset commits and fenced reads probe this primary key with
-- (group_id, partition) and compare owner and generation.
CREATE TABLE :schema.partition_owners (
  group_id    integer NOT NULL,
  partition   integer NOT NULL,
  owner       text,
  target      text,
  generation  bigint NOT NULL DEFAULT 0,
  revoked_at  timestamptz,
  PRIMARY KEY (group_id, partition)
);
`,
} as const;
