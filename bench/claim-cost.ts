/**
 * `npx tsx bench/claim-cost.ts`: what a competing consumer's claim costs on an
 * idle PostgreSQL, next to the round trips it is made of. Each case runs once
 * per round after 15 ms of idleness (the state a woken consumer's connection is
 * in), interleaved with the others, and the table shows the median:
 *
 * - `SELECT 1`: a round trip to an idle backend;
 * - a PL/pgSQL function that locks the group's cursor row `FOR UPDATE` and
 *   commits durably, then the same committing with `synchronous_commit` off
 *   (as the claim routine does);
 * - the claim routine with nothing to claim (its lock-free readiness check
 *   answers), and claiming one event;
 * - a copy of the routine whose claim statement (sql/claim.ts, the `fresh`
 *   one an idle consumer runs) is replaced by a constant row: the same
 *   readiness check, locks, checks and asynchronous commit, with one event
 *   waiting, without the statement.
 *
 * Then, with `pg_stat_statements` tracking nested statements, how much of the
 * routine's execution its own statements account for; the rest is the
 * executor's set-up and tear-down of its plans and the function call.
 *
 *   npx tsx bench/claim-cost.ts               # 100 rounds
 *   npx tsx bench/claim-cost.ts --rounds=300
 *
 * It starts a throwaway PostgreSQL 15 (default durability, as the bench) with
 * `pg_stat_statements` loaded, and removes it at the end.
 */
import pg from 'pg';

import { claimRoutine } from '../src/backends/postgres/routines.js';
import { claimSql } from '../src/backends/postgres/sql/claim.js';
import { startThrowawayPostgres } from '../scripts/throwaway-postgres.js';
import { openRheo } from './lib/rheo-setup.js';
import { median, sleep } from './lib/stats.js';

const IDLE_MS = 15;
const roundsArg = process.argv.find((a) => a.startsWith('--rounds='));
const rounds = roundsArg ? Number(roundsArg.slice('--rounds='.length)) : 100;
if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be a positive integer, got ${roundsArg}`);

const cluster = await startThrowawayPostgres({
  durable: true,
  label: 'rheo-claim-cost',
  settings: ['shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all'],
});
try {
  const url = cluster.url();
  const rheo = await openRheo('postgres', { url, notify: false });
  const appender = await openRheo('postgres', { url, notify: false });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('CREATE EXTENSION pg_stat_statements');
    await rheo.createStream('cost');
    await rheo.createGroup('cost', 'g');
    const { rows } = await client.query<{ group_id: number; stream_id: number }>(
      'SELECT g.id AS group_id, s.id AS stream_id FROM rheo.groups g JOIN rheo.streams s ON s.id = g.stream_id WHERE s.name = $1 AND g.name = $2',
      ['cost', 'g'],
    );
    const ids = rows[0]!;
    await client.query(`CREATE SCHEMA bench`);
    for (const [name, setting] of [
      ['lock_cursor', ''],
      ['lock_cursor_async', `PERFORM set_config('synchronous_commit', 'off', true);`],
    ] as const) {
      await client.query(`CREATE FUNCTION bench.${name}(g integer) RETURNS TABLE (locked integer) LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  ${setting}
  RETURN QUERY SELECT c.partition FROM rheo.group_cursors c WHERE c.group_id = g FOR UPDATE;
