import { createHash } from 'node:crypto';
import { appendSql } from './sql/append.js';
import { claimableSql, claimSql, directClaimSql } from './sql/claim.js';
import { readOwnedSql } from './sql/ownership.js';
import { ms } from './connection.js';
import { nowSql } from './rows.js';

/**
 * Hot statements whose generic plan PostgreSQL would never pick on its own,
 * run as PL/pgSQL functions that force it.
 *
 * A named prepared statement gets five custom plans, then the generic one
 * only if its estimated cost is below the custom plans' average. The claim's
 * generic estimate (~1,800, from `LIMIT $4` subqueries it cannot size) and
 * the append's (~90 against ~12) never win, so both were planned again on
 * every call: 2.5–4.5 ms of planning for a claim whose execution takes
 * 1–2 ms (a one-event claim's round trip went from 7.3 to 2.7 ms with the
 * generic plan forced). The generic plans themselves are the ones
 * test/postgres/explain.test.ts pins.
 *
 * `plan_cache_mode` is set on the function, not on the session, so a
 * borrowed pool's other queries and rheo's own ad-hoc statements keep their
 * custom plans.
 *
 * `jit` is off on every routine. Forced generic plans are costed with
 * `LIMIT $n` guessed at a tenth of the rows, so on a table of a million
 * events the claim's estimate passed `jit_above_cost` and PostgreSQL JIT-
 * compiled it on every call: 215 ms of compilation for a claim that executes
 * in ~2 ms (auto_explain), which made `fetch(100)` + `ackMany` ~300 events/s
 * in the bench's scaling scenario. Nothing rheo runs is long enough to repay
 * a compilation.
 *
 * Each function's name carries a hash of its body: migrate()
 * installs the functions of the running rheo next to those of older versions
 * still serving during a rolling deploy, and an upgrade whose statements
 * changed needs migrate() (which applications already call at start-up) just
 * like a new numbered migration does.
 */
export interface Routine {
  /** Unquoted function name, `rheo_<key>_<hash>`. */
  readonly name: string;
  /** CREATE OR REPLACE FUNCTION in the given (quoted) schema. */
  definition(quotedSchema: string): string;
  /** `SELECT * FROM schema.name($1, ..., $n)`: the statement rheo sends. */
  call(quotedSchema: string): string;
}

const PLACEHOLDER_SCHEMA = ':schema';

/**
 * `body` gives the routine's PL/pgSQL statements for a schema; `queryBody`
 * wraps a single query as `RETURN QUERY`.
 */
function queryBody(query: (quotedSchema: string) => string): (quotedSchema: string) => string {
  return (s) => `BEGIN
  RETURN QUERY ${query(s)};
END`;
}

/**
 * `search_path` is fixed on every routine: the bodies name rheo's tables by
 * schema, and everything else they call (now(), unnest, jsonb operators, ...)
 * must come from pg_catalog, not from a schema a caller put ahead of it
 * (`SET search_path = other, pg_catalog`); pg_temp last so no temporary
 * object can shadow anything either.
 */
function options(planCacheMode: 'force_generic_plan' | 'force_custom_plan'): string {
  return `LANGUAGE plpgsql
VOLATILE
SET plan_cache_mode = ${planCacheMode}
SET jit = off
SET search_path = pg_catalog, pg_temp`;
}

function define(key: string, args: string[], returns: string, body: (quotedSchema: string) => string, settings: string): Routine {
  const signature = `(${args.join(', ')}) RETURNS TABLE (${returns})`;
  // The options are hashed with the body: a routine whose settings changed is a new routine.
  const hash = createHash('sha1').update(signature).update(settings).update(body(PLACEHOLDER_SCHEMA)).digest('hex').slice(0, 12);
  const name = `rheo_${key}_${hash}`;
  return {
    name,
    definition: (s) => `
CREATE OR REPLACE FUNCTION ${s}.${name}${signature}
${settings}
AS $rheo$
#variable_conflict use_column
${body(s)}
$rheo$`,
    call: (s) => `SELECT * FROM ${s}.${name}(${args.map((_, i) => `$${i + 1}`).join(', ')})`,
  };
}

