import { describe, expect, it } from 'vitest';
import { RheoError } from '../../src/core/errors.js';
import { useFixture, type BackendFactory } from './fixture.js';

/**
 * The capability contract of transactions, on every backend: a backend
 * without `transactions` refuses `rheo.transaction()` and
 * `consume({ transaction: true })` with `unsupported` naming the capability
 * (and writes nothing); one with it implements both backend calls. What the
 * transactions do is tested per store (test/postgres/transactions.test.ts),
 * since the client they bind to is the store's own.
 */
export function registerTransactionTests(makeBackend: BackendFactory): void {
  describe('transactions capability', () => {
    const fx = useFixture(makeBackend);

    it('is declared, and the calls match the declaration', async () => {
      const { rheo, backend } = fx();
      await rheo.createStream('s');
      await rheo.createGroup('s', 'g');
      const client = { query: async () => ({ rows: [] }) };
      if (rheo.capabilities.transactions) {
        expect(typeof backend.transaction).toBe('function');
        expect(typeof backend.beginTransaction).toBe('function');
        expect(() => rheo.transaction(null as never)).toThrow(expect.objectContaining({ code: 'invalid_argument' }));
        return;
      }
      for (const call of [
        () => rheo.transaction(client),
        () => rheo.consume({ stream: 's', group: 'g', transaction: true, handler: () => undefined }),
      ]) {
        let error: unknown;
        try {
          call();
        } catch (e) {
          error = e;
        }
        expect(error).toBeInstanceOf(RheoError);
        expect(error).toMatchObject({ code: 'unsupported' });
        expect((error as Error).message).toContain('"transactions"');
      }
      expect(await rheo.read('s')).toEqual([]);
    });
  });
}
