import type { LuaScript } from './script.js';
import { APPEND } from './log-scripts.js';
import { CLAIM, INIT_GROUP, PEEK, RENEW, SETTLE } from './lease-scripts.js';
import { DEAD_LETTERS, INFO, REDRIVE, REPLAY, RESET_GROUP } from './progress-scripts.js';

/*
 * The scripts of the log, the leases and the progress, one file per concern
 * like the backend's own (log-scripts.ts, lease-scripts.ts,
 * progress-scripts.ts; ownership-scripts.ts and retention-scripts.ts beside
 * them), gathered here.
 */

export type { LuaScript } from './script.js';
export { APPEND, CLAIM, DEAD_LETTERS, INFO, INIT_GROUP, PEEK, REDRIVE, RENEW, REPLAY, RESET_GROUP, SETTLE };

export const SCRIPTS: readonly LuaScript[] = [APPEND, INIT_GROUP, RESET_GROUP, PEEK, CLAIM, RENEW, SETTLE, INFO, REPLAY, REDRIVE, DEAD_LETTERS];
