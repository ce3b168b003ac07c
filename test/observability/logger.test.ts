import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import type { LogFields, Logger, LogLevel } from '../../src/core/logger.js';
import type { Lease } from '../../src/core/types.js';
import { memoryBackend } from '../../src/backends/memory/memory-backend.js';
import { createRheo, type Rheo } from '../../src/rheo.js';
import { postgresBackend } from '../../src/backends/postgres/postgres-backend.js';
import { backendFactories } from '../support/backends.js';
import { makeTestBackend, sharedPool, uniqueSchema } from '../support/postgres.js';
import { FaultyBackend } from '../support/faulty-backend.js';
import { ManualTimers } from '../streams/support/manual-timers.js';
import { nextEvent, readOne, until } from '../streams/support/wait.js';

interface Entry {
  level: LogLevel;
  fields: LogFields;
  message: string;
}

/** A pino-shaped logger that keeps what it is given. */
function recordingLogger(): Logger & { entries: Entry[] } {
  const entries: Entry[] = [];
  const at = (level: LogLevel) => (fields: LogFields, message: string) => void entries.push({ level, fields, message });
  return { entries, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

describe('logger option', () => {
  it('rejects a logger without the four pino methods, naming what is missing', () => {
    expect(() => createRheo({ logger: { info: () => undefined } as unknown as Logger })).toThrow(
      expect.objectContaining({ code: 'invalid_argument', message: expect.stringContaining('debug, warn, error') }),
    );
    expect(() => createRheo({ logger: 'console' as unknown as Logger })).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
  });

  it('is silent by default: a rheo without a logger writes nothing to the console on failures', async () => {
    const written: unknown[] = [];
    const original = { warn: console.warn, error: console.error, log: console.log, info: console.info };
    console.warn = console.error = console.log = console.info = (...args: unknown[]) => void written.push(args);
    const clock = new ManualClock();
    const timers = new ManualTimers(clock);
    const faulty = new FaultyBackend(await backendFactories[0]!.make(clock));
    const rheo = createRheo({ backend: faulty, clock });
    try {
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      faulty.fail('fetch', 'backend_unavailable', { times: 1 });
      const producer = rheo.producer({ stream: 's', group: 'g', timers, random: () => 0 });
      const failed = nextEvent(producer, 'fetch-error');
      producer.resume();
      await failed;
      await producer.close();
    } finally {
      Object.assign(console, original);
      await rheo.close();
    }
    expect(written).toEqual([]);
  });
});

for (const factory of backendFactories) {
  describe(`logger receives producer and consumer diagnostics (${factory.name})`, () => {
    async function setup(logger: Logger): Promise<{ rheo: Rheo; faulty: FaultyBackend; clock: ManualClock; timers: ManualTimers }> {
      const clock = new ManualClock();
      const timers = new ManualTimers(clock);
      const faulty = new FaultyBackend(await factory.make(clock));
      const rheo = createRheo({ backend: faulty, clock, logger, defaults: { leaseMs: 1000, pollMs: 50 } });
      await rheo.createStream('orders');
      await rheo.createGroup('orders', 'billing');
      return { rheo, faulty, clock, timers };
    }

    it('a failed fetch is a warn with the code, the failure count and the backoff', async () => {
      const logger = recordingLogger();
      const { rheo, faulty, timers } = await setup(logger);
      try {
        faulty.fail('fetch', 'backend_unavailable', { times: 2 });
        const producer = rheo.producer({ stream: 'orders', group: 'billing', timers, random: () => 0, fetchBackoff: { initialMs: 10, maxMs: 1000 } });
        const second = nextEvent(producer, 'fetch-error', (e: { failures: number }) => e.failures === 2);
        producer.resume();
        await until(() => timers.pendingDelays().length > 0, 'the first backoff');
        timers.advance(10);
        await second;
        const warns = logger.entries.filter((e) => e.level === 'warn');
        expect(warns).toHaveLength(2);
        expect(warns[0]!.fields).toMatchObject({ stream: 'orders', group: 'billing', code: 'backend_unavailable', failures: 1, backoffMs: 10 });
        expect(warns[1]!.fields).toMatchObject({ failures: 2, backoffMs: 20 });
        expect(warns[0]!.fields.err).toMatchObject({ code: 'backend_unavailable' });
        expect(warns[0]!.message).toContain('retrying in 10 ms');
        await producer.close();
      } finally {
        await rheo.close();
      }
    });

    it('a failed renewal and a lost lease are warns naming the stream, group and event', async () => {
      const logger = recordingLogger();
      const { rheo, faulty, clock, timers } = await setup(logger);
      try {
        const [event] = await rheo.appendBatch('orders', [{ payload: 1 }]);
        const producer = rheo.producer({ stream: 'orders', group: 'billing', timers, random: () => 0, maxDemand: 1 });
        const lease = await readOne<Lease>(producer);
        faulty.fail('renew', 'backend_unavailable', { wholeCall: true });
        const renewFailed = nextEvent(producer, 'renew-error');
        timers.advance(500);
        await renewFailed;
        const renewWarn = logger.entries.find((e) => e.message.includes('renewal'));
        expect(renewWarn).toMatchObject({ level: 'warn', fields: { stream: 'orders', group: 'billing', leases: 1, code: 'backend_unavailable' } });
        // Another consumer takes the delivery once the lease expired: the next renewal is fenced.
        clock.advance(1000);
        const [stolen] = await rheo.fetch('orders', 'billing', { consumerId: 'thief' });
        expect(stolen?.event.id).toBe(lease.event.id);
        const lost = nextEvent(producer, 'lease-lost');
        timers.advance(125);
        await lost;
        const lostWarn = logger.entries.find((e) => e.message.includes('lease lost'));
        expect(lostWarn).toMatchObject({ level: 'warn', fields: { stream: 'orders', group: 'billing', eventId: event!.id, sequence: 1 } });
        expect(lostWarn!.fields.err).toMatchObject({ code: 'stale_lease' });
        // The fencing token never reaches a log.
        expect(JSON.stringify(logger.entries.map((e) => e.fields))).not.toContain(lease.leaseId);
        await producer.close();
      } finally {
        await rheo.close();
      }
    });

    it('a consumer logs a failing handler and its stop', async () => {
      const logger = recordingLogger();
      const { rheo } = await setup(logger);
      try {
        await rheo.append('orders', { payload: { card: 'secret-4242' } });
        const consumer = rheo.consume({
          stream: 'orders',
          group: 'billing',
          handler: (_event, { attempt }) => {
            if (attempt === 1) throw new Error('boom');
          },
        });
        await until(() => consumer.stats().acked === 1, 'the retry acked');
        await consumer.stop();
        const handlerWarn = logger.entries.find((e) => e.message.includes('handler'));
        expect(handlerWarn).toMatchObject({ level: 'warn', fields: { kind: 'threw', attempt: 1, stream: 'orders' } });
        expect(logger.entries.some((e) => e.level === 'info' && e.message.includes('stopped'))).toBe(true);
        // Logs never carry the payload.
        expect(JSON.stringify(logger.entries.map((e) => e.fields))).not.toContain('secret-4242');
      } finally {
        await rheo.close();
      }
    });

    it('a logger that throws never breaks the pipeline that reported', async () => {
      const throwing: Logger = {
        debug: () => { throw new Error('logger down'); },
        info: () => { throw new Error('logger down'); },
        warn: () => { throw new Error('logger down'); },
        error: () => { throw new Error('logger down'); },
      };
      const { rheo, faulty, timers } = await setup(throwing);
      try {
        await rheo.append('orders', { payload: 1 });
        faulty.fail('fetch', 'backend_unavailable', { times: 1 });
        const producer = rheo.producer({ stream: 'orders', group: 'billing', timers, random: () => 0, fetchBackoff: { initialMs: 10, maxMs: 10 } });
        const failed = nextEvent(producer, 'fetch-error');
        const got = readOne<Lease>(producer);
        await failed;
        await until(() => timers.pendingDelays().length > 0, 'the backoff');
        timers.advance(10);
        const lease = await got;
        await producer.ack(lease);
        expect((await rheo.lag('orders', 'billing')).lag).toBe(0);
        await producer.close();
      } finally {
        await rheo.close();
      }
    });
  });
}

describe('logger receives what a partition-mode consumer does (memory)', () => {
  it('a join, a rebalance and a leave are infos naming the stream, group, member and partitions', async () => {
    const logger = recordingLogger();
    const clock = new ManualClock();
    const rheo = createRheo({ backend: memoryBackend({ clock }), clock, logger });
    try {
      await rheo.createStream('ledger', { partitions: 2 });
      await rheo.createGroup('ledger', 'audit');
      const consumer = rheo.consume({ stream: 'ledger', group: 'audit', assignment: 'partitions', memberId: 'm1', heartbeatMs: 10, handler: () => {} });
      await until(() => consumer.stats().owned.length === 2, 'the member owns both partitions');
      await consumer.stop();
      const member = { stream: 'ledger', group: 'audit', memberId: 'm1' };
      expect(logger.entries).toEqual([
        { level: 'info', fields: member, message: 'rheo member m1 joined group "audit" of stream "ledger"' },
        {
          level: 'info',
          fields: { ...member, groupGeneration: expect.any(Number), assigned: [0, 1], revoked: [], lost: [], owned: [0, 1] },
          message: expect.stringMatching(/^rheo member m1 of group "audit" on stream "ledger" rebalanced \(generation \d+\): assigned 0, 1$/),
        },
        { level: 'info', fields: member, message: 'rheo member m1 left group "audit" of stream "ledger"' },
      ]);
    } finally {
      await rheo.close();
    }
  });
});

describe('logger receives what the PostgreSQL backend does outside any call', () => {
  it('migrate() logs the migrations it applied at info, and an up-to-date schema at debug', async () => {
    const logger = recordingLogger();
    const schema = uniqueSchema('log');
    const rheo = createRheo({ backend: postgresBackend({ pool: sharedPool() }, { schema }), logger });
    try {
      await rheo.migrate();
      const applied = logger.entries.filter((e) => e.level === 'info');
      expect(applied).toHaveLength(1);
      expect(applied[0]!.fields).toMatchObject({ schema, fromVersion: 0 });
      expect(applied[0]!.fields.migrations).toEqual(expect.arrayContaining([expect.stringMatching(/^1_/)]));
      expect((applied[0]!.fields.routines as string[]).length).toBeGreaterThan(0);
      await rheo.migrate();
      expect(logger.entries.filter((e) => e.level === 'info')).toHaveLength(1);
      expect(logger.entries.at(-1)).toMatchObject({ level: 'debug', fields: { schema } });
    } finally {
      await rheo.close();
    }
  });

  it('a terminated LISTEN connection is a warn, and its reopening an info', async () => {
    const logger = recordingLogger();
    const backend = await makeTestBackend();
    const rheo = createRheo({ backend, logger });
    try {
      await backend.listen();
      const { rows } = await sharedPool().query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`,
        [`rheo-listen:${backend.schema}`],
      );
      expect(rows).toHaveLength(1);
      await sharedPool().query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      await until(() => logger.entries.some((e) => e.message.includes('reconnected')), 'the reconnect log');
      const dropped = logger.entries.find((e) => e.message.includes('dropped'));
      expect(dropped).toMatchObject({ level: 'warn', fields: { schema: backend.schema, failures: 1 } });
      expect(logger.entries.find((e) => e.message.includes('reconnected'))).toMatchObject({ level: 'info', fields: { schema: backend.schema } });
      await until(() => backend.listening, 'listening again');
    } finally {
      await rheo.close();
    }
  });
});
