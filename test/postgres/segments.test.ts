import type pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { makeTestBackend, schemaAtVersion, sharedPool } from '../support/postgres.js';

const noTrimmer = { enabled: false } as const;
const held: pg.PoolClient[] = [];
afterEach(async () => {
  for (const client of held.splice(0)) {
    await client.query('ROLLBACK').catch(() => {});
    client.release();
  }
});

/** The log's segment tables of a schema, in segment order (`events_0` is the default partition). */
async function segmentTables(schema: string): Promise<string[]> {
  const { rows } = await sharedPool().query<{ relname: string }>(
    `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = to_regclass($1) ORDER BY substring(c.relname FROM 8)::bigint`,
    [`"${schema}".events`],
  );
  return rows.map((r) => r.relname);
}

/** A connection inside a REPEATABLE READ transaction whose snapshot is taken now, without touching the log's tables. */
async function holdSnapshot(): Promise<pg.PoolClient> {
  const client = await sharedPool().connect();
  held.push(client);
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  await client.query('SELECT txid_current()');
  return client;
}

async function countLog(client: pg.PoolClient | pg.Pool, schema: string, stream: string): Promise<number> {
  const { rows } = await client.query<{ n: string }>(
    `SELECT count(*) AS n FROM "${schema}".events e JOIN "${schema}".streams s ON s.id = e.stream_id WHERE s.name = $1`,
    [stream],
  );
  return Number(rows[0]!.n);
}

/** Where each segment of the stream begins in partition 0, in segment order. */
async function segmentStarts(schema: string, stream: string): Promise<number[]> {
  const { rows } = await sharedPool().query<{ first_seq: string }>(
    `SELECT g.first_seq FROM "${schema}".segments g JOIN "${schema}".streams s ON s.id = g.stream_id
     WHERE s.name = $1 AND g.partition = 0 ORDER BY g.segment`,
    [stream],
  );
  return rows.map((r) => Number(r.first_seq));
}

async function appendInBatches(rheo: Rheo, stream: string, batches: number, size: number): Promise<void> {
  for (let b = 0; b < batches; b++) {
    await rheo.appendBatch(stream, Array.from({ length: size }, (_, i) => ({ payload: b * size + i })));
  }
}

