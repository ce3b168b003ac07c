import { groupPrelude, NOW_LUA } from './group-prelude.js';
import { REDRIVE, REPLAY, RESET_GROUP, type LuaScript } from './scripts.js';

/**
 * Partition ownership on Redis (ownership.ts has the design and the safety
 * argument). Two kinds of key:
 *
 * - the group's membership key `{prefix|stream|g|group}:members`, a hash
 *   `v` (a version bumped by every write) and `s` (the membership state as
 *   JSON), read by MEMBERSHIP_LOAD and written by MEMBERSHIP_SAVE only when
 *   `v` is still the version that was read (compare and set);
 * - per partition, the fence `{prefix|stream|p}:g:<group>:own`, a hash
 *   `owner` (absent: nobody may read or commit), `gen` (the generation
 *   fences compare with), `v` (the membership version last applied) and
 *   `sg` (the membership state's slot generation last applied). It shares
 *   the partition's hash tag, so readOwned and commit check it in the same
 *   script that reads or writes the partition.
 */

/** KEYS: members. ARGV: now. Returns `{version, stateJson or '', now}`. */
export const MEMBERSHIP_LOAD: LuaScript = {
  name: 'MEMBERSHIP_LOAD',
  keys: 1,
  source:
    NOW_LUA +
    `
local r = redis.call('HMGET', KEYS[1], 'v', 's')
return { r[1] or '0', r[2] or '', string.format('%d', NOW) }
`,
};

/** KEYS: members. ARGV: expected version, new state JSON. Returns the new version, or 0 when another write came first. */
export const MEMBERSHIP_SAVE: LuaScript = {
  name: 'MEMBERSHIP_SAVE',
  keys: 1,
  source: `
local v = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if v ~= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', v + 1, 's', ARGV[2])
return v + 1
`,
};

const owned = (name: string, body: string): LuaScript => ({
  name,
  keys: 11,
  source: groupPrelude(body) + `local KOWN = KEYS[11]\n` + body,
});

/**
 * Applies one membership decision to a partition's fence. ARGV: now,
 * partition, membership version, owner ('' for none), slot generation.
 * Ignored unless the version is newer than the last one applied, so a
 * delayed apply never undoes a later decision. The fence generation goes up
 * when the slot generation did (a grant happened since the last apply).
 * Returns `{owner or '', gen, frontier}` after the apply.
 */
export const OWNERSHIP_APPLY = owned(
  'OWNERSHIP_APPLY',
  `
local e = require_group()
if e then return e end
local version, owner, sg = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local f = redis.call('HMGET', KOWN, 'owner', 'gen', 'v', 'sg')
local gen = tonumber(f[2] or '0')
if version > tonumber(f[3] or '0') then
  if owner == '' then
    redis.call('HDEL', KOWN, 'owner')
  else
    if sg > tonumber(f[4] or '0') then gen = gen + 1 end
    redis.call('HSET', KOWN, 'owner', owner)
  end
  redis.call('HSET', KOWN, 'gen', gen, 'v', version, 'sg', math.max(sg, tonumber(f[4] or '0')))
end
return { redis.call('HGET', KOWN, 'owner') or '', gen, frontier() }
`,
);

/** Fence check shared by the scripts below: ARGV[3] member, ARGV[4] generation. */
const FENCE = `
local function fenced()
  local f = redis.call('HMGET', KOWN, 'owner', 'gen')
  return f[1] == ARGV[3] and tonumber(f[2] or '0') == tonumber(ARGV[4])
end
`;

/**
 * A release: the fence is cleared here at once (the old owner is fenced
 * before the membership state learns of it). ARGV: now, partition, member,
 * generation. Returns 1, or 0 for a stale fence.
 */
export const OWNERSHIP_RELEASE = owned(
  'OWNERSHIP_RELEASE',
  FENCE +
    `
if not fenced() then return 0 end
redis.call('HDEL', KOWN, 'owner')
return 1
`,
);

