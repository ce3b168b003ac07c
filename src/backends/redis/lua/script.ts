import { groupPrelude } from './group-prelude.js';

/**
 * Every multi-key step of the Redis backend is one of these scripts, run with
 * EVALSHA (connection.ts `ScriptRunner` reloads on NOSCRIPT). Each declares every key it
 * touches and all of them share one partition's hash tag, so a step is atomic
 * on one server and on one Redis Cluster slot alike.
 */
export interface LuaScript {
  readonly name: string;
  readonly source: string;
  /** Number of KEYS the script declares; -1 when it varies (a script over every group of a partition). */
  readonly keys: number;
}

/** A script over one group in one partition: the group prelude's ten keys and the helpers `body` calls, then `body`. */
export const groupScript = (name: string, body: string): LuaScript => ({ name, source: groupPrelude(body) + body, keys: 10 });