/**
 * A routine and its replanned twin: the same body and arguments, with
 * `plan_cache_mode = force_custom_plan`, so each statement is planned for
 * its call's values. A generic plan cannot prune the partitioned log by
 * `stream_id = $n` while it is planned; it carries every segment of every
 * stream of the schema and locks each one on every call, before run-time
 * pruning leaves the stream's own (PostgreSQL 15 locks them in
 * AcquireExecutorLocks; planning one locks their indexes too). Measured:
 * with 1,500 segment tables in the schema (1,500 streams), every append
 * failed with `out of shared memory` (the lock table, sized by
 * `max_locks_per_transaction`, full); 1,000 other streams made an idle
 * one-event claim 2.4 ms slower (bench/segment-count.ts). A replanned call
 * plans for its stream's segments only (each statement restricts the log's
 * `stream_id` by a parameter, which a per-call plan prunes by) and holds
 * about twenty locks whatever the schema holds, at the cost of planning on
 * every call, about 3 ms for a claim (plan-choice.ts picks one per call).
 */
function routinePair(key: string, args: string[], returns: string, body: (quotedSchema: string) => string): [Routine, Routine] {
  return [define(key, args, returns, body, options('force_generic_plan')), define(`${key}_replanned`, args, returns, body, options('force_custom_plan'))];
}

/**
 * sql/claim.ts; arguments $1..$9 as documented there, and $10 the most
 * partitions this fetch locks (all requested ones unless the caller saw
 * contention, leases.ts).
 *
 * Readiness: the routine first reads, without locks, which requested
 * partitions hold anything claimable (sql/claim.ts claimableSql) and answers
 * empty at once when none does. An idle consumer polls five times a second;
 * each of those claims used to lock the cursors, which takes a transaction
 * id and writes WAL (100 empty fetches: 100 transaction ids and 9.8 kB of
 * WAL), so idle consumers alone pushed the cluster toward anti-wraparound
 * vacuums and dirtied the cursor rows' pages. Now an empty poll writes
 * nothing, and a claim leaves the cursors of partitions with nothing to
 * claim unlocked for the group's other fetches.
 *
 * Locking (issue 11): the routine then locks the ready partitions'
 * cursors in visiting order ($3) with SKIP LOCKED, at most $10 of them, and
 * claims only from the partitions it got. A cursor another transaction holds
 * (a concurrent fetch of the group, a replay, an application's open
 * transaction) is skipped, so a fetch never queues behind work on partitions
 * it will not claim from; fairness and lowest-sequence-first hold among the
 * partitions it locked. SKIP LOCKED never waits, so the visiting order
 * cannot deadlock. Only when every requested cursor is ready and held
 * elsewhere does it wait, for all of them in partition order as before (it
 * holds none, so that cannot deadlock either); when the ready ones are held
 * and the others had nothing, it answers empty at once, as it did when it
 * locked those and found nothing. A fetch still returns empty only when
 * nothing is claimable in the partitions it could lock, and an empty result
 * while another transaction held the rest is followed by that transaction's
 * own loop (a fetch that got leases fetches again) or, for a non-fetch
 * holder, by the consumer's next wake-up or poll.
 *
 * `contended` tells the caller that a requested cursor was held elsewhere,
 * so it can lock fewer partitions per fetch while other fetchers are active
 * and concurrent fetches take disjoint partitions instead of the first one
 * taking them all. `known` tells it whether group $1 of stream $2 still
 * exists: an empty claim answers it with one primary-key probe, so an idle
 * consumer's cached ids need no statement of their own to be checked.
 * Groups are never renamed and ids never reused, so the ids existing means
 * the names still lead to them.
 *
 * Then it runs the `fresh` claim when none of the locked partitions has an
 * open row or lease range that is claimable or spent at `now`, else the
 * `full` one; and of `fresh`, the `plain` form when they have no replay
 * holds either. Under the cursor locks no other claim can change that answer,
 * nor can a replay add holds (it moves those cursors in the same statement);
 * a settle committing meanwhile is no different from one committing just
 * after the full claim's snapshot.
 *
 * The `fresh` claim reads at most ceil(limit / n) sequences per partition
 * when every one of the n locked partitions is known to have that many:
 * round-robin then never takes more from any of them, so the leases are the
 * same as with `limit` per partition. Known means no replay hold above the
 * cursor and the event at cursor + ceil(limit / n) there: sequences are
 * contiguous per partition and commit in order, and a trim removes only a
 * partition's lowest ones and moves every cursor up to them (as does a
 * replay or a new group start), so every sequence between is there too. Were
 * a cursor ever below a trimmed one, the claim would lease fewer than it
 * could, never a wrong one. Otherwise it reads `limit` per partition as
 * before. Before this, a
 * claim of 500 on 8 partitions read 4,000 events (and their sizes) to lease
 * 500: fetch(500) took 11-17 ms there against 7-9 ms on one partition.
 *
 * In the `plain` case, when the readiness check saw at least
 * ceil(limit / n) sequences between each ready partition's cursor and its
 * high watermark (the last sequence an append committed there; appends to a
 * partition commit in sequence order, and by the argument above every
 * sequence between is there), each locked partition's share of the
 * round-robin is known, and the `direct` claim (sql/claim.ts directClaimSql)
 * leases those shares without ranking candidates: the backlog drain's usual
 * claim, on one partition as on many. It checks the count and the byte
 * budget itself and answers nothing without writing when either fails (a
 * cursor another claim moved after the readiness check, or large events);
 * `plain` then claims as before.
 *
 * The claim commits with `synchronous_commit` off, for its own transaction
 * only: it answers as soon as its commit is in the WAL buffers instead of
 * after the WAL flush (an fsync, on an idle server most of the time between a
 * woken consumer's claim and its handler's start). What a server crash can
 * lose is the last fraction of a second of claims, never a settle: every
 * settle commits synchronously, and a flush writes the WAL in order, so the
 * claims before any settle that answered are durable with it. A claim the
 * crash forgot is only a lease the server no longer knows: its holder's
 * renewal and settle fail as stale, the delivery is claimed again with the
 * same attempt number, and a transactional handler's writes roll back with
 * its refused settle, so at-least-once and exactly-once hold as before.
 */
