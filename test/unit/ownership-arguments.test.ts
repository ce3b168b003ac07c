import { describe, expect, it } from 'vitest';
import { MAX_LEASE_MS } from '../../src/core/arguments.js';
import type { RheoError } from '../../src/core/errors.js';
import {
  DEFAULT_REBALANCE_TIMEOUT_MS,
  DEFAULT_SESSION_MS,
  assertDistinctPartitions,
  assertMemberId,
  commitOp,
  heartbeatRequest,
  ownershipFence,
  type HeartbeatOptions,
} from '../../src/core/ownership-arguments.js';
import { thrown } from '../support/thrown.js';

function invalid(fn: () => unknown, message: string | RegExp): RheoError {
  const error = thrown(fn);
  expect(error.code).toBe('invalid_argument');
  if (typeof message === 'string') expect(error.message).toBe(message);
  else expect(error.message).toMatch(message);
  return error;
}

const fence = { stream: 'orders', group: 'billing', partition: 2, memberId: 'm-1', generation: 3 };

describe('assertMemberId', () => {
  it('accepts 1 to 200 characters and names memberId otherwise', () => {
    expect(() => assertMemberId('x')).not.toThrow();
    expect(() => assertMemberId('x'.repeat(200))).not.toThrow();
    invalid(() => assertMemberId(''), 'memberId must be a string of 1-200 characters, got ""');
    invalid(() => assertMemberId('x'.repeat(201)), /^memberId must be a string of 1-200 characters/);
    invalid(() => assertMemberId(5), 'memberId must be a string of 1-200 characters, got 5');
  });
});

describe('heartbeatRequest', () => {
  it('fills in the default session and rebalance timeout', () => {
    expect(DEFAULT_SESSION_MS).toBe(10_000);
    expect(DEFAULT_REBALANCE_TIMEOUT_MS).toBe(30_000);
    expect(heartbeatRequest({ memberId: 'm-1' })).toEqual({ memberId: 'm-1', sessionMs: 10_000, rebalanceTimeoutMs: 30_000 });
  });

  it('keeps the given values at the edges of their ranges, and nothing else', () => {
    expect(heartbeatRequest({ memberId: 'm-1', sessionMs: 1, rebalanceTimeoutMs: 0, signal: undefined } as HeartbeatOptions)).toEqual({
      memberId: 'm-1',
      sessionMs: 1,
      rebalanceTimeoutMs: 0,
    });
    expect(heartbeatRequest({ memberId: 'm-1', sessionMs: MAX_LEASE_MS, rebalanceTimeoutMs: MAX_LEASE_MS })).toEqual({
      memberId: 'm-1',
      sessionMs: MAX_LEASE_MS,
      rebalanceTimeoutMs: MAX_LEASE_MS,
    });
  });

  it('refuses options that are not an object, showing what it got', () => {
    invalid(() => heartbeatRequest(null as unknown as HeartbeatOptions), 'heartbeat expects { memberId, sessionMs?, rebalanceTimeoutMs? }, got null');
    invalid(() => heartbeatRequest('m-1' as unknown as HeartbeatOptions), 'heartbeat expects { memberId, sessionMs?, rebalanceTimeoutMs? }, got "m-1"');
    invalid(() => heartbeatRequest(undefined as unknown as HeartbeatOptions), /^heartbeat expects .* got undefined$/);
  });

  it('names the option that is out of range, its range and the value', () => {
    invalid(() => heartbeatRequest({ memberId: '' }), /^memberId must be a string of 1-200 characters/);
    invalid(() => heartbeatRequest({ memberId: 'm-1', sessionMs: 0 }), `sessionMs must be an integer in 1..${MAX_LEASE_MS}, got 0`);
    invalid(() => heartbeatRequest({ memberId: 'm-1', sessionMs: MAX_LEASE_MS + 1 }), `sessionMs must be an integer in 1..${MAX_LEASE_MS}, got ${MAX_LEASE_MS + 1}`);
    invalid(() => heartbeatRequest({ memberId: 'm-1', rebalanceTimeoutMs: -1 }), `rebalanceTimeoutMs must be an integer in 0..${MAX_LEASE_MS}, got -1`);
    invalid(
      () => heartbeatRequest({ memberId: 'm-1', rebalanceTimeoutMs: MAX_LEASE_MS + 1 }),
      `rebalanceTimeoutMs must be an integer in 0..${MAX_LEASE_MS}, got ${MAX_LEASE_MS + 1}`,
    );
  });
});

