import { createHash } from 'node:crypto';
import type { PreparedText } from './connection.js';
import {
  appendRoutine,
  appendRoutineReplanned,
  claimRoutine,
  claimRoutineReplanned,
  readOwnedRoutine,
  readOwnedRoutineReplanned,
} from './routines.js';
import { readSql } from './sql/append.js';
import {
  countsSql,
  deadLetterExistsSql,
  deadLettersSql,
  eventsByIdSql,
  lagSql,
  lockCursorsSql,
  lockLowWatermarksSql,
  partitionCountsSql,
  redriveSql,
  reopenSql,
  replayAdvanceSql,
  replayFromSql,
  resetSql,
  resolveFromTimeSql,
} from './sql/groups.js';
import {
  bumpGenerationsSql,
  commitSql,
  frontiersSql,
  lockCommitCursorsSql,
  lockGroupSql,
  membersSql,
  readMembershipSql,
  releaseSql,
  writeMembershipFrontiersSql,
  writeMembershipSql,
} from './sql/ownership.js';
import { explodeGroupSql } from './sql/ranges.js';
import { ackSql, renewSql, settleSql } from './sql/settle.js';
import {
  createGroupSql,
  createStreamSql,
  listGroupsSql,
  listStreamsSql,
  currentIdsSql,
  lookupGroupSql,
  lookupStreamSql,
} from './sql/streams.js';

/**
 * Every fixed statement, rendered once per backend for its schema.
 *
 * Behind a transaction-mode pooler (`pooler: 'transaction'`) nothing is
 * named: a named statement lives on one server connection, and the pooler
 * hands each transaction whichever connection is free, so the next call
 * finds it missing (26000) or already there (42P05). Sent unnamed, the
 * statement is parsed and planned per call; the claim, the append and the
 * owned read keep their forced generic plans anyway, because those are set
 * on the routines they call (routines.ts), not on the statement.
 */
export function renderStatements(quotedSchema: string, named = true) {
  const s = quotedSchema;
  const prepared = (key: string, text: string): PreparedText | string =>
    named ? { name: `rheo_${key}_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`, text } : text;
  return {
    append: prepared('append', appendRoutine.call(s)),
    appendReplanned: prepared('append_replanned', appendRoutineReplanned.call(s)),
    read: readSql(s),
    claim: prepared('claim', claimRoutine.call(s)),
    claimReplanned: prepared('claim_replanned', claimRoutineReplanned.call(s)),
    settle: prepared('settle', settleSql(s)),
    ack: prepared('ack', ackSql(s)),
    renew: prepared('renew', renewSql(s)),
    explodeGroup: explodeGroupSql(s),
    createStream: createStreamSql(s),
    lookupStream: lookupStreamSql(s),
    listStreams: listStreamsSql(s),
    createGroup: createGroupSql(s),
    lookupGroup: lookupGroupSql(s),
    currentIds: currentIdsSql(s),
    listGroups: listGroupsSql(s),
    lag: lagSql(s),
    counts: countsSql(s),
    partitionCounts: partitionCountsSql(s),
    lockCursors: lockCursorsSql(s),
    lockLowWatermarks: lockLowWatermarksSql(s),
    reset: resetSql(s),
    replayFrom: replayFromSql(s),
    replayAdvance: replayAdvanceSql(s),
    resolveFromTime: resolveFromTimeSql(s),
    eventsById: eventsByIdSql(s),
    reopen: reopenSql(s),
    redrive: redriveSql(s),
    deadLetterExists: deadLetterExistsSql(s),
    deadLetters: deadLettersSql(s),
    ownership: {
      lockGroup: lockGroupSql(s),
      readMembership: readMembershipSql(s),
      writeMembership: writeMembershipSql(s),
      writeMembershipFrontiers: writeMembershipFrontiersSql(s),
      frontiers: frontiersSql(s),
      release: releaseSql(s),
      readOwned: prepared('read_owned', readOwnedRoutine.call(s)),
      readOwnedReplanned: prepared('read_owned_replanned', readOwnedRoutineReplanned.call(s)),
      commit: prepared('commit', commitSql(s)),
      lockCommitCursors: lockCommitCursorsSql(s),
      members: membersSql(s),
      bumpGenerations: bumpGenerationsSql(s),
    },
  } as const;
}

export type Statements = ReturnType<typeof renderStatements>;
