import { NOW_LUA } from './group-prelude.js';
import type { LuaScript } from './scripts.js';

/*
 * Retention and deletion scripts (capability `retention`; docs/semantics.md,
 * "Retention"). Like every other script each touches one hash slot only:
 * the catalog scripts the `{prefix}` keys (stream catalog, retention policies,
 * streams being deleted), the partition scripts one `{prefix|stream|p}`
 * partition's keys. A step over several partitions is one script per
 * partition, so each partition moves atomically on its own; see retention.ts
 * for why a crash between them leaves a consistent state.
 */

/** Time as the group scripts read it: ARGV[1] epoch ms, or '' for the server's TIME. */
const NOW = `${NOW_LUA}local function fmt(n) return string.format('%d', n) end
`;

/** The per-group keys a partition script declares after the partition's own, in this order (keys.ts `groupState`). */
export const GROUP_STATE_KEYS = 8;

/**
 * KEYS: streams catalog, retention policies, deleted streams. ARGV: name,
 * catalog JSON, policy JSON ('' for none). Returns 1 when created, 0 when
 * the name is taken, -1 when a deleted stream of that name still has keys to
 * purge (the caller purges them and tries again).
 */
export const CREATE_STREAM: LuaScript = {
  name: 'create-stream',
  keys: 3,
  source: `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], ARGV[1], ARGV[3]) end
return 1
`,
};

/** KEYS: streams catalog, retention policies. ARGV: name, policy JSON or ''. Returns 0 when the stream does not exist. */
export const SET_RETENTION: LuaScript = {
  name: 'set-retention',
  keys: 2,
  source: `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
if ARGV[2] == '' then redis.call('HDEL', KEYS[2], ARGV[1]) else redis.call('HSET', KEYS[2], ARGV[1], ARGV[2]) end
return 1
`,
};

/**
 * First step of deleteStream: the stream leaves the catalog and is recorded
 * as being deleted (its keys still to purge), in one step. KEYS: streams
 * catalog, retention policies, deleted streams. ARGV: name, deletion time
 * in ms and '|' (the `deleted` entry is `<ms>|<catalog JSON>`). Returns the
 * catalog JSON, or false when the stream does not exist.
 */
export const UNLIST_STREAM: LuaScript = {
  name: 'unlist-stream',
  keys: 3,
  source: `
local meta = redis.call('HGET', KEYS[1], ARGV[1])
if not meta then return false end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2] .. meta)
return meta
`,
};

/**
 * Deletes every key of one partition of a deleted stream. KEYS: log, meta,
 * ids, then ${GROUP_STATE_KEYS} keys per group (and any other per-partition
 * key the caller enumerates). ARGV[1]: the deleted stream's incarnation
 * ('' for none): a partition that already carries another one belongs to a
 * stream created again since, and is left alone. Returns how many keys existed.
 */
export const DROP_PARTITION: LuaScript = {
  name: 'drop-partition',
  keys: -1,
  source: `
if ARGV[1] ~= '' then
  local inc = redis.call('HGET', KEYS[2], 'inc')
  if inc and inc ~= ARGV[1] then return 0 end
end
local n = 0
for i = 1, #KEYS, 500 do n = n + redis.call('DEL', unpack(KEYS, i, math.min(i + 499, #KEYS))) end
return n
`,
};

/**
 * Deletes one group's state in one partition. KEYS: the group's keys there;
 * the cursor hash (KEYS[1]) goes too, so scripts of processes that still
 * know the group find no state (RHEO_NOGROUP) and write nothing.
 */
export const DROP_GROUP: LuaScript = {
  name: 'drop-group',
  keys: -1,
  source: `
return redis.call('DEL', unpack(KEYS))
`,
};

/**
 * One trim batch of one partition, atomic on its slot.
 * KEYS: log, meta, ids, then per group (sorted by name) its
 * ${GROUP_STATE_KEYS} keys st, d, o, t, r, h, dl, dlo (lua/group-prelude.ts).
 * ARGV: now, stream incarnation ('' for none), keep ('' none), cutoff
 * timestamp ms ('' none), max age ms ('' none: cutoff = now - max age),
 * budget (most events to delete), force ('1'/'0').
 *
 * The bound is the higher of the count bound (high watermark - keep) and the
 * age bound (the leading run of events older than the cutoff, looking at most
 * `budget` events past the low watermark), capped by the budget and, unless
 * forced, by every group's frontier (min(cursor, lowest open - 1)) exactly
 * as the memory backend computes it. Every group then forgets what lies at
 * or below the bound (with `force`, unsettled sequences count as gone and the
 * cursor moves up to the bound; otherwise only its dead letters there go),
 * the ids of the trimmed entries leave the id index, XTRIM MINID removes
 * the entries and the meta hash records the new low watermark `lw`.
 * Returns `{deleted, low watermark, {unsettled per group}}`.
 */
