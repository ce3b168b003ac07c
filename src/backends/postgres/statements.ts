import { appendSql, readSql } from './sql/append.js';
import { claimSql } from './sql/claim.js';
import {
  countsSql,
  deadLetterExistsSql,
  deadLettersSql,
  eventsByIdSql,
  lagSql,
  lockCursorsSql,
  redriveSql,
  reopenSql,
  replayFromSql,
  resetSql,
  resolveFromTimeSql,
} from './sql/groups.js';
import { renewSql, settleSql } from './sql/settle.js';
import {
  createGroupSql,
  createStreamSql,
  listGroupsSql,
  listStreamsSql,
  lookupGroupSql,
  lookupStreamSql,
} from './sql/streams.js';

/** Every fixed statement, rendered once per backend for its schema. */
export function renderStatements(quotedSchema: string) {
  const s = quotedSchema;
  return {
    append: appendSql(s),
    read: readSql(s),
    claim: claimSql(s),
    settle: settleSql(s),
    renew: renewSql(s),
    createStream: createStreamSql(s),
    lookupStream: lookupStreamSql(s),
    listStreams: listStreamsSql(s),
    createGroup: createGroupSql(s),
    lookupGroup: lookupGroupSql(s),
    listGroups: listGroupsSql(s),
    lag: lagSql(s),
    counts: countsSql(s),
    lockCursors: lockCursorsSql(s),
    reset: resetSql(s),
    replayFrom: replayFromSql(s),
    resolveFromTime: resolveFromTimeSql(s),
    eventsById: eventsByIdSql(s),
    reopen: reopenSql(s),
    redrive: redriveSql(s),
    deadLetterExists: deadLetterExistsSql(s),
    deadLetters: deadLettersSql(s),
  } as const;
}

export type Statements = ReturnType<typeof renderStatements>;