describe('ownershipFence', () => {
  it('returns exactly the fence fields, read from the argument', () => {
    expect(ownershipFence({ ...fence, upTo: 9, extra: true }, 'commit')).toEqual(fence);
    expect(ownershipFence({ ...fence, partition: 4095, generation: 0 }, 'commit')).toEqual({ ...fence, partition: 4095, generation: 0 });
  });

  it('refuses a non-object, naming the call and the fields it expects', () => {
    invalid(() => ownershipFence(null, 'release'), 'release expects { stream, group, partition, memberId, generation }, got null');
    invalid(() => ownershipFence(7, 'release'), 'release expects { stream, group, partition, memberId, generation }, got 7');
  });

  it('turns a getter that throws into invalid_argument with the thrown message and cause', () => {
    const cause = new Error('no access');
    const value = {
      ...fence,
      get generation(): number {
        throw cause;
      },
    };
    const error = invalid(() => ownershipFence(value, 'release'), 'release could not read its argument: no access');
    expect(error.cause).toBe(cause);
  });

  it('names the field that is wrong, with the call for partition and generation', () => {
    invalid(() => ownershipFence({ ...fence, stream: 'bad name' }, 'commit'), /^stream name must be 1-200 characters .* got "bad name"$/);
    invalid(() => ownershipFence({ ...fence, group: '' }, 'commit'), /^group name must be 1-200 characters .* got ""$/);
    invalid(() => ownershipFence({ ...fence, partition: 4096 }, 'commit'), 'commit partition must be an integer in 0..4095, got 4096');
    invalid(() => ownershipFence({ ...fence, partition: -1 }, 'commit'), 'commit partition must be an integer in 0..4095, got -1');
    invalid(() => ownershipFence({ ...fence, memberId: undefined }, 'commit'), 'memberId must be a string of 1-200 characters, got undefined');
    invalid(() => ownershipFence({ ...fence, generation: -1 }, 'commit'), 'commit generation must be an integer >= 0, got -1');
    invalid(() => ownershipFence({ ...fence, generation: 1.5 }, 'commit'), 'commit generation must be an integer >= 0, got 1.5');
  });

  it('reads each field once', () => {
    let reads = 0;
    const value = {
      ...fence,
      get partition(): unknown {
        reads++;
        return reads === 1 ? 1 : 'changed';
      },
    };
    expect(ownershipFence(value, 'commit').partition).toBe(1);
    expect(reads).toBe(1);
  });
});

describe('commitOp', () => {
  it('returns the fence, upTo and no dead letters when none are given', () => {
    expect(commitOp({ ...fence, upTo: 0 }, 'commit')).toEqual({ ...fence, upTo: 0, deadLetters: [] });
  });

  it('keeps dead letters with their reason normalized as a nack reason is', () => {
    const op = commitOp(
      {
        ...fence,
        upTo: 10,
        deadLetters: [
          { sequence: 1, attempt: 1 },
          { sequence: 10, attempt: 3, reason: new Error('boom') },
          { sequence: 5, attempt: 2, reason: 'bad\u0000byte' },
        ],
      },
      'commit',
    );
    expect(op).toEqual({
      ...fence,
      upTo: 10,
      deadLetters: [
        { sequence: 1, attempt: 1, reason: null },
        { sequence: 10, attempt: 3, reason: 'boom' },
        { sequence: 5, attempt: 2, reason: 'bad\ufffdbyte' },
      ],
    });
  });

  it('checks the fence first', () => {
    invalid(() => commitOp({ ...fence, generation: -1, upTo: -1 }, 'commit'), /^commit generation /);
  });

  it('names upTo when it is not a non-negative integer', () => {
    invalid(() => commitOp({ ...fence, upTo: -1 }, 'commit'), 'commit upTo must be an integer >= 0, got -1');
    invalid(() => commitOp({ ...fence }, 'commit'), 'commit upTo must be an integer >= 0, got undefined');
  });

  it('turns a getter of upTo that throws into invalid_argument with the thrown message and cause', () => {
    const cause = new Error('denied');
    const value = {
      ...fence,
      get upTo(): number {
        throw cause;
      },
    };
    expect(invalid(() => commitOp(value, 'commit'), 'commit could not read its argument: denied').cause).toBe(cause);
  });

  it('names what is wrong with the dead letters', () => {
    const op = (deadLetters: unknown) => () => commitOp({ ...fence, upTo: 5, deadLetters }, 'commit');
    invalid(op({ sequence: 1, attempt: 1 }), 'commit deadLetters must be an array, got an object');
    invalid(op(null), 'commit deadLetters must be an array, got null');
    invalid(op([{ sequence: 1, attempt: 1 }, null]), 'commit deadLetters[1] must be { sequence, attempt, reason? }');
    invalid(op([3]), 'commit deadLetters[0] must be { sequence, attempt, reason? }');
    invalid(op([{ sequence: 0, attempt: 1 }]), 'commit deadLetters[0].sequence must be an integer in 1..5, got 0');
    invalid(op([{ sequence: 6, attempt: 1 }]), 'commit deadLetters[0].sequence must be an integer in 1..5, got 6');
    invalid(op([{ sequence: 2, attempt: 0 }]), 'commit deadLetters[0].attempt must be an integer >= 1, got 0');
    invalid(op([{ sequence: 2, attempt: 1 }, { sequence: 3, attempt: 1 }, { sequence: 2, attempt: 4 }]), 'commit deadLetters names sequence 2 twice');
  });
});

describe('assertDistinctPartitions', () => {
  it('accepts distinct partitions, also of other groups or streams', () => {
    expect(() =>
      assertDistinctPartitions(
        [
          fence,
          { ...fence, partition: 3 },
          { ...fence, group: 'other' },
          { ...fence, stream: 'other' },
          // Without a separator these two would read as one key.
          { ...fence, stream: 'a', group: 'b1', partition: 2 },
          { ...fence, stream: 'ab', group: '1', partition: 2 },
        ],
        'commit',
      ),
    ).not.toThrow();
    expect(() => assertDistinctPartitions([], 'commit')).not.toThrow();
  });

  it('names the partition, group and stream named twice', () => {
    invalid(
      () => assertDistinctPartitions([fence, { ...fence, partition: 1 }, { ...fence, memberId: 'm-2', generation: 9 }], 'commit'),
      'commit names partition 2 of group "billing" on stream "orders" twice',
    );
  });
});
