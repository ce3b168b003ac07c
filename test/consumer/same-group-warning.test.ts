import diagnosticsChannel from 'node:diagnostics_channel';
import pgModule from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { memoryBackend } from '../../src/backends/memory/memory-backend.js';
import { ManualClock } from '../../src/core/clock.js';
import type { LogFields, Logger } from '../../src/core/logger.js';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { redisBackend } from '../../src/backends/redis/redis-backend.js';
import type { Backend } from '../../src/core/backend.js';
import { trackGroupReader, WARNING_CHANNEL, type RheoWarning } from '../../src/observability/same-group-warning.js';
import { createRheo, type Rheo } from '../../src/rheo.js';

/*
 * The registry is per process, so every test uses stream names of its own.
 */

const made: Rheo[] = [];
afterEach(async () => {
  for (const rheo of made.splice(0)) await rheo.close();
});

async function rheoWith(stream: string, groups: string[] = ['g'], logger?: Logger): Promise<Rheo> {
  const clock = new ManualClock();
  const rheo = createRheo({ backend: memoryBackend({ clock }), clock, logger });
  made.push(rheo);
  await rheo.createStream(stream);
  for (const group of groups) await rheo.createGroup(stream, group);
  return rheo;
}

/** Collects what `rheo:warning` carries while `fn` runs. */
async function warningsDuring(fn: () => Promise<void> | void): Promise<RheoWarning[]> {
  const seen: RheoWarning[] = [];
  const listener = (message: unknown): void => void seen.push(message as RheoWarning);
  diagnosticsChannel.subscribe(WARNING_CHANNEL, listener);
  try {
    await fn();
  } finally {
    diagnosticsChannel.unsubscribe(WARNING_CHANNEL, listener);
  }
  return seen;
}

const handler = (): void => {};
const PgPool = pgModule.Pool;

/** A pino-shaped logger that keeps its warns. */
function warnLogger(): Logger & { warns: Array<{ fields: LogFields; message: string }> } {
  const warns: Array<{ fields: LogFields; message: string }> = [];
  const other = (): void => {};
  return { warns, debug: other, info: other, error: other, warn: (fields, message) => void warns.push({ fields, message }) };
}

