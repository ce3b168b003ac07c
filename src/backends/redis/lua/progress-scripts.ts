import { groupScript } from './script.js';

/* The progress scripts: reset, figures, replay, dead letters and their redrive. */

/** Drops the group's delivery state and dead letters in the partition; the cursor restarts (ARGV as INIT_GROUP). */
export const RESET_GROUP = groupScript(
  'reset-group',
  `
local err = require_group() if err then return err end
redis.call('DEL', KD, KO, KT, KR, KH, KDL, KDLO)
redis.call('HSET', KST, 'cursor', fmt(start_cursor(ARGV[3], ARGV[4])), 'leased', 0)
return 1
`,
);

/**
 * Read-only figures of the group in the partition: `{frontier, high
 * watermark, timestamp of frontier + 1 or '', leased, dead letters, open, low watermark}`.
 */
export const INFO = groupScript(
  'info',
  `
local err = require_group() if err then return err end
local f, h = frontier(), high()
local oldest = ''
if h > f then oldest = entry(f + 1)[2] end
return { fmt(f), fmt(h), oldest, tonumber(redis.call('HGET', KST, 'leased') or '0'), redis.call('HLEN', KDL), redis.call('ZCARD', KO), fmt(low()) }
`,
);

/**
 * Replay in the partition. ARGV[3]: 'seq' (ARGV[4] from sequence), 'at'
 * (ARGV[4] time in ms, resolved here) or 'ids' (ARGV[4..] sequences).
 */
export const REPLAY = groupScript(
  'replay',
  `
local err = require_group() if err then return err end
local mode = ARGV[3]
if mode == 'ids' then
  for i = 4, #ARGV do
    local s = tonumber(ARGV[i])
    if is_settled(s) then
      undead(s)
      reopen(s)
    end
  end
  return 1
end
local from
if mode == 'at' then from = first_at(tonumber(ARGV[4])) else from = math.max(tonumber(ARGV[4]), low()) end
if not from then return 0 end
local c = cursor()
if from - 1 < c then redis.call('HSET', KST, 'cursor', fmt(from - 1)) end
redis.call('ZREMRANGEBYSCORE', KH, fmt(from), '+inf')
local open = redis.call('ZRANGEBYSCORE', KO, fmt(from), '+inf')
for i = 1, #open do redis.call('ZADD', KH, open[i], open[i]) end
advance()
local dl = redis.call('HGETALL', KDL)
for i = 1, #dl, 2 do
  if tonumber(dl[i]) >= from then undead(tonumber(dl[i])) end
end
return 1
`,
);

/** Reopens dead letters with attempts reset: ARGV[3] 'all', or 'seqs' and ARGV[4..]. Returns how many. */
export const REDRIVE = groupScript(
  'redrive',
  `
local err = require_group() if err then return err end
local seqs = {}
if ARGV[3] == 'all' then
  local dl = redis.call('HKEYS', KDL)
  for i = 1, #dl do seqs[#seqs + 1] = tonumber(dl[i]) end
else
  for i = 4, #ARGV do
    if redis.call('HEXISTS', KDL, ARGV[i]) == 1 then seqs[#seqs + 1] = tonumber(ARGV[i]) end
  end
end
for i = 1, #seqs do
  undead(seqs[i])
  reopen(seqs[i])
end
return #seqs
`,
);

/**
 * A page of the partition's dead letters with id after ARGV[3] ('' for the
 * start), at most ARGV[4]. With ARGV[5] = '1' the cursor must name a current
 * dead letter here, else the reply is the string 'nocursor'. Returns
 * `{{id, sequence, record, t, z, d}...}`.
 */
export const DEAD_LETTERS = groupScript(
  'dead-letters',
  `
local err = require_group() if err then return err end
local after, limit = ARGV[3], tonumber(ARGV[4])
if ARGV[5] == '1' then
  if #redis.call('ZRANGEBYLEX', KDLO, '[' .. after .. ':', '(' .. after .. ';', 'LIMIT', 0, 1) == 0 then return 'nocursor' end
end
local from = '-'
if after ~= '' then from = '(' .. after .. ';' end
local members = redis.call('ZRANGEBYLEX', KDLO, from, '+', 'LIMIT', 0, limit)
local out = {}
for i = 1, #members do
  local id, s = string.match(members[i], '^(%d+):(%d+)$')
  local e = entry(tonumber(s))
  out[#out + 1] = { id, s, redis.call('HGET', KDL, s), e[2], e[4], e[6] }
end
return out
`,
);