describe('postgres log segments', () => {
  it('retention drops whole segments: no row of a dropped segment is deleted, a bound inside a segment deletes only up to it', async () => {
    const backend = await makeTestBackend(undefined, { segmentEvents: 256 });
    const rheo = createRheo({ backend, retention: noTrimmer });
    // maxEvents / 4 = 256 events per segment; batches of 256 fill one segment each.
    await rheo.createStream('s', { retention: { maxEvents: 1024 } });
    await appendInBatches(rheo, 's', 8, 256);
    const before = await segmentTables(backend.schema);
    expect(before).toHaveLength(10); // segment 0, eight full segments, the current empty one

    const snapshot = await holdSnapshot();
    const report = await rheo.trim('s');
    expect(report.partitions[0]).toEqual({ deleted: 1024, lowWatermark: 1025 });
    expect(await segmentTables(backend.schema)).toEqual([before[0], ...before.slice(5)]);
    // A snapshot older than the trim sees exactly what a new one sees: the trim deleted no row, so it left no dead tuple.
    expect(await countLog(snapshot, backend.schema, 's')).toBe(1024);
    expect(await countLog(sharedPool(), backend.schema, 's')).toBe(1024);

    // An explicit bound inside a segment deletes the rows below it in that segment, and only those.
    expect((await rheo.trim('s', { keep: 1000 })).partitions[0]).toEqual({ deleted: 24, lowWatermark: 1049 });
    expect(await countLog(sharedPool(), backend.schema, 's')).toBe(1000);
    expect(await countLog(snapshot, backend.schema, 's')).toBe(1024);
    expect((await rheo.read('s', { limit: 1 }))[0]!.sequence).toBe(1049);
  });

  it('a segment whose DROP cannot get its lock is trimmed by row deletes, exactly to the bound, and dropped by a later trim', async () => {
    const backend = await makeTestBackend(undefined, { segmentEvents: 256 });
    const rheo = createRheo({ backend, retention: noTrimmer });
    await rheo.createStream('s', { retention: { maxEvents: 1024 } });
    await appendInBatches(rheo, 's', 4, 256);
    const before = await segmentTables(backend.schema);
    expect(before).toHaveLength(6);

    // A session reading the log (a pg_dump, a report) holds ACCESS SHARE on it until it ends.
    const reader = await sharedPool().connect();
    held.push(reader);
    await reader.query('BEGIN');
    await reader.query(`LOCK TABLE "${backend.schema}".events IN ACCESS SHARE MODE`);
    expect((await rheo.trim('s', { keep: 256 })).partitions[0]).toEqual({ deleted: 768, lowWatermark: 769 });
    expect(await segmentTables(backend.schema)).toEqual(before);
    expect(await countLog(sharedPool(), backend.schema, 's')).toBe(256);
    expect((await rheo.read('s')).map((e) => e.sequence)[0]).toBe(769);
    await reader.query('COMMIT');

    expect((await rheo.trim('s', { keep: 256 })).partitions[0]).toEqual({ deleted: 0, lowWatermark: 769 });
    expect(await segmentTables(backend.schema)).toEqual([before[0], ...before.slice(4)]);
    expect(await countLog(sharedPool(), backend.schema, 's')).toBe(256);
  });

  it('a segment that cannot be opened for a lock leaves appends going into the current one, and opens once the lock is gone', async () => {
    const backend = await makeTestBackend(undefined, { segmentEvents: 256 });
    const rheo = createRheo({ backend, retention: noTrimmer });
    await rheo.createStream('s');
    const before = await segmentTables(backend.schema);
    expect(before).toEqual(['events_0', 'events_1']);
    const reader = await sharedPool().connect();
    held.push(reader);
    await reader.query('BEGIN');
    await reader.query(`LOCK TABLE "${backend.schema}".events IN ACCESS SHARE MODE`);
    // Full after 256 events, but the roll gives up on its lock: the append still succeeds.
    await appendInBatches(rheo, 's', 1, 256);
    expect(await segmentTables(backend.schema)).toEqual(before);
    await reader.query('COMMIT');
    // The next check comes 4× later (1,024 events), and then opens the segment.
    await appendInBatches(rheo, 's', 3, 256);
    expect(await segmentTables(backend.schema)).toEqual(before);
    await appendInBatches(rheo, 's', 1, 256);
    // (The roll that gave up used segment number 2: sequences are not rolled back.)
    expect(await segmentTables(backend.schema)).toEqual([...before, 'events_3']);
    expect((await rheo.read('s', { after: 1279, limit: 5 })).map((e) => e.sequence)).toEqual([1280]);
  });

  it('appends from SQL write the current segment; segment 0 stays empty in a schema created at this version', async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend, retention: noTrimmer });
    await rheo.createStream('s', { partitions: 2 });
    await rheo.append('s', { payload: 1, key: 'a' });
    await sharedPool().query(`SELECT * FROM "${backend.schema}".append('s', '2'::jsonb, key => 'b')`);
    const { rows } = await sharedPool().query<{ segment: string; n: string }>(
      `SELECT c.relname AS segment, count(*) AS n FROM "${backend.schema}".events e JOIN pg_class c ON c.oid = e.tableoid GROUP BY 1`,
    );
    expect(rows).toEqual([{ segment: 'events_1', n: '2' }]);
    expect((await rheo.read('s', { partition: 0 })).length + (await rheo.read('s', { partition: 1 })).length).toBe(2);
  });

  it('a process checks its segment every sixteenth of the span, and sees a retention policy set elsewhere at its next check', async () => {
    // span 16,384 without retention: a check every 1,024 events, i.e. every 5th batch of 250.
    const backend = await makeTestBackend(undefined, { segmentEvents: 16384 });
    const rheo = createRheo({ backend, retention: noTrimmer });
    await rheo.createStream('s');
    await appendInBatches(rheo, 's', 70, 250);
    // Checked at 1,250, 2,500, ... events: the first check past 16,384 is at 17,500 (every 256 events it was 16,500).
    expect(await segmentStarts(backend.schema, 's')).toEqual([1, 17501]);

    // Another process gives the stream maxEvents 1,024 (span 256, a check every 256 events).
    const other = postgresBackend({ pool: sharedPool() }, { schema: backend.schema, segmentEvents: 16384 });
    await createRheo({ backend: other, retention: noTrimmer }).setRetention('s', { maxEvents: 1024 });
    await appendInBatches(rheo, 's', 10, 250);
    // Seen at the next check (1,250 events after the last one), and every 2 batches from then on.
    expect(await segmentStarts(backend.schema, 's')).toEqual([1, 17501, 18751, 19251, 19751]);
    await other.close();
  });

  it('setRetention in the same process makes its next append check the segment', async () => {
    const backend = await makeTestBackend(undefined, { segmentEvents: 16384 });
    const rheo = createRheo({ backend, retention: noTrimmer });
    await rheo.createStream('s');
    await appendInBatches(rheo, 's', 2, 250);
    await rheo.setRetention('s', { maxEvents: 1024 });
    await appendInBatches(rheo, 's', 1, 250);
    expect(await segmentStarts(backend.schema, 's')).toEqual([1, 751]);
  });

  it('an append racing another of the same id in the same segment comes back existed', async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend, retention: noTrimmer });
    await rheo.createStream('s', { partitions: 4 });
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => rheo.append('s', { id: 'same', payload: i, partition: i % 4 })),
    );
    expect(results.filter((r) => !r.existed)).toHaveLength(1);
    expect(new Set(results.map((r) => `${r.partition}/${r.sequence}`)).size).toBe(1);
  });
});

