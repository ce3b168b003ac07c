import type { HandlerSettlement } from '../runtime/lease-outcome.js';
import type { TransactionalSettlement } from './transactional-handler.js';

/**
 * How the consumer settles a lease once its handler is done: the runtime's
 * outcome vocabulary (runtime/lease-outcome.ts) read in the consumer's
 * diagnosing style, or, with `consume({ transaction: true })`, a settlement
 * already made (or not) in the handler's transaction.
 */
export type Settlement = HandlerSettlement | TransactionalSettlement;
