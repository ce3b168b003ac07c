import { describe, expect, it } from 'vitest';
import { RheoError } from '../../src/core/errors.js';
import { classifyRedisError } from '../../src/backends/redis/errors.js';

/** What ioredis hands rheo: reply errors carry the server's text, transport errors Node's or its own. */
function replyError(message: string): Error {
  const error = new Error(message);
  error.name = 'ReplyError';
  return error;
}

function errno(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

describe('classifyRedisError', () => {
  const write = { action: 'append to stream "s"', stream: 's', writes: true };
  const read = { action: 'read stream "s"', stream: 's', writes: false };

  it.each([
    ['READONLY You can\'t write against a read only replica.', 'backend_unavailable'],
    ['CLUSTERDOWN The cluster is down', 'backend_unavailable'],
    ['TRYAGAIN Multiple keys request during rehashing of slot', 'backend_unavailable'],
    ['MOVED 3999 127.0.0.1:6381', 'backend_unavailable'],
    ['ASK 3999 127.0.0.1:6381', 'backend_unavailable'],
    ['LOADING Redis is loading the dataset in memory', 'backend_unavailable'],
    ['BUSY Redis is busy running a script.', 'backend_unavailable'],
    ['OOM command not allowed when used memory > \'maxmemory\'.', 'backend_unavailable'],
    ['MASTERDOWN Link with MASTER is down', 'backend_unavailable'],
    ['NOSCRIPT No matching script. Please use EVAL.', 'backend_unavailable'],
    ['NOAUTH Authentication required.', 'permission_denied'],
    ['WRONGPASS invalid username-password pair', 'permission_denied'],
    ['ERR user_script:3: RHEO_NOGROUP the group has no state in this partition', 'group_not_found'],
    ['ERR unknown command', 'internal'],
  ])('a refused write (%s) is %s: the command never ran', (message, code) => {
    const error = classifyRedisError(replyError(message), write);
    expect(error).toBeInstanceOf(RheoError);
    expect(error.code).toBe(code);
    expect(error.stream).toBe('s');
    expect(error.message).toContain('append to stream "s"');
  });

  it('a write refused before sending (offline queue off, not connected) is backend_unavailable', () => {
    const error = new Error("Stream isn't writeable and enableOfflineQueue options is false");
    expect(classifyRedisError(error, write).code).toBe('backend_unavailable');
    expect(classifyRedisError(errno('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:9'), write).code).toBe('backend_unavailable');
  });

  it('a connection lost after a write was sent is ambiguous; after a read it is backend_unavailable', () => {
    for (const lost of [new Error('Connection is closed.'), errno('ECONNRESET', 'read ECONNRESET'), errno('EPIPE', 'write EPIPE'), new Error('Command timed out')]) {
      expect(classifyRedisError(lost, write).code).toBe('ambiguous');
      expect(classifyRedisError(lost, read).code).toBe('backend_unavailable');
    }
  });

  it('keeps a RheoError as it is and chains the driver error as cause', () => {
    const rheo = new RheoError('stale_lease', 'stale');
    expect(classifyRedisError(rheo, write)).toBe(rheo);
    const cause = replyError('CLUSTERDOWN The cluster is down');
    expect(classifyRedisError(cause, write).cause).toBe(cause);
  });
});