export const [claimRoutine, claimRoutineReplanned] = routinePair(
  'claim',
  ['integer', 'integer', 'integer[]', 'integer', 'text', 'float8', 'text', 'int8', 'integer', 'integer'],
  'leased_at_ms int8, expires_at_ms int8, leases json, contended boolean, known boolean',
  (s) => `DECLARE
  claim_now timestamptz := ${nowSql('$5')};
  claim_ready integer[];
  claim_parts integer[];
  claim_contended boolean;
  claim_fresh integer;
  claim_available int8;
  claim_setting text;
  claim_path text;
BEGIN
  ${claimableSql(s, 'claim_now')}
  INTO claim_ready, claim_available;
  IF claim_ready IS NULL THEN
    -- Nothing to claim: answer without locking a cursor (no transaction id, no
    -- WAL), and say whether the group is still there (leases.ts).
    RETURN QUERY ${emptyClaim('false', `EXISTS (SELECT 1 FROM ${s}.groups g WHERE g.id = $1 AND g.stream_id = $2)`)};
    RETURN;
  END IF;
  -- The claim's commit does not wait for its WAL flush (see claimRoutine's
  -- comment); set here, in the lock's statement, to spare a statement.
  SELECT array_agg(l.partition ORDER BY l.ord), set_config('synchronous_commit', 'off', true)
  INTO claim_parts, claim_setting
  FROM (
    SELECT c.partition, o.ord
    FROM ${s}.group_cursors c
    JOIN unnest(claim_ready) WITH ORDINALITY AS o(partition, ord) ON o.partition = c.partition
    WHERE c.group_id = $1
    ORDER BY o.ord
    LIMIT $10
    FOR UPDATE OF c SKIP LOCKED
  ) l;
  claim_contended := COALESCE(cardinality(claim_parts), 0) < LEAST(cardinality(claim_ready), $10);
  IF claim_parts IS NULL AND cardinality(claim_ready) < cardinality($3) THEN
    -- Requested partitions with nothing to claim are free of this wait: the
    -- fetch answers empty rather than queue behind the ready ones' holder.
    RETURN QUERY ${emptyClaim('true', 'true')};
    RETURN;
  END IF;
  IF claim_parts IS NULL THEN
    SELECT array_agg(l.partition ORDER BY l.ord) INTO claim_parts
    FROM (
      SELECT c.partition, o.ord
      FROM ${s}.group_cursors c
      JOIN unnest(claim_ready) WITH ORDINALITY AS o(partition, ord) ON o.partition = c.partition
      WHERE c.group_id = $1
      ORDER BY c.partition
      FOR UPDATE OF c
    ) l;
    claim_parts := COALESCE(claim_parts, '{}');
  END IF;
  -- One statement picks the claim (sql/claim.ts ClaimPath).
  SELECT CASE
           WHEN EXISTS (
             SELECT 1 FROM ${s}.deliveries d
             WHERE d.group_id = $1 AND d.partition = ANY (claim_parts) AND d.visible_at <= claim_now
           ) OR EXISTS (
             SELECT 1 FROM ${s}.lease_ranges r
             WHERE r.group_id = $1 AND r.partition = ANY (claim_parts) AND r.visible_at <= claim_now
           ) THEN 'full'
           WHEN EXISTS (
             SELECT 1 FROM ${s}.replay_holds h
             WHERE h.group_id = $1 AND h.partition = ANY (claim_parts)
           ) THEN 'fresh'
           ELSE 'plain'
         END
  INTO claim_path;
  IF claim_path = 'full' THEN
    RETURN QUERY ${claimSql(s, 'full', 'claim_parts', 'claim_contended')};
  ELSE
    -- Round-robin takes at most ceil(limit / n) from each of n partitions
    -- that all have that many fresh sequences; read only those then.
    claim_fresh := ceil($4::numeric / GREATEST(cardinality(claim_parts), 1))::integer;
    IF claim_path = 'plain' AND claim_available >= claim_fresh THEN
      -- Each share is known: claim it directly, unless that statement finds
      -- fewer events or too many bytes, and answers nothing (sql/claim.ts).
      RETURN QUERY ${directClaimSql(s, 'claim_parts', 'claim_contended')};
      IF FOUND THEN
        RETURN;
      END IF;
    END IF;
    IF claim_fresh < $4 AND EXISTS (
         SELECT 1 FROM ${s}.group_cursors c
         WHERE c.group_id = $1 AND c.partition = ANY (claim_parts)
           AND (
             EXISTS (
               SELECT 1 FROM ${s}.replay_holds h
               WHERE h.group_id = $1 AND h.partition = c.partition AND h.sequence > c.cursor
             )
             OR NOT EXISTS (${freshProbe(s, 'c.cursor + claim_fresh')})
           )
       ) THEN
      claim_fresh := $4;
    END IF;
    IF claim_path = 'plain' THEN
      RETURN QUERY ${claimSql(s, 'plain', 'claim_parts', 'claim_contended', 'claim_fresh')};
    ELSE
      RETURN QUERY ${claimSql(s, 'fresh', 'claim_parts', 'claim_contended', 'claim_fresh')};
    END IF;
  END IF;
END`,
);