export const TRIM_PARTITION: LuaScript = {
  name: 'trim-partition',
  keys: -1,
  source: `${NOW}
local KLOG, KMETA, KIDS = KEYS[1], KEYS[2], KEYS[3]
local inc = redis.call('HGET', KMETA, 'inc')
if ARGV[2] ~= '' and inc ~= ARGV[2] then return redis.error_reply('RHEO_NOSTREAM the stream was deleted') end
local low = tonumber(redis.call('HGET', KMETA, 'lw') or '1')
local h = tonumber(redis.call('HGET', KMETA, 'hw') or '0')
local budget = tonumber(ARGV[6])
local force = ARGV[7] == '1'
local groups = {}
for i = 4, #KEYS, ${GROUP_STATE_KEYS} do
  groups[#groups + 1] = { st = KEYS[i], d = KEYS[i + 1], o = KEYS[i + 2], t = KEYS[i + 3], r = KEYS[i + 4], h = KEYS[i + 5], dl = KEYS[i + 6], dlo = KEYS[i + 7] }
end
local function cursor(g)
  local c = redis.call('HGET', g.st, 'cursor')
  if not c then return nil end
  return tonumber(c)
end
local function frontier(g)
  local c = cursor(g)
  if not c then return nil end
  local m = redis.call('ZRANGE', g.o, 0, 0)[1]
  if m and tonumber(m) - 1 < c then return tonumber(m) - 1 end
  return c
end

local bound = low - 1
if budget > 0 then
  if ARGV[3] ~= '' then bound = math.max(bound, h - tonumber(ARGV[3])) end
  local cutoff = nil
  if ARGV[4] ~= '' then cutoff = tonumber(ARGV[4]) elseif ARGV[5] ~= '' then cutoff = NOW - tonumber(ARGV[5]) end
  if cutoff then
    local last, seen, from, done = low - 1, 0, fmt(low) .. '-0', false
    while not done and seen < budget do
      local page = redis.call('XRANGE', KLOG, from, '+', 'COUNT', math.min(1000, budget - seen))
      if #page == 0 then break end
      for i = 1, #page do
        if tonumber(page[i][2][2]) >= cutoff then done = true break end
        last = tonumber(string.match(page[i][1], '^(%d+)'))
      end
      seen = seen + #page
      from = '(' .. page[#page][1]
    end
    bound = math.max(bound, last)
  end
  bound = math.min(bound, low - 1 + budget)
  if not force then
    for _, g in ipairs(groups) do
      local f = frontier(g)
      if f and f < bound then bound = f end
    end
  end
end
local lost = {}
if bound < low then
  for i = 1, #groups do lost[i] = 0 end
  return { 0, fmt(low), lost }
end

-- Each group forgets the trimmed sequences (memory/group-partition.ts trimTo).
for gi, g in ipairs(groups) do
  local unsettled = 0
  local c = cursor(g)
  if c then
    local open = redis.call('ZRANGEBYSCORE', g.o, '-inf', fmt(bound))
    for _, s in ipairs(open) do
      local v = redis.call('HGET', g.d, s)
      if v and string.sub(v, 1, 1) == 'L' then redis.call('HINCRBY', g.st, 'leased', -1) end
      redis.call('HDEL', g.d, s)
      redis.call('ZREM', g.o, s)
      redis.call('ZREM', g.t, s)
      redis.call('ZREM', g.r, s)
      unsettled = unsettled + 1
    end
    local held = redis.call('ZRANGEBYSCORE', g.h, '-inf', fmt(bound))
    local heldAbove = 0
    for _, s in ipairs(held) do
      redis.call('ZREM', g.h, s)
      if tonumber(s) > c then heldAbove = heldAbove + 1 end
    end
    if bound > c then
      unsettled = unsettled + bound - c - heldAbove
      c = bound
    end
    while redis.call('HEXISTS', g.d, fmt(c + 1)) == 1 or redis.call('ZREM', g.h, fmt(c + 1)) == 1 do c = c + 1 end
    redis.call('HSET', g.st, 'cursor', fmt(c))
    -- Dead letters of trimmed events go with them: a scan of the group's dead letters here.
    local dl = redis.call('HGETALL', g.dl)
    for i = 1, #dl, 2 do
      if tonumber(dl[i]) <= bound then
        redis.call('HDEL', g.dl, dl[i])
        redis.call('ZREM', g.dlo, string.match(dl[i + 1], '^(%d+)|') .. ':' .. dl[i])
      end
    end
  end
  lost[gi] = unsettled
end

-- The ids of the trimmed entries leave the id index: an id is remembered only while its event is retained.
local from = fmt(low) .. '-0'
while true do
  local page = redis.call('XRANGE', KLOG, from, fmt(bound) .. '-0', 'COUNT', 1000)
  if #page == 0 then break end
  local ids = {}
  for i = 1, #page do
    local d = page[i][2][6]
    -- codec.ts writes the id first; an id with an escaped character is decoded in full.
    ids[#ids + 1] = string.match(d, '^{"i":"([^"\\\\]*)"') or cjson.decode(d).i
  end
  redis.call('HDEL', KIDS, unpack(ids))
  from = '(' .. page[#page][1]
end
local deleted = redis.call('XTRIM', KLOG, 'MINID', fmt(bound + 1) .. '-0')
redis.call('HSET', KMETA, 'lw', fmt(bound + 1))
return { deleted, fmt(bound + 1), lost }
`,
};

/**
 * First step of deleteGroup: the group leaves its stream's catalog and is
 * recorded as being deleted, in one step. KEYS: the stream's group catalog,
 * its deleted-groups set. ARGV: group. Returns the catalog JSON, or false.
 */
export const UNLIST_GROUP: LuaScript = {
  name: 'unlist-group',
  keys: 2,
  source: `
local meta = redis.call('HGET', KEYS[1], ARGV[1])
if not meta then return false end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[1])
return meta
`,
};

/** KEYS: a lock key. ARGV: the holder's token. Deletes the key only while the token still holds it. */
export const RELEASE_LOCK: LuaScript = {
  name: 'release-lock',
  keys: 1,
  source: `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`,
};

export const RETENTION_SCRIPTS: readonly LuaScript[] = [CREATE_STREAM, SET_RETENTION, UNLIST_STREAM, UNLIST_GROUP, DROP_PARTITION, DROP_GROUP, TRIM_PARTITION, RELEASE_LOCK];