/**
 * readOwned: the fence check and the range read in one step. ARGV: now,
 * partition, member, generation, after, limit. Returns 'stale' or the entries.
 */
export const OWNERSHIP_READ = owned(
  'OWNERSHIP_READ',
  FENCE +
    `
if not fenced() then return 'stale' end
return redis.call('XRANGE', KLOG, string.format('%d', tonumber(ARGV[5]) + 1) .. '-0', '+', 'COUNT', ARGV[6])
`,
);

/**
 * An offset commit, fenced, as memory/ownership.ts commit: dead letters in
 * (frontier, upTo] not already dead, then every open delivery up to upTo
 * closes and the cursor moves to upTo. ARGV: now, partition, member,
 * generation, upTo, death order, then per dead letter: sequence, attempt,
 * encoded reason. Returns 'ok', 'stale', or `{'beyond', highWatermark}`.
 */
export const OWNERSHIP_COMMIT = owned(
  'OWNERSHIP_COMMIT',
  FENCE +
    `
if not fenced() then return 'stale' end
local e = require_group()
if e then return e end
local upTo = tonumber(ARGV[5])
local h = high()
if upTo > h then return { 'beyond', h } end
local fr = frontier()
if upTo <= fr then return 'ok' end
for i = 7, #ARGV, 3 do
  local s = tonumber(ARGV[i])
  if s > fr and redis.call('HEXISTS', KDL, fmt(s)) == 0 then dead(s, tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[6]) end
end
local open = redis.call('ZRANGEBYSCORE', KO, '-inf', fmt(upTo))
for i = 1, #open do
  local s = tonumber(open[i])
  local d = dget(s)
  if d then close(s, d) else redis.call('ZREM', KO, open[i]) end
end
if upTo > cursor() then redis.call('HSET', KST, 'cursor', fmt(upTo)) end
redis.call('ZREMRANGEBYSCORE', KH, '-inf', fmt(cursor()))
advance()
return 'ok'
`,
);

/**
 * Whether a competing-consumer lease is live in this partition (ownership
 * refuses to start beside one). ARGV: now, partition. Returns 1 or 0.
 */
export const LIVE_LEASES = owned(
  'LIVE_LEASES',
  `
local e = require_group()
if e then return e end
if tonumber(redis.call('HGET', KST, 'leased') or '0') <= 0 then return 0 end
local later = redis.call('ZRANGEBYSCORE', KT, '(' .. fmt(NOW), '+inf')
for i = 1, #later do
  local d = dget(tonumber(later[i]))
  if d and d.s == 'L' and d.va > NOW then return 1 end
end
return 0
`,
);

/**
 * REPLAY, RESET_GROUP and REDRIVE with the partition's fence as an 11th key:
 * the owner's generation goes up in the same step as the change, so a commit
 * of the old generation can never land after it (the owner re-reads from
 * the new frontier with the generation its next heartbeat returns).
 */
function fencing(script: LuaScript): LuaScript {
  return {
    name: `${script.name}_FENCING`,
    keys: 11,
    source: `if redis.call('HEXISTS', KEYS[11], 'owner') == 1 then redis.call('HINCRBY', KEYS[11], 'gen', 1) end\n` + script.source,
  };
}

export const FENCING_VARIANTS: ReadonlyMap<LuaScript, LuaScript> = new Map([REPLAY, RESET_GROUP, REDRIVE].map((s) => [s, fencing(s)]));

export const OWNERSHIP_SCRIPTS: readonly LuaScript[] = [
  MEMBERSHIP_LOAD,
  MEMBERSHIP_SAVE,
  OWNERSHIP_APPLY,
  OWNERSHIP_RELEASE,
  OWNERSHIP_READ,
  OWNERSHIP_COMMIT,
  LIVE_LEASES,
  ...FENCING_VARIANTS.values(),
];