/** The claim routine's row when it claims nothing: its clock's stamps, no leases; `known`, whether the group exists. */
function emptyClaim(contended: string, known: string): string {
  return `SELECT ${ms('claim_now')}, ${ms(`claim_now + $6::float8 * interval '1 millisecond'`)}, '[]'::json, ${contended}, ${known}`;
}

/**
 * The event at `sequence` of partition `c.partition`, as a one-row primary
 * key range (an equality probe can pick the stream's time index, claim.ts).
 */
function freshProbe(s: string, sequence: string): string {
  return `SELECT 1 FROM ${s}.events e
               WHERE e.stream_id = $2 AND e.partition = c.partition AND e.sequence >= ${sequence} AND e.sequence <= ${sequence}`;
}

/** sql/append.ts; arguments as documented there. */
export const [appendRoutine, appendRoutineReplanned] = routinePair(
  'append',
  ['integer', 'text[]', 'text[]', 'text[]', 'jsonb[]', 'jsonb[]', 'integer[]', 'timestamptz[]', 'text', 'text', 'boolean', 'integer[]', 'text[]'],
  `id text, "partition" integer, sequence int8, existed boolean,
   type text, key text, payload jsonb, metadata jsonb, ts_ms int8`,
  queryBody(appendSql),
);

/**
 * sql/ownership.ts readOwnedSql; arguments as documented there. A routine
 * for `jit = off` (the generic estimate of a read over a million-event
 * partition is most of `jit_above_cost`: 75,000 of 100,000).
 */
export const [readOwnedRoutine, readOwnedRoutineReplanned] = routinePair(
  'read_owned',
  ['integer[]', 'integer[]', 'int8[]', 'integer[]', 'int8[]', 'integer[]', 'text[]', 'int8[]'],
  `i int8, fenced boolean, id text, "partition" integer, sequence int8,
   type text, key text, payload jsonb, metadata jsonb, ts_ms int8`,
  queryBody(readOwnedSql),
);

/** Every routine migrate() installs: each one in both forms. */
export const ROUTINES: readonly Routine[] = [
  claimRoutine,
  appendRoutine,
  readOwnedRoutine,
  claimRoutineReplanned,
  appendRoutineReplanned,
  readOwnedRoutineReplanned,
];