describe('postgres migration to segments on a populated database', () => {
  it('keeps every event, frontier, lease, range and dead letter of a schema at migration 7, and the backend works on it', async () => {
    const { schema, q } = await schemaAtVersion('seg_upgrade', 7);
    const pool = sharedPool();
    // What the previous layout holds: 2 partitions of 1,000 events appended through migration 7's append().
    await pool.query(`INSERT INTO ${q}.streams (name, partitions, created_at) VALUES ('old', 2, now())`);
    await pool.query(`INSERT INTO ${q}.stream_partitions (stream_id, partition) SELECT id, p FROM ${q}.streams, generate_series(0, 1) p`);
    await pool.query(`INSERT INTO ${q}.low_watermarks (stream_id, partition) SELECT id, p FROM ${q}.streams, generate_series(0, 1) p`);
    await pool.query(
      `SELECT ${q}.append('old', jsonb_build_object('n', g), id => 'e-' || g, "partition" => g % 2) FROM generate_series(1, 2000) g`,
    );
    // A group: partition 0 claimed to 600 with an expired lease on 550, a pending retry of 580 and a dead
    // letter at 500; partition 1 claimed to 400 through a range 301..400 whose first 5 members were acked.
    await pool.query(`INSERT INTO ${q}.groups (stream_id, name, max_attempts, created_at) SELECT id, 'g', 5, now() FROM ${q}.streams`);
    await pool.query(`INSERT INTO ${q}.group_cursors (group_id, partition, cursor) SELECT id, p, CASE p WHEN 0 THEN 600 ELSE 400 END FROM ${q}.groups, generate_series(0, 1) p`);
    await pool.query(
      `INSERT INTO ${q}.deliveries (group_id, partition, sequence, attempt, lease_id, consumer_id, leased_at, visible_at)
       SELECT id, 0, 550, 1, 'old-lease', 'c', now() - interval '1 hour', now() - interval '1 minute' FROM ${q}.groups
       UNION ALL SELECT id, 0, 580, 2, NULL, NULL, NULL, now() - interval '1 minute' FROM ${q}.groups`,
    );
    await pool.query(
      `INSERT INTO ${q}.lease_ranges (group_id, partition, first_seq, last_seq, token, consumer_id, leased_at, visible_at, settled)
       SELECT id, 1, 301, 400, 'tok', 'c', now() - interval '1 hour', now() - interval '1 minute', (repeat('1', 5) || repeat('0', 95))::varbit FROM ${q}.groups`,
    );
    await pool.query(
      `INSERT INTO ${q}.dead_letters (group_id, partition, sequence, attempt, reason, dead_lettered_at) SELECT id, 0, 500, 5, 'boom', now() FROM ${q}.groups`,
    );

    const backend = postgresBackend({ pool }, { schema });
    const rheo = createRheo({ backend, retention: noTrimmer });
    try {
      await backend.migrate();
      const { rows: ledger } = await pool.query<{ version: number }>(`SELECT version FROM ${q}.migrations ORDER BY version`);
      expect(ledger.map((r) => r.version).filter((v) => v > 7)).toEqual([9]);
      // The old table is segment 0, not a copy: its rows stay where they were.
      expect(await segmentTables(schema)).toEqual(['events_0']);
      // Its four indexes serve as they are: the partitioned table's adopted two of them rather than building copies.
      const { rows: indexes } = await pool.query<{ name: string }>(
        `SELECT i.indexrelid::regclass::text AS name FROM pg_index i WHERE i.indrelid = $1::regclass ORDER BY 1`,
        [`${q}.events_0`],
      );
      expect(indexes.map((i) => i.name.replace(`${schema}.`, ''))).toEqual(['events_0_id_idx', 'events_0_key_idx', 'events_0_pkey', 'events_0_ts_idx']);
      for (const partition of [0, 1]) {
        const events = await rheo.read('old', { partition, limit: 5000 });
        expect(events.map((e) => e.sequence)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
        expect(events.map((e) => e.id)).toEqual(Array.from({ length: 1000 }, (_, i) => `e-${2 * i + (partition === 0 ? 2 : 1)}`));
        expect(events[9]!.payload).toEqual({ n: 2 * 9 + (partition === 0 ? 2 : 1) });
      }
      const lag = await rheo.lag('old', 'g');
      expect(lag.partitions[0]).toMatchObject({ frontier: 549, highWatermark: 1000 });
      expect(lag.partitions[1]).toMatchObject({ frontier: 305, highWatermark: 1000 });
      expect((await rheo.deadLetters('old', 'g')).map((d) => [d.event.partition, d.event.sequence, d.reason])).toEqual([[0, 500, 'boom']]);
      // Ids appended before the migration are still known.
      expect((await rheo.append('old', { id: 'e-7', payload: 'again' })).existed).toBe(true);

      // New events go to the stream's first segment; sequences continue.
      const next = await rheo.appendBatch('old', [{ payload: 'new', partition: 0 }, { payload: 'new', partition: 1 }]);
      expect(next.map((e) => e.sequence)).toEqual([1001, 1001]);
      expect(await segmentTables(schema)).toEqual(['events_0', 'events_1']);

      // Everything unsettled is delivered once: the expired lease, the retry, the range's unacked members, the rest.
      const seen = new Map<number, number[]>([[0, []], [1, []]]);
      for (;;) {
        const leases = await rheo.fetch('old', 'g', { limit: 500 });
        if (leases.length === 0) break;
        for (const l of leases) seen.get(l.event.partition)!.push(l.event.sequence);
        await rheo.ackMany(leases);
      }
      expect(seen.get(0)!.sort((a, b) => a - b)).toEqual([550, 580, ...Array.from({ length: 401 }, (_, i) => 601 + i)]);
      expect(seen.get(1)!.sort((a, b) => a - b)).toEqual(Array.from({ length: 696 }, (_, i) => 306 + i));
      expect((await rheo.lag('old', 'g')).lag).toBe(0);

      // Trimming passes segment 0 by row deletes and keeps the bound exact.
      expect((await rheo.trim('old', { keep: 10 })).partitions).toEqual({
        0: { deleted: 991, lowWatermark: 992 },
        1: { deleted: 991, lowWatermark: 992 },
      });
      expect((await rheo.read('old', { partition: 1 })).map((e) => e.sequence)).toEqual(Array.from({ length: 10 }, (_, i) => 992 + i));
    } finally {
      await rheo.close();
      await pool.query(`DROP SCHEMA ${q} CASCADE`);
    }
  });
});
