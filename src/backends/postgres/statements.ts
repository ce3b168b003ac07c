import { createHash } from 'node:crypto';
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
import { ackSql, explodeGroupSql, renewSql, settleSql } from './sql/settle.js';
import {
  createGroupSql,
  createStreamSql,
  listGroupsSql,
  listStreamsSql,
  lookupGroupSql,
  lookupStreamSql,
} from './sql/streams.js';

/**
 * A statement sent as a named prepared statement: parsed and planned once per
 * connection instead of on every call. Planning was 1.5–6 ms of every append
 * and claim (pg_stat_statements, bench scenario 4), more than the execution
 * of a small one. Only the hot statements whose generic plans are pinned by
 * test/postgres/explain.test.ts are named (DESIGN.md §3: an unchecked
 * generic claim plan once collapsed to 40 tps). The name carries a hash of
 * the text, so backends on different schemas never share a name.
 */
export interface PreparedText {
  readonly name: string;
  readonly text: string;
}

function prepared(key: string, text: string): PreparedText {
  return { name: `rheo_${key}_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`, text };
}

/** Every fixed statement, rendered once per backend for its schema. */
export function renderStatements(quotedSchema: string) {
  const s = quotedSchema;
  return {
    append: prepared('append', appendSql(s)),
    read: readSql(s),
    claim: prepared('claim', claimSql(s)),
    settle: prepared('settle', settleSql(s)),
    ack: prepared('ack', ackSql(s)),
    renew: prepared('renew', renewSql(s)),
    explodeGroup: explodeGroupSql(s),
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
