import { describe, expect, it } from 'vitest';
import { groupPrelude } from '../../src/backends/redis/lua/group-prelude.js';
import { OWNERSHIP_SCRIPTS } from '../../src/backends/redis/lua/ownership-scripts.js';
import { RETENTION_SCRIPTS } from '../../src/backends/redis/lua/retention-scripts.js';
import { CLAIM, SCRIPTS, SETTLE } from '../../src/backends/redis/lua/scripts.js';

const ALL = [...SCRIPTS, ...OWNERSHIP_SCRIPTS, ...RETENTION_SCRIPTS];
// Lua's own functions called unqualified, and the keywords a call-like pattern can follow.
const BUILTINS = new Set(['tonumber', 'tostring', 'type', 'unpack', 'pairs', 'ipairs', 'error', 'pcall', 'select', 'next', 'assert']);
const KEYWORDS = new Set(['function', 'if', 'elseif', 'and', 'or', 'not', 'return', 'while', 'until', 'in', 'do', 'then']);

/** Every unqualified call in `source` (comments dropped) whose name is not defined before it. */
function undefinedCalls(source: string): string[] {
  const lua = source.replace(/--[^\n]*/g, '');
  const missing: string[] = [];
  for (const call of lua.matchAll(/(?<![\w.:])([A-Za-z_]\w*)\s*\(/g)) {
    const name = call[1]!;
    if (BUILTINS.has(name) || KEYWORDS.has(name)) continue;
    const before = lua.slice(0, call.index);
    if (/function\s+$/.test(before)) continue; // its definition
    const defined = new RegExp(`local function ${name}\\(|local [\\w, ]*\\b${name}\\b[\\w, ]*=`).test(before);
    if (!defined) missing.push(name);
  }
  return [...new Set(missing)];
}

describe('redis scripts: the group prelude', () => {
  it('gives every script each helper it calls, defined before the call', () => {
    for (const script of ALL) expect({ script: script.name, missing: undefinedCalls(script.source) }).toEqual({ script: script.name, missing: [] });
  });

  it('notices a call of something the script does not define', () => {
    expect(undefinedCalls(`${groupPrelude('')}\nreturn first_at(1)`)).toEqual(['first_at']);
  });

  it('leaves out the helpers a script never calls, and brings in what its helpers call', () => {
    const defines = (source: string, name: string) => source.includes(`local function ${name}(`);
    // The claim walks retries (next_claimable, which advances the cursor) but never looks up a time.
    expect(['next_claimable', 'advance', 'cursor', 'dget', 'dparse'].every((n) => defines(CLAIM.source, n))).toBe(true);
    expect(['first_at', 'start_cursor', 'ts_of', 'reopen', 'is_settled', 'frontier'].some((n) => defines(CLAIM.source, n))).toBe(false);
    expect(defines(SETTLE.source, 'first_at')).toBe(false);
    // A helper named only in a comment, or as part of a longer name, is not brought in.
    expect(defines(groupPrelude('-- first_at(x) is not called\nreturn my_cursor()'), 'first_at')).toBe(false);
    expect(defines(groupPrelude('return my_cursor()'), 'cursor')).toBe(false);
  });
});
