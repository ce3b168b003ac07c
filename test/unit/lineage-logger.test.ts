import { describe, expect, it } from 'vitest';
import { RheoError } from '../../src/core/errors.js';
import { CAUSATION_ID, CORRELATION_ID, assertLineageId, assertLineageKeys, lineageOf, withCorrelation } from '../../src/core/lineage.js';
import { log, resolveLogger, silentLogger, type LogFields, type Logger } from '../../src/core/logger.js';

function invalid(fn: () => unknown, message: string | RegExp): RheoError {
  let error: unknown;
  try {
    fn();
  } catch (caught) {
    error = caught;
  }
  expect(error).toBeInstanceOf(RheoError);
  expect((error as RheoError).code).toBe('invalid_argument');
  if (typeof message === 'string') expect((error as RheoError).message).toBe(message);
  else expect((error as RheoError).message).toMatch(message);
  return error as RheoError;
}

describe('assertLineageId', () => {
  it('follows the event id rule: 1-200 characters, no U+0000', () => {
    expect(() => assertLineageId('x', 'a')).not.toThrow();
    expect(() => assertLineageId('x', 'a'.repeat(200))).not.toThrow();
    invalid(() => assertLineageId('append.correlationId', ''), 'append.correlationId must be a string of 1-200 characters, got ""');
    invalid(() => assertLineageId('append.correlationId', 'a'.repeat(201)), /^append\.correlationId must be a string of 1-200 characters/);
    invalid(() => assertLineageId('append.correlationId', 'a\u0000b'), /append\.correlationId/);
  });
});

describe('lineageOf', () => {
  it('derives nothing and keeps nothing explicit from a plain input', () => {
    expect(lineageOf({}, 'append')).toEqual({ derived: null, explicit: null });
  });

  it('derives causation from causedBy.id, and correlation from its metadata or else its id', () => {
    expect(CORRELATION_ID).toBe('correlationId');
    expect(CAUSATION_ID).toBe('causationId');
    expect(lineageOf({ causedBy: { id: 'e-1' } }, 'append')).toEqual({
      derived: { correlationId: 'e-1', causationId: 'e-1' },
      explicit: null,
    });
    expect(lineageOf({ causedBy: { id: 'e-2', metadata: { correlationId: 'flow-1', other: 1 } } }, 'append').derived).toEqual({
      correlationId: 'flow-1',
      causationId: 'e-2',
    });
    expect(lineageOf({ causedBy: { id: 'e-3', metadata: null } }, 'append').derived).toEqual({ correlationId: 'e-3', causationId: 'e-3' });
    expect(lineageOf({ causedBy: { id: 'e-4', metadata: {} } }, 'append').derived).toEqual({ correlationId: 'e-4', causationId: 'e-4' });
  });

  it('returns explicit correlation and causation apart, each only when given', () => {
    expect(lineageOf({ correlationId: 'c' }, 'append')).toEqual({ derived: null, explicit: { correlationId: 'c' } });
    expect(lineageOf({ causationId: 'k' }, 'append')).toEqual({ derived: null, explicit: { causationId: 'k' } });
    expect(lineageOf({ causedBy: { id: 'e' }, correlationId: 'c', causationId: 'k' }, 'append')).toEqual({
      derived: { correlationId: 'e', causationId: 'e' },
      explicit: { correlationId: 'c', causationId: 'k' },
    });
  });

  it('names the field that is wrong', () => {
    invalid(() => lineageOf({ causedBy: 'e-1' }, 'append'), 'append.causedBy must be an object, got "e-1"');
    invalid(() => lineageOf({ causedBy: null }, 'append'), 'append.causedBy must be an object, got null');
    invalid(() => lineageOf({ causedBy: {} }, 'append'), 'append.causedBy.id must be a string of 1-200 characters, got undefined');
    invalid(() => lineageOf({ causedBy: { id: 'e', metadata: 'x' } }, 'append'), 'append.causedBy.metadata must be an object, got "x"');
    invalid(() => lineageOf({ causedBy: { id: 'e', metadata: [] } }, 'append'), 'append.causedBy.metadata must be an object, got an array');
    invalid(
      () => lineageOf({ causedBy: { id: 'e', metadata: { correlationId: 7 } } }, 'append'),
      'append.causedBy.metadata.correlationId must be a string of 1-200 characters, got 7',
    );
    invalid(
      () => lineageOf({ causedBy: { id: 'e', metadata: { correlationId: null } } }, 'append'),
      'append.causedBy.metadata.correlationId must be a string of 1-200 characters, got null',
    );
    invalid(() => lineageOf({ correlationId: '' }, 'append'), 'append.correlationId must be a string of 1-200 characters, got ""');
    invalid(() => lineageOf({ causationId: 5 }, 'append'), 'append.causationId must be a string of 1-200 characters, got 5');
  });

  it('reads each field once', () => {
    let reads = 0;
    const input = {
      get correlationId(): unknown {
        reads++;
        return reads === 1 ? 'c' : 7;
      },
    };
    expect(lineageOf(input, 'append').explicit).toEqual({ correlationId: 'c' });
    expect(reads).toBe(1);
  });
});

