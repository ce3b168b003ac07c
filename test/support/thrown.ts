import { expect } from 'vitest';
import { RheoError } from '../../src/core/errors.js';

/** The RheoError `fn` throws synchronously; fails the test when it throws nothing or something else. */
export function thrown(fn: () => unknown): RheoError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(RheoError);
    return error as RheoError;
  }
  throw new Error('expected a RheoError, nothing was thrown');
}
