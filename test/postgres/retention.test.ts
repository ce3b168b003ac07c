import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { isRheoError } from '../../src/core/errors.js';
import { createRheo } from '../../src/rheo.js';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { databaseUrl, makeTestBackend, schemaAtVersion, sharedPool } from '../support/postgres.js';

const noTrimmer = { enabled: false } as const;

async function streamId(schema: string, name: string): Promise<number> {
  const { rows } = await sharedPool().query<{ id: number }>(`SELECT id FROM "${schema}".streams WHERE name = $1`, [name]);
  return rows[0]!.id;
}

describe('postgres retention', () => {
  it('one trimmer at a time per stream: a background batch skips a busy stream, an explicit trim waits for it', async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend, retention: noTrimmer });
    await rheo.createStream('s');
    await rheo.appendBatch('s', Array.from({ length: 5 }, (_, i) => ({ payload: i })));
    const id = await streamId(backend.schema, 's');
    const holder = await sharedPool().connect();
    try {
      // Another process's trimmer holds the stream's trim lock.
      await holder.query(`SELECT pg_advisory_lock(hashtext('rheo_trim:' || $1::text), $2::int)`, [backend.schema, id]);
      const skipped = await backend.trim('s', { before: null, keep: 0, force: false, limit: 100, skipIfBusy: true });
      expect(skipped.deleted).toBe(0);
      let waited = false;
      const explicit = rheo.trim('s', { keep: 2 }).then((r) => {
        waited = true;
        return r;
      });
      // The explicit trim is queued on the lock, not done.
      await expect.poll(async () => {
        const { rows } = await sharedPool().query(
          `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = $1`,
          [id],
        );
        return rows.length;
      }).toBe(1);
      expect(waited).toBe(false);
      await holder.query(`SELECT pg_advisory_unlock(hashtext('rheo_trim:' || $1::text), $2::int)`, [backend.schema, id]);
      expect((await explicit).deleted).toBe(3);
    } finally {
      holder.release();
      await rheo.close();
    }
  });

  it('a trim in progress blocks neither appends nor fetches (it locks only the low-watermark rows)', async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend, retention: noTrimmer });
    await rheo.createStream('s');
    await rheo.createGroup('s', 'g');
    await rheo.appendBatch('s', Array.from({ length: 5 }, (_, i) => ({ payload: i })));
    const id = await streamId(backend.schema, 's');
    const trimmer = await sharedPool().connect();
    try {
      // What a trim batch holds until it commits: the advisory lock and the low-watermark rows.
      await trimmer.query('BEGIN');
      await trimmer.query(`SELECT pg_advisory_xact_lock(hashtext('rheo_trim:' || $1::text), $2::int)`, [backend.schema, id]);
      await trimmer.query(`SELECT * FROM "${backend.schema}".low_watermarks WHERE stream_id = $1 FOR UPDATE`, [id]);
      await trimmer.query(`DELETE FROM "${backend.schema}".events WHERE stream_id = $1 AND partition = 0 AND sequence <= 2`, [id]);
      await rheo.append('s', { payload: 'during' });
      const leases = await rheo.fetch('s', 'g', { limit: 10 });
      expect(leases.map((l) => l.event.sequence)).toEqual([1, 2, 3, 4, 5, 6]);
      expect((await rheo.ackMany(leases)).every((r) => r.ok)).toBe(true);
      await trimmer.query('ROLLBACK');
    } finally {
      trimmer.release();
      await rheo.close();
    }
  });

  it('a process that cached a stream sees another process delete and re-create it', async () => {
    const a = await makeTestBackend();
    const b = postgresBackend({ connectionString: databaseUrl() }, { schema: a.schema });
    const ra = createRheo({ backend: a, retention: noTrimmer });
    const rb = createRheo({ backend: b, retention: noTrimmer });
    try {
      await ra.createStream('s', { partitions: 2 });
      await ra.createGroup('s', 'g');
      await rb.append('s', { payload: 'old' });
      expect(await rb.fetch('s', 'g')).toHaveLength(1);
      await ra.deleteStream('s', { confirm: true });
      // b's cached ids are stale: it finds out instead of writing under them.
      const gone = await rb.append('s', { payload: 'x' }).catch((e: unknown) => e);
      expect(isRheoError(gone, 'stream_not_found')).toBe(true);
      await ra.createStream('s');
      await ra.createGroup('s', 'g');
      const appended = await rb.append('s', { payload: 'new' });
      expect(appended.sequence).toBe(1);
      expect((await rb.read('s')).map((e) => e.payload)).toEqual(['new']);
      const leases = await rb.fetch('s', 'g');
      expect(leases.map((l) => l.event.payload)).toEqual(['new']);
    } finally {
      await rb.close();
      await ra.close();
    }
  });

  it('deleteStream removes every row of the stream; a purge a dead process left behind is finished by the background trimmer', async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend, retention: noTrimmer });
    const s = `"${backend.schema}"`;
    await rheo.createStream('s', { partitions: 2 });
    await rheo.createGroup('s', 'g');
    await rheo.appendBatch('s', Array.from({ length: 30 }, (_, i) => ({ payload: i })));
    const leases = await rheo.fetch('s', 'g', { limit: 3 });
    await rheo.reject(leases[0]!, 'x');
    const id = await streamId(backend.schema, 's');
    await rheo.deleteStream('s', { confirm: true });
    const count = async (table: string, where: string) =>
      Number((await sharedPool().query(`SELECT count(*) AS n FROM ${s}.${table} WHERE ${where}`, [id])).rows[0].n);
    for (const [table, where] of [
      ['events', 'stream_id = $1'],
      ['segments', 'stream_id = $1'],
      ['stream_partitions', 'stream_id = $1'],
      ['low_watermarks', 'stream_id = $1'],
      ['deleted_streams', 'stream_id = $1'],
      ['groups', 'stream_id = $1'],
      ['dead_letters', 'group_id > 0 AND $1 > 0'],
      ['deliveries', 'group_id > 0 AND $1 > 0'],
      ['lease_ranges', 'group_id > 0 AND $1 > 0'],
      ['group_cursors', 'group_id > 0 AND $1 > 0'],
    ] as const) {
      expect(await count(table, where), table).toBe(0);
    }
    // A process died between deleting the catalog rows and purging the events.
    await sharedPool().query(
      `INSERT INTO ${s}.events (stream_id, partition, sequence, id, type, payload, metadata, ts)
       SELECT 424242, 0, g, 'orphan-' || g, 'event', '1', '{}', now() FROM generate_series(1, 50) g`,
    );
    await sharedPool().query(`INSERT INTO ${s}.deleted_streams (stream_id) VALUES (424242)`);
    await rheo.createStream('other', { retention: { maxEvents: 10 } });
    const background = createRheo({ backend, retention: { intervalMs: 3_600_000 } });
    await background.trimmer!.runOnce();
    const left = await sharedPool().query(`SELECT count(*) AS n FROM ${s}.events WHERE stream_id = 424242`);
    expect(Number(left.rows[0].n)).toBe(0);
    expect((await sharedPool().query(`SELECT * FROM ${s}.deleted_streams`)).rows).toEqual([]);
    await background.trimmer!.close();
    await rheo.close();
  });

  it('age retention follows the injected clock; the database clock by default', async () => {
    const clock = new ManualClock();
    const backend = await makeTestBackend(clock);
    const rheo = createRheo({ backend, clock, retention: noTrimmer });
    await rheo.createStream('s', { retention: { maxAgeMs: 1000 } });
    await rheo.append('s', { payload: 1 });
    expect((await rheo.trim('s')).deleted).toBe(0);
    clock.advance(1001);
    expect((await rheo.trim('s')).deleted).toBe(1);
    await rheo.close();
  });
});