describe('consumer and producer of one group in one process', () => {
  it('warns once on rheo:warning when both run, naming the stream and group', async () => {
    const rheo = await rheoWith('warn-a');
    const warnings = await warningsDuring(async () => {
      rheo.producer({ stream: 'warn-a', group: 'g' });
      rheo.consume({ stream: 'warn-a', group: 'g', handler });
      rheo.producer({ stream: 'warn-a', group: 'g' });
      rheo.consume({ stream: 'warn-a', group: 'g', handler });
    });
    expect(warnings).toEqual([
      expect.objectContaining({ code: 'consumer_and_producer_in_one_process', stream: 'warn-a', group: 'g' }),
    ]);
    expect(warnings[0]!.message).toContain('group "g" on stream "warn-a"');
  });

  it('does not warn for consumers alone, producers alone, other groups, or one that ended before the other started', async () => {
    const rheo = await rheoWith('warn-b', ['g', 'h']);
    const warnings = await warningsDuring(() => {
      rheo.consume({ stream: 'warn-b', group: 'g', handler });
      rheo.consume({ stream: 'warn-b', group: 'g', handler });
      rheo.producer({ stream: 'warn-b', group: 'h' });
      rheo.producer({ stream: 'warn-b', group: 'h' });
    });
    expect(warnings).toEqual([]);
    const again = await rheoWith('warn-b2');
    const later = await warningsDuring(async () => {
      const producer = again.producer({ stream: 'warn-b2', group: 'g' });
      producer.destroy();
      await producer.close();
      again.consume({ stream: 'warn-b2', group: 'g', handler });
    });
    expect(later).toEqual([]);
  });

  it('counts instances sharing one store together, and separate memory stores apart', async () => {
    const one = await rheoWith('warn-c');
    const other = await rheoWith('warn-c');
    const separate = await warningsDuring(() => {
      one.producer({ stream: 'warn-c', group: 'g' });
      other.consume({ stream: 'warn-c', group: 'g', handler });
    });
    expect(separate).toEqual([]);
    const shared = createRheo({ backend: one.backend });
    const together = await warningsDuring(() => {
      shared.consume({ stream: 'warn-c', group: 'g', handler });
    });
    expect(together).toHaveLength(1);
    await shared.close().catch(() => {});
  });

  it('goes to process.emitWarning when nobody subscribed to rheo:warning', async () => {
    const rheo = await rheoWith('warn-d');
    const warned = new Promise<Error>((resolve) => process.once('warning', resolve));
    rheo.consume({ stream: 'warn-d', group: 'g', handler });
    rheo.producer({ stream: 'warn-d', group: 'g' });
    const warning = await warned;
    expect(warning).toMatchObject({ name: 'RheoWarning', code: 'RHEO_CONSUMER_AND_PRODUCER' });
  });

  it("also logs the warning once, at warn, to the logger of every instance with a reader of the group", async () => {
    const logger = warnLogger();
    const rheo = await rheoWith('warn-e', ['g'], logger);
    const otherLogger = warnLogger();
    const other = createRheo({ backend: rheo.backend, logger: otherLogger });
    made.push(other);
    const quiet = createRheo({ backend: rheo.backend });
    made.push(quiet);
    const warnings = await warningsDuring(() => {
      rheo.producer({ stream: 'warn-e', group: 'g' });
      other.consume({ stream: 'warn-e', group: 'g', handler });
      quiet.consume({ stream: 'warn-e', group: 'g', handler });
      rheo.consume({ stream: 'warn-e', group: 'g', handler });
    });
    expect(warnings).toHaveLength(1); // the channel keeps getting it, once
    const expected = [
      {
        fields: { code: 'consumer_and_producer_in_one_process', stream: 'warn-e', group: 'g' },
        message: `rheo: ${warnings[0]!.message}`,
      },
    ];
    expect(logger.warns).toEqual(expected);
    expect(otherLogger.warns).toEqual(expected);
  });

  describe('keys shared stores by the store they reach, not by a schema alone', () => {
    // Built but never used: neither opens a connection before its first call.
    const backends: Backend[] = [];
    afterEach(async () => {
      for (const backend of backends.splice(0)) await backend.close();
    });
    function pg(connectionString: string, schema = 'rheo'): Backend {
      const backend = postgresBackend({ connectionString }, { schema });
      backends.push(backend);
      return backend;
    }
    function redis(url: string, prefix = 'rheo'): Backend {
      const backend = redisBackend({ url }, { prefix });
      backends.push(backend);
      return backend;
    }
    /** Whether a producer on `a` and a consumer on `b` of one group warn. */
    async function meet(a: Backend, b: Backend, stream: string): Promise<boolean> {
      const untrack: Array<() => void> = [];
      const warnings = await warningsDuring(() => {
        untrack.push(trackGroupReader(a, stream, 'g', 'producer'));
        untrack.push(trackGroupReader(b, stream, 'g', 'consumer'));
      });
      for (const stop of untrack) stop();
      return warnings.length > 0;
    }

    it('does not mix Redis stores on other servers, databases or prefixes', async () => {
      expect(await meet(redis('redis://127.0.0.1:6390'), redis('redis://127.0.0.1:6391'), 'key-r1')).toBe(false);
      expect(await meet(redis('redis://127.0.0.1:6390/1'), redis('redis://127.0.0.1:6390/2'), 'key-r2')).toBe(false);
      expect(await meet(redis('redis://127.0.0.1:6390', 'a'), redis('redis://127.0.0.1:6390', 'b'), 'key-r3')).toBe(false);
      // Two backend objects on one server, database and prefix are one store.
      expect(await meet(redis('redis://127.0.0.1:6390'), redis('redis://127.0.0.1:6390/0'), 'key-r4')).toBe(true);
    });

    it('does not mix PostgreSQL schemas of the same name in other databases or servers', async () => {
      expect(await meet(pg('postgres://u@127.0.0.1:5433/one'), pg('postgres://u@127.0.0.1:5433/two'), 'key-p1')).toBe(false);
      expect(await meet(pg('postgres://u@127.0.0.1:5433/one'), pg('postgres://u@127.0.0.1:5434/one'), 'key-p2')).toBe(false);
      expect(await meet(pg('postgres://u@127.0.0.1:5433/one', 'a'), pg('postgres://u@127.0.0.1:5433/one', 'b'), 'key-p3')).toBe(false);
      // Another user or pool on the same database and schema is the same store.
      expect(await meet(pg('postgres://u@127.0.0.1:5433/one'), pg('postgres://v:secret@127.0.0.1:5433/one'), 'key-p4')).toBe(true);
    });

    it('names a lent pool by what it connects to', async () => {
      const pools = [
        new PgPool({ host: '127.0.0.1', port: 5433, database: 'one' }),
        new PgPool({ connectionString: 'postgres://w@127.0.0.1:5433/one' }),
        new PgPool({ host: '127.0.0.1', port: 5433, database: 'two' }),
      ];
      try {
        const lent = pools.map((pool) => postgresBackend({ pool }));
        backends.push(...lent);
        expect(await meet(lent[0]!, lent[1]!, 'key-l1')).toBe(true);
        expect(await meet(lent[0]!, lent[2]!, 'key-l2')).toBe(false);
        expect(await meet(lent[2]!, pg('postgres://u@127.0.0.1:5433/two'), 'key-l3')).toBe(true);
      } finally {
        await Promise.all(pools.map((pool) => pool.end()));
      }
    });

    it('builds a backend from a connection it cannot parse, as before, and keys it by the text given', async () => {
      const odd = redisBackend({ nodes: ['not a host:x'] });
      const escaped = postgresBackend({ connectionString: 'postgres://u@127.0.0.1:5433/%zz' });
      backends.push(odd, escaped);
      expect(odd.storeId).toBe('redis-cluster://not a host:x#rheo');
      expect(escaped.storeId).toBe('postgres:postgres://u@127.0.0.1:5433/%zz#rheo');
    });

    it('never mixes a Redis store with a PostgreSQL one', async () => {
      expect(await meet(redis('redis://127.0.0.1:6390'), pg('postgres://u@127.0.0.1:6390/rheo'), 'key-x')).toBe(false);
    });
  });
});
