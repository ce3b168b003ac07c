/*
 * Argument normalisation for the facade: every public call's input is checked
 * and turned into the plain values the backend contract expects, so a call that
 * fails here reaches no backend and writes nothing. One file per area of the
 * facade under arguments/ (ownership's are in ownership-arguments.ts); this
 * module gathers them for the callers outside the facade.
 */

export * from './arguments/common.js';
export * from './arguments/log.js';
export * from './arguments/leases.js';
export * from './arguments/admin.js';
export * from './arguments/operations.js';