END $fn$`);
    }
    // The routine as migrate() installs it, with its `fresh` claim statement swapped for a constant row.
    const definition = claimRoutine.definition('"rheo"');
    const fresh = claimSql('"rheo"', 'fresh', 'claim_parts', 'claim_contended', 'claim_fresh');
    if (!definition.includes(fresh)) throw new Error('the claim routine no longer runs the fresh claim statement as this bench expects');
    await client.query(
      definition.replace(`"rheo".${claimRoutine.name}(`, 'bench.claim_without_statement(').replace(fresh, `SELECT 0::int8, 0::int8, '[]'::json, claim_contended, true`),
    );
    const claim = claimRoutine.call('"rheo"');
    const claimArgs = [ids.group_id, ids.stream_id, [0], 10, null, 30_000, 'claim-cost', 1_048_576, 10, 1];
    let claimedOne = 0;
    const cases: Array<[string, () => Promise<unknown>]> = [
      ['SELECT 1', () => client.query('SELECT 1')],
      ['lock the cursor, durable commit', () => client.query('SELECT * FROM bench.lock_cursor($1)', [ids.group_id])],
      ['lock the cursor, synchronous_commit off', () => client.query('SELECT * FROM bench.lock_cursor_async($1)', [ids.group_id])],
      ['claim routine, nothing to claim', () => client.query(claim, claimArgs)],
      [
        'claim routine without its claim statement',
        () => client.query('SELECT * FROM bench.claim_without_statement($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)', claimArgs),
      ],
      [
        'claim routine, one event',
        async () => {
          const result = await client.query<{ leases: unknown[] }>(claim, claimArgs);
          claimedOne += result.rows[0]?.leases.length ?? 0;
        },
      ],
    ];
    const samples = new Map<string, number[]>(cases.map(([name]) => [name, []]));
    for (let round = -5; round < rounds; round++) {
      for (const [name, run] of cases) {
        // One event waits for both of these: the copy without its statement locks and
        // checks as for a claim (an empty partition would be answered before any lock)
        // and leaves it, and the routine then claims it.
        if (name === 'claim routine without its claim statement') await appender.append('cost', { type: 'cost', payload: { round } });
        await sleep(IDLE_MS);
        const start = performance.now();
        await run();
        if (round >= 0) samples.get(name)!.push(performance.now() - start);
      }
    }
    if (claimedOne !== rounds + 5) throw new Error(`the one-event claims leased ${claimedOne} events, expected ${rounds + 5}`);

    // The routine alone now, one event per claim, for statistics no other case shares.
    await client.query('SELECT pg_stat_statements_reset()');
    for (let round = 0; round < rounds; round++) {
      await appender.append('cost', { type: 'cost', payload: { round } });
      await sleep(IDLE_MS);
      await client.query(claim, claimArgs);
    }

    const stats = await client.query<{ query: string; calls: string; mean_exec_time: number }>(
      'SELECT query, calls, mean_exec_time FROM pg_stat_statements WHERE query LIKE $1 OR query LIKE $2 OR query LIKE $3 OR query LIKE $4 OR query LIKE $5 OR query LIKE $6',
      [`%${claimRoutine.name}%`, 'WITH clock AS MATERIALIZED%', 'SELECT array_agg(l.partition%', 'EXISTS (%', 'SELECT array_agg(o.partition%', 'claim_fresh <%'],
    );
    const routine = stats.rows.find((r) => r.query.includes(claimRoutine.name));
    const inner = stats.rows.filter((r) => !r.query.includes(claimRoutine.name));
    const routineCalls = Number(routine?.calls ?? 0);
    const innerMs = inner.reduce((sum, r) => sum + (r.mean_exec_time * Number(r.calls)) / Math.max(routineCalls, 1), 0);

    console.log(`\nIdle round trips on PostgreSQL ${cluster.version} (median of ${rounds} rounds, ${IDLE_MS} ms idle before each call)`);
    console.log(`  ${'case'.padEnd(44)} ${'ms'.padStart(7)}`);
    for (const [name, values] of samples) console.log(`  ${name.padEnd(44)} ${median(values).toFixed(3).padStart(7)}`);
    console.log(`\nThe claim routine's execution on the server, claiming one event (pg_stat_statements, mean per call over ${routineCalls} calls)`);
    console.log(`  ${'routine'.padEnd(44)} ${(routine?.mean_exec_time ?? Number.NaN).toFixed(3).padStart(7)}`);
    console.log(`  ${'its statements'.padEnd(44)} ${innerMs.toFixed(3).padStart(7)}`);
  } finally {
    await client.end();
    await appender.close();
    await rheo.close();
  }
} finally {
  cluster.stop();
}