describe('postgres forced trims under concurrent consumers', () => {
  it('every event is acked exactly once or reported removed unsettled, never both, never neither', { timeout: 120_000 }, async () => {
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend, retention: noTrimmer });
    const total = 3000;
    await rheo.createStream('s', { partitions: 3 });
    await rheo.createGroup('s', 'g');
    let appending = true;
    const acked = new Set<string>();
    let duplicateAcks = 0;
    let removed = 0;
    const appender = (async () => {
      for (let i = 0; i < total; i += 100) {
        await rheo.appendBatch('s', Array.from({ length: 100 }, (_, k) => ({ payload: i + k, key: `k${(i + k) % 17}` })));
      }
      appending = false;
    })();
    const consumer = async () => {
      while (appending || (await rheo.lag('s', 'g')).lag > 0) {
        const leases = await rheo.fetch('s', 'g', { limit: 40 });
        const results = await rheo.ackMany(leases);
        results.forEach((r, i) => {
          if (!r.ok) {
            expect(r.error.code).toBe('stale_lease');
            return;
          }
          const key = `${leases[i]!.event.partition}:${leases[i]!.event.sequence}`;
          if (acked.has(key)) duplicateAcks++;
          acked.add(key);
        });
      }
    };
    const trimmer = (async () => {
      while (appending) {
        const report = await rheo.trim('s', { keep: 30, force: true });
        removed += report.forced.reduce((n, f) => n + f.unsettled, 0);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    await Promise.all([appender, consumer(), consumer(), trimmer]);
    expect(duplicateAcks).toBe(0);
    expect(acked.size + removed).toBe(total);
    const lag = await rheo.lag('s', 'g');
    for (const p of Object.values(lag.partitions)) {
      expect(p.frontier).toBe(p.highWatermark);
      expect(p.frontier).toBeGreaterThanOrEqual(p.lowWatermark - 1);
    }
    await rheo.close();
  });
});

describe('migration 006 on a schema that already holds streams', () => {
  it('backfills a low watermark of 1 per partition; retention and trims then work on the old streams', async () => {
    const { schema, q } = await schemaAtVersion('upgrade', 4);
    const pool = sharedPool();
    // What an older rheo left: a stream of 2 partitions with 3 + 2 events and a group that acked 2 in partition 0.
    await pool.query(`INSERT INTO ${q}.streams (name, partitions, created_at) VALUES ('old', 2, now())`);
    await pool.query(`INSERT INTO ${q}.stream_partitions (stream_id, partition, high_watermark) SELECT id, p, 3 - p FROM ${q}.streams, generate_series(0, 1) p`);
    await pool.query(
      `INSERT INTO ${q}.events (stream_id, partition, sequence, id, type, payload, metadata, ts)
       SELECT s.id, p, n, 'e-' || p || '-' || n, 'event', to_jsonb(n), '{}', now()
       FROM ${q}.streams s, generate_series(0, 1) p, generate_series(1, 3) n WHERE n <= 3 - p`,
    );
    await pool.query(`INSERT INTO ${q}.groups (stream_id, name, max_attempts, created_at) SELECT id, 'g', 5, now() FROM ${q}.streams`);
    await pool.query(`INSERT INTO ${q}.group_cursors (group_id, partition, cursor) SELECT id, p, CASE p WHEN 0 THEN 2 ELSE 0 END FROM ${q}.groups, generate_series(0, 1) p`);

    const backend = postgresBackend({ pool }, { schema });
    const rheo = createRheo({ backend, retention: noTrimmer });
    try {
      await rheo.migrate();
      expect((await rheo.listStreams())[0]).toMatchObject({
        name: 'old',
        retention: null,
        watermarks: { 0: { lowWatermark: 1, highWatermark: 3 }, 1: { lowWatermark: 1, highWatermark: 2 } },
      });
      await rheo.setRetention('old', { maxEvents: 0 });
      expect((await rheo.trim('old')).partitions).toEqual({ 0: { deleted: 2, lowWatermark: 3 }, 1: { deleted: 0, lowWatermark: 1 } });
      expect((await rheo.lag('old', 'g')).partitions[0]).toMatchObject({ lowWatermark: 3, frontier: 2, lag: 1 });
      await rheo.createGroup('old', 'fresh');
      expect((await rheo.lag('old', 'fresh')).partitions[0]).toMatchObject({ frontier: 2, lag: 1 });
    } finally {
      await rheo.close();
      await pool.query(`DROP SCHEMA ${q} CASCADE`);
    }
  });
});