describe('assertLineageKeys', () => {
  it('accepts metadata without lineage keys or with valid ones', () => {
    expect(() => assertLineageKeys('append', {})).not.toThrow();
    expect(() => assertLineageKeys('append', { correlationId: 'c', causationId: 'k', other: 5 })).not.toThrow();
  });

  it('names a lineage key of the metadata that breaks the id rule', () => {
    invalid(() => assertLineageKeys('append', { correlationId: 1 }), 'append.metadata.correlationId must be a string of 1-200 characters, got 1');
    invalid(() => assertLineageKeys('append', { causationId: '' }), 'append.metadata.causationId must be a string of 1-200 characters, got ""');
    invalid(() => assertLineageKeys('append', { correlationId: null }), /^append\.metadata\.correlationId must be a string/);
  });
});

describe('withCorrelation', () => {
  it('adds the correlation id to the metadata pattern', () => {
    expect(withCorrelation(undefined, 'flow')).toEqual({ correlationId: 'flow' });
    expect(withCorrelation({ tenant: 't' }, 'flow')).toEqual({ tenant: 't', correlationId: 'flow' });
    expect(withCorrelation({ correlationId: 'flow' }, 'flow')).toEqual({ correlationId: 'flow' });
  });

  it('refuses an invalid id, naming the query option', () => {
    invalid(() => withCorrelation(undefined, ''), 'query correlationId must be a string of 1-200 characters, got ""');
  });

  it('refuses a where.metadata.correlationId that differs', () => {
    invalid(() => withCorrelation({ correlationId: 'other' }, 'flow'), 'query correlationId and where.metadata.correlationId differ, so no event could match');
    invalid(() => withCorrelation({ correlationId: null }, 'flow'), /differ/);
  });
});

function recording(): { logger: Logger; calls: Array<[string, LogFields, string]> } {
  const calls: Array<[string, LogFields, string]> = [];
  const logger: Logger = {
    debug: (fields, message) => calls.push(['debug', fields, message]),
    info: (fields, message) => calls.push(['info', fields, message]),
    warn: (fields, message) => calls.push(['warn', fields, message]),
    error: (fields, message) => calls.push(['error', fields, message]),
  };
  return { logger, calls };
}

describe('resolveLogger', () => {
  it('is the silent logger when none is given', () => {
    expect(resolveLogger(undefined)).toBe(silentLogger);
    expect(Object.isFrozen(silentLogger)).toBe(true);
    for (const level of ['debug', 'info', 'warn', 'error'] as const) expect(silentLogger[level]({}, 'x')).toBeUndefined();
  });

  it('returns a logger with the four methods as it is', () => {
    const { logger } = recording();
    expect(resolveLogger(logger)).toBe(logger);
  });

  it('refuses a value that is not an object', () => {
    for (const value of [null, 'pino', 5, () => undefined]) {
      invalid(() => resolveLogger(value), 'logger must be an object with debug, info, warn and error methods (pino-compatible)');
    }
  });

  it('names the methods a logger lacks, in level order', () => {
    invalid(() => resolveLogger({}), 'logger lacks the method(s) debug, info, warn, error: expected a pino-compatible logger');
    const { logger } = recording();
    invalid(() => resolveLogger({ ...logger, info: 'no', error: undefined }), 'logger lacks the method(s) info, error: expected a pino-compatible logger');
    invalid(() => resolveLogger({ ...logger, debug: null }), 'logger lacks the method(s) debug: expected a pino-compatible logger');
    invalid(() => resolveLogger({ ...logger, warn: {} }), /lacks the method\(s\) warn:/);
  });
});

describe('log', () => {
  it('calls the level\'s method with the fields and message', () => {
    const { logger, calls } = recording();
    const fields = { stream: 'orders' };
    log(logger, 'warn', fields, 'slow handler');
    log(logger, 'debug', {}, 'tick');
    expect(calls).toEqual([
      ['warn', fields, 'slow handler'],
      ['debug', {}, 'tick'],
    ]);
    expect(calls[0]![1]).toBe(fields);
  });

  it('swallows what a failing logger throws', () => {
    const failing: Logger = {
      ...recording().logger,
      error: () => {
        throw new Error('transport closed');
      },
    };
    expect(() => log(failing, 'error', {}, 'x')).not.toThrow();
  });

  it('does not call the silent logger\'s methods', () => {
    // The silent logger is frozen and its methods return undefined; log skips it outright.
    expect(() => log(silentLogger, 'info', {}, 'x')).not.toThrow();
  });
});
